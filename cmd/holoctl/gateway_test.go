package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
)

// stubFleet answers with two boards and records calls and actions.
type stubFleet struct {
	mu     sync.Mutex
	labels map[string]string
	call   string
	action string
	timed  fleet.Action
}

func (s *stubFleet) view(id string) fleet.BoardView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fleet.BoardView{ID: id, Hostname: "holo-" + id, Address: 3, Line: "line0", Groups: []int{1},
		Labels: s.labels, Online: true, Firmware: "1.0.0", Transports: []string{"rs485:line0"}}
}

func (s *stubFleet) Boards(fleet.Filter) []fleet.BoardView {
	return []fleet.BoardView{s.view("aa01"), s.view("bb02")}
}

func (s *stubFleet) Board(id string) (fleet.BoardView, error) {
	if id != "aa01" && id != "bb02" {
		return fleet.BoardView{}, fleet.ErrUnknownBoard
	}
	return s.view(id), nil
}

func (s *stubFleet) SetLabels(id string, l map[string]string) (fleet.BoardView, error) {
	s.mu.Lock()
	s.labels = l
	s.mu.Unlock()
	return s.Board(id)
}

func (s *stubFleet) Call(_ context.Context, id, method, path string, body []byte) (fleet.Reply, error) {
	s.mu.Lock()
	s.call = id + " " + method + " " + path + " " + string(body)
	s.mu.Unlock()
	if path == "/missing" {
		return fleet.Reply{Status: 404, Body: []byte(`{"error":"not_found","message":"no such endpoint"}`)}, nil
	}
	return fleet.Reply{Status: 200, Body: []byte(`{"on":true}`)}, nil
}

func (s *stubFleet) Do(_ context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	b, _ := json.Marshal(sel)
	s.mu.Lock()
	s.action = string(b) + " " + a.Kind + " " + string(a.Body)
	s.timed = a
	s.mu.Unlock()
	if !a.At.IsZero() || a.Lead != 0 {
		at := a.At
		if at.IsZero() {
			at = time.Now().Add(a.Lead)
		}
		return []fleet.Result{{Board: "aa01", Via: "group", Fire: fleet.FireLine, FiredAt: at}}, nil
	}
	return []fleet.Result{{Board: "aa01", Via: "group"}, {Board: "bb02", Via: "group"}}, nil
}

func (s *stubFleet) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	ch := make(chan fleet.Event, 2)
	ch <- fleet.Event{N: 1, Board: "aa01", Type: "happening", Kind: "touch", Seq: 4, Data: []byte(`{"x":1}`)}
	ch <- fleet.Event{N: 2, Board: "bb02", Type: "offline", Reason: "no reply"}
	close(ch)
	return &fleet.Watcher{C: ch, Dropped: func() uint64 { return 0 }}
}

func startTestGateway(t *testing.T) (*stubFleet, string, string) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := toks.Create("admin", auth.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	fl := &stubFleet{}
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Fleet: fl, Tokens: toks, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("gateway did not stop")
		}
	})
	return fl, "http://" + ln.Addr().String(), admin
}

func TestHoloctlGateway(t *testing.T) {
	fl, url, admin := startTestGateway(t)
	t.Setenv("HOLO_TOKEN", admin)
	ctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{args[0], "--gateway", url}, args[1:]...), &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, tc := range []struct {
		args []string
		code int
		out  []string
	}{
		{[]string{"gw", "boards"}, 0, []string{"ID", "HOSTNAME", "aa01", "holo-bb02", "rs485:line0"}},
		{[]string{"gw", "-o", "json", "boards"}, 0, []string{`"id": "aa01"`, `"firmware": "1.0.0"`}},
		{[]string{"gw", "board", "aa01"}, 0, []string{"hostname", "holo-aa01", "yes"}},
		{[]string{"gw", "board", "zz"}, 1, nil},
		{[]string{"gw", "labels", "aa01", "room=hall"}, 0, []string{"room=hall"}},
		{[]string{"gw", "call", "aa01", "patch", "/leds", `{"on":true}`}, 0, []string{`"on": true`}},
		{[]string{"gw", "call", "aa01", "GET", "/missing"}, 1, nil},
		{[]string{"gw", "call", "aa01", "GET", "/leds", `{bad`}, 2, nil},
		{[]string{"gw", "do", "group:1", "scene_apply", `{"name":"x"}`}, 0, []string{"aa01", "group frame"}},
		{[]string{"gw", "do", "nonsense", "leds"}, 2, nil},
		{[]string{"gw", "events"}, 0, []string{"touch #4", "no reply"}},
		{[]string{"gw", "-o", "json", "events"}, 0, []string{`"board":"aa01"`}},
		{[]string{"gw", "dance"}, 2, nil},
		{[]string{"token", "create", "ci", "viewer"}, 0, []string{"holo_"}},
		{[]string{"token", "list"}, 0, []string{"admin", "ci", "viewer"}},
		{[]string{"token", "revoke", "ci"}, 0, []string{"revoked"}},
		{[]string{"token", "revoke", "ci"}, 1, nil},
		{[]string{"token", "create", "x", "root"}, 1, nil},
	} {
		code, out, errOut := ctl(tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errOut)
			continue
		}
		for _, w := range tc.out {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	if fl.call != `aa01 PATCH /leds {"on":true}` && !strings.HasPrefix(fl.call, "aa01 GET /missing") {
		t.Errorf("call %q", fl.call)
	}
	if fl.action != `{"groups":[1]} scene_apply {"name":"x"}` {
		t.Errorf("action %q", fl.action)
	}

	// Timed fires: a lead or a moment reaches the fleet; bad ones are
	// usage errors and send nothing.
	if code, out, errOut := ctl("gw", "do", "--in", "750ms", "group:2", "scene_end"); code != 0 || !strings.Contains(out, "fired by line at") {
		t.Errorf("gw do --in: %d %s%s", code, out, errOut)
	}
	if fl.timed.Lead != 750*time.Millisecond || !fl.timed.At.IsZero() {
		t.Errorf("gw do --in 750ms sent lead %v at %v", fl.timed.Lead, fl.timed.At)
	}
	moment := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	if code, out, errOut := ctl("gw", "do", "--at", moment.Format(time.RFC3339Nano), "all", "screen_off"); code != 0 || !strings.Contains(out, "fired by line") {
		t.Errorf("gw do --at: %d %s%s", code, out, errOut)
	}
	if !fl.timed.At.Equal(moment) {
		t.Errorf("gw do --at %v sent at %v", moment, fl.timed.At)
	}
	before := fl.action
	for _, bad := range [][]string{
		{"gw", "do", "--in", "1s", "--at", moment.Format(time.RFC3339), "all", "scene_end"},
		{"gw", "do", "--in", "-1s", "all", "scene_end"},
		{"gw", "do", "--at", "tomorrow", "all", "scene_end"},
	} {
		if code, _, _ := ctl(bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	if fl.action != before {
		t.Errorf("a refused timed fire reached the fleet: %q", fl.action)
	}

	// A board's own error reaches the user with its code and message.
	_, _, errOut := ctl("gw", "call", "aa01", "GET", "/missing")
	if !strings.Contains(errOut, "404 not_found: no such endpoint") {
		t.Errorf("board error: %s", errOut)
	}
	// Without a token the gateway refuses.
	t.Setenv("HOLO_TOKEN", "")
	code, _, errOut := ctl("gw", "boards")
	if code != 1 || !strings.Contains(errOut, "401 unauthenticated") {
		t.Errorf("no token: %d %s", code, errOut)
	}
}
