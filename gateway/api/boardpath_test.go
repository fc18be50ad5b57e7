package api

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/auth"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestRawCallPathCanonical is the percent-encoding attack end to end: an
// operator's raw board call to a spelling of the admin-only /web or
// /network is refused (REST and gRPC), recorded in the audit log, and
// never reaches the fleet; canonical paths reach it exactly as decided.
func TestRawCallPathCanonical(t *testing.T) {
	rec := &recorder{}
	g := startGateway(t, func(c *Config) { c.Guard = &auth.Guard{Tokens: c.Tokens, Audit: rec} })
	lastCall := func() string {
		g.fake.mu.Lock()
		defer g.fake.mu.Unlock()
		if g.fake.call == nil {
			return ""
		}
		p := g.fake.call[2]
		g.fake.call = nil
		return p
	}
	body := func(method, path string) string {
		b, _ := json.Marshal(map[string]string{"method": method, "path": path})
		return string(b)
	}
	for _, tc := range []struct {
		role, method, path string
		want               int
		sent               string // the path the fleet got ("" none)
	}{
		{"operator", "GET", "/%77eb", 400, ""},
		{"operator", "GET", "/%6eetwork", 400, ""},
		{"operator", "GET", "//web", 400, ""},
		{"operator", "GET", "/./web", 400, ""},
		{"operator", "GET", "/a/../web", 400, ""},
		{"operator", "GET", "/%2e%2e/web", 400, ""},
		{"operator", "GET", "/%2577eb", 400, ""},
		{"operator", "GET", "/web/", 400, ""},
		{"operator", "POST", "/leds/../ota/pull", 400, ""},
		{"admin", "GET", "/%77eb", 400, ""}, // not canonical: refused to anyone
		{"operator", "GET", "/web", 403, ""},
		{"operator", "GET", "/network", 403, ""},
		{"operator", "GET", "/leds", 200, "/leds"},
		{"operator", "GET", "/files/my%20clip.mov?x=%2F", 200, "/files/my%20clip.mov?x=%2F"},
		{"admin", "GET", "/web", 200, "/web"},
		{"admin", "GET", "/api/v1/network", 200, "/network"},
	} {
		code, resp := g.rest(t, tc.role, "POST", "/v1/boards/b1/call", body(tc.method, tc.path))
		if code != tc.want {
			t.Errorf("REST %s %s %s: %d %s, want %d", tc.role, tc.method, tc.path, code, resp, tc.want)
		}
		if got := lastCall(); got != tc.sent {
			t.Errorf("REST %s %s %s: the fleet got path %q, want %q", tc.role, tc.method, tc.path, got, tc.sent)
		}
		_, err := g.client.CallBoard(g.ctx(t, tc.role), &fleetv1.CallBoardRequest{Id: "b1", Method: tc.method, Path: tc.path})
		wantCode := map[int]codes.Code{200: codes.OK, 400: codes.InvalidArgument, 403: codes.PermissionDenied}[tc.want]
		if status.Code(err) != wantCode {
			t.Errorf("gRPC %s %s %s: %v, want %v", tc.role, tc.method, tc.path, err, wantCode)
		}
		if got := lastCall(); got != tc.sent {
			t.Errorf("gRPC %s %s %s: the fleet got path %q, want %q", tc.role, tc.method, tc.path, got, tc.sent)
		}
	}
	// Every refusal of a non-canonical path is in the audit log, with
	// the path as sent.
	refused := rec.find(func(r auth.Record) bool {
		return !r.Allowed && r.Operation == "CallBoard" && r.Code == codes.InvalidArgument.String() &&
			strings.Contains(r.Reason, "not canonical")
	})
	if len(refused) != 2*10 {
		t.Errorf("audit holds %d refusals of non-canonical paths, want 20", len(refused))
	}
	var sawEncoded bool
	for _, r := range refused {
		if r.Path == "/%77eb" && r.Who.Name == "t-operator" {
			sawEncoded = true
		}
	}
	if !sawEncoded {
		t.Errorf("no audit record names the operator's /%%77eb: %+v", refused)
	}
}
