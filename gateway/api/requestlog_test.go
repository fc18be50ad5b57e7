package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// logCapture collects JSON log records.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// records returns the records whose msg is msg.
func (c *logCapture) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(c.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// waitRecord waits for the request record with request_id id (a record is
// written when the call ends on the server, which may be just after the
// client has its reply).
func (c *logCapture) waitRecord(t *testing.T, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, r := range c.records(t, "api: request") {
			if r["request_id"] == id {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request record with request_id %q", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestRequestLogAndID(t *testing.T) {
	logs := &logCapture{}
	g := startGateway(t, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	rest := func(role, path, id string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, g.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if role != "" {
			req.Header.Set("Authorization", "Bearer "+g.secrets[role])
		}
		if id != "" {
			req.Header.Set(RequestIDHeader, id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct {
		name, role, path, id string
		keep                 bool // the caller's id comes back
		method, code         string
	}{
		{"REST with an id", "viewer", "/v1/boards", "req-42.a_b:c", true, "/holo.fleet.v1.FleetService/ListBoards", "OK"},
		{"REST without", "viewer", "/v1/boards/b1", "", false, "/holo.fleet.v1.FleetService/GetBoard", "OK"},
		{"REST unusable id", "viewer", "/v1/boards", "bad id\twith spaces", false, "/holo.fleet.v1.FleetService/ListBoards", "OK"},
		{"REST too long", "viewer", "/v1/boards", strings.Repeat("x", 65), false, "/holo.fleet.v1.FleetService/ListBoards", "OK"},
		{"REST refused", "", "/v1/boards", "no-token-1", true, "/holo.fleet.v1.FleetService/ListBoards", "Unauthenticated"},
		{"REST unknown board", "viewer", "/v1/boards/nope", "", false, "/holo.fleet.v1.FleetService/GetBoard", "NotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rest(tc.role, tc.path, tc.id)
			got := resp.Header.Get(RequestIDHeader)
			if tc.keep && got != tc.id || !tc.keep && !hexID.MatchString(got) {
				t.Fatalf("X-Request-Id %q (sent %q); status %d %s", got, tc.id, resp.StatusCode, body)
			}
			if n := len(resp.Header.Values(RequestIDHeader)); n != 1 {
				t.Errorf("%d X-Request-Id headers", n)
			}
			if v := resp.Header.Get("Grpc-Metadata-X-Request-Id"); v != "" {
				t.Errorf("request id also as %q", v)
			}
			rec := g.checkRecord(t, logs, got)
			if rec["method"] != tc.method || rec["code"] != tc.code {
				t.Errorf("record %v: want method %s code %s", rec, tc.method, tc.code)
			}
			// The record says who called, from where, by which surface.
			wantWho, wantRole := "", ""
			if tc.role != "" {
				wantWho, wantRole = "t-"+tc.role, tc.role
			}
			if rec["token"] != wantWho || rec["role"] != wantRole || rec["surface"] != "rest" ||
				!strings.HasPrefix(rec["client"].(string), "127.0.0.1:") {
				t.Errorf("record %v: want token %q role %q surface rest, a loopback client", rec, wantWho, wantRole)
			}
		})
	}

	t.Run("gRPC with an id", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(g.ctx(t, "viewer"), RequestIDKey, "grpc-7")
		var hdr metadata.MD
		if _, err := g.client.ListBoards(ctx, &fleetv1.ListBoardsRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatal(err)
		}
		if v := hdr.Get(RequestIDKey); len(v) != 1 || v[0] != "grpc-7" {
			t.Fatalf("header metadata %v", hdr)
		}
		if rec := g.checkRecord(t, logs, "grpc-7"); rec["code"] != "OK" || rec["token"] != "t-viewer" || rec["surface"] != "grpc" {
			t.Errorf("record %v", rec)
		}
	})
	t.Run("gRPC without", func(t *testing.T) {
		var hdr metadata.MD
		if _, err := g.client.GetBoard(g.ctx(t, "viewer"), &fleetv1.GetBoardRequest{Id: "b1"}, grpc.Header(&hdr)); err != nil {
			t.Fatal(err)
		}
		v := hdr.Get(RequestIDKey)
		if len(v) != 1 || !hexID.MatchString(v[0]) {
			t.Fatalf("header metadata %v", hdr)
		}
		g.checkRecord(t, logs, v[0])
	})
	t.Run("gRPC stream", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(g.ctx(t, "viewer"), RequestIDKey, "watch-1")
		stream, err := g.client.WatchEvents(ctx, &fleetv1.WatchEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		hdr, err := stream.Header()
		if err != nil {
			t.Fatal(err)
		}
		if v := hdr.Get(RequestIDKey); len(v) != 1 || v[0] != "watch-1" {
			t.Fatalf("header metadata %v", hdr)
		}
	})
}

// checkRecord waits for id's record and checks the keys every request
// record has.
func (g *testGateway) checkRecord(t *testing.T, logs *logCapture, id string) map[string]any {
	t.Helper()
	rec := logs.waitRecord(t, id)
	if rec["level"] != "INFO" {
		t.Errorf("record %v: level", rec)
	}
	for _, k := range []string{"method", "code", "duration", "request_id", "token", "role", "surface", "client"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record %v lacks %q", rec, k)
		}
	}
	return rec
}
