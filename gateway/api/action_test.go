package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestActionBodyRefused: an action whose body a board would refuse is
// answered 400 (gRPC InvalidArgument) with the reason, and the fleet is
// not asked to do anything: a group frame would carry no reply, so the
// refusal could not come from the boards.
func TestActionBodyRefused(t *testing.T) {
	g := startGateway(t)
	g.fake.set(func(f *fakeFleet) { f.results = []fleet.Result{{Board: "b1", Via: "group"}} })
	for _, tc := range []struct{ kind, body, reason string }{
		{"leds", `{"mode":"sparkle"}`, `mode \"sparkle\" is not one of`},
		{"leds", `{"brightness":0}`, "brightness 0: want a percent from 1 to 100"},
		{"leds", `{"on":true}`, `unknown field \"on\"`},
		{"holo", `{"motion":"move","x":3}`, "x 3"},
		{"scene_apply", `{"slot":300}`, "slot must be 1-255"},
		{"scene_apply", `{"name":"a","slot":1}`, "give name, slot, or scene"},
		{"screen_show", `{"path":"/a.mov","loops":0}`, "loops must be 1-10000"},
		{"screen_off", `{"now":true}`, `unknown field \"now\"`},
		{"dance", `{}`, "unknown kind"},
	} {
		g.fake.set(func(f *fakeFleet) { f.action = fleet.Action{} })
		req := `{"selector":{"groups":[1]},"kind":"` + tc.kind + `","body":` + tc.body + `}`
		code, body := g.rest(t, "operator", "POST", "/v1/actions", req)
		if code != http.StatusBadRequest || !strings.Contains(body, `"error":"invalid_argument"`) || !strings.Contains(body, tc.reason) {
			t.Errorf("%s %s: %d %s (want 400 saying %s)", tc.kind, tc.body, code, body, tc.reason)
		}
		if g.fake.action.Kind != "" {
			t.Errorf("%s %s: the fleet was asked to do it", tc.kind, tc.body)
		}

		v := &structpb.Value{}
		if err := v.UnmarshalJSON([]byte(tc.body)); err != nil {
			t.Fatal(err)
		}
		_, err := g.client.DoAction(g.ctx(t, "operator"), &fleetv1.DoActionRequest{
			Selector: &fleetv1.Selector{Groups: []int32{1}}, Kind: tc.kind, Body: v})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), strings.ReplaceAll(tc.reason, `\"`, `"`)) {
			t.Errorf("gRPC %s %s: %v", tc.kind, tc.body, err)
		}
		if g.fake.action.Kind != "" {
			t.Errorf("gRPC %s %s: the fleet was asked to do it", tc.kind, tc.body)
		}
	}
	// A good body still goes through.
	code, body := g.rest(t, "operator", "POST", "/v1/actions", `{"selector":{"groups":[1]},"kind":"leds","body":{"mode":"rainbow","loop":true}}`)
	if code != 200 || g.fake.action.Kind != "leds" {
		t.Errorf("good body: %d %s", code, body)
	}
}

// TestActionBoardRefusalREST: over REST, against real boards, a board that
// refuses an action gives its error code in error and its message in
// message, each as the board sent it.
func TestActionBoardRefusalREST(t *testing.T) {
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: 2, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	var ids []string
	for _, b := range fm.Boards() {
		if err := ld.Add(b.URL, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	fl := fleet.New(fleet.Options{Drivers: []fleet.Driver{ld}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = fl.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	g := startGateway(t, func(c *Config) { c.Fleet = fl })
	online := true
	deadline := time.Now().Add(30 * time.Second)
	for len(fl.Boards(fleet.Filter{Online: &online})) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatal("boards not online")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// What the board itself says to the same request.
	direct, err := fl.Call(t.Context(), ids[0], "POST", "/scenes/apply", []byte(`{"name":"nope"}`))
	if err != nil {
		t.Fatal(err)
	}
	var be struct{ Error, Message string }
	if err := json.Unmarshal(direct.Body, &be); err != nil || be.Error != "unknown_scene" || be.Message == "" {
		t.Fatalf("board reply %d %s", direct.Status, direct.Body)
	}

	code, body := g.rest(t, "operator", "POST", "/v1/actions",
		`{"selector":{"boards":["`+ids[0]+`"]},"kind":"scene_apply","body":{"name":"nope"}}`)
	if code != 200 {
		t.Fatalf("actions: %d %s", code, body)
	}
	var out struct {
		Results []struct {
			Board, Via, Error, Message, Body string
			Status                           int
		}
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("reply %s: %v", body, err)
	}
	r := out.Results[0]
	if r.Error != be.Error || r.Message != be.Message || r.Status != 404 || r.Board != ids[0] || r.Via != "lan" {
		t.Errorf("result %+v, want error %q message %q status 404", r, be.Error, be.Message)
	}
	if strings.Contains(r.Error, ":") {
		t.Errorf("error %q carries more than the code", r.Error)
	}

	// A board that does it reports no error.
	code, body = g.rest(t, "operator", "POST", "/v1/actions",
		`{"selector":{"boards":["`+ids[1]+`"]},"kind":"leds","body":{"mode":"solid","brightness":5}}`)
	if code != 200 || !strings.Contains(body, `"error":""`) || !strings.Contains(body, `"status":200`) {
		t.Errorf("good action: %d %s", code, body)
	}
}

// TestActionFireTime: fire_at and lead_ms reach the fleet as the
// action's moment or lead, over REST and gRPC; a result's fire and
// fired_at come back; both at once, a lead out of range, and the fleet's
// ErrBadTime are invalid arguments (400).
func TestActionFireTime(t *testing.T) {
	g := startGateway(t)
	fired := time.Date(2026, 3, 1, 20, 0, 0, 500_000_000, time.UTC)
	g.fake.set(func(f *fakeFleet) {
		f.results = []fleet.Result{{Board: "b1", Via: "group", Fire: fleet.FireLine, FiredAt: fired}}
	})
	const head = `{"selector":{"groups":[1]},"kind":"leds","body":{"mode":"solid","loop":true}`
	code, body := g.rest(t, "operator", "POST", "/v1/actions", head+`,"fire_at":"2026-03-01T20:00:00.5Z"}`)
	if code != 200 || !g.fake.action.At.Equal(fired) || g.fake.action.Lead != 0 {
		t.Fatalf("fire_at: %d %s; the fleet got at %v lead %v", code, body, g.fake.action.At, g.fake.action.Lead)
	}
	if !strings.Contains(body, `"fire":"line"`) || !strings.Contains(body, `"fired_at":"2026-03-01T20:00:00.500Z"`) {
		t.Errorf("result without its fire: %s", body)
	}
	code, body = g.rest(t, "operator", "POST", "/v1/actions", head+`,"lead_ms":250}`)
	if code != 200 || !g.fake.action.At.IsZero() || g.fake.action.Lead != 250*time.Millisecond {
		t.Fatalf("lead_ms: %d %s; the fleet got at %v lead %v", code, body, g.fake.action.At, g.fake.action.Lead)
	}
	for _, tc := range []struct{ extra, reason string }{
		{`,"fire_at":"2026-03-01T20:00:00Z","lead_ms":5`, "not both"},
		{`,"lead_ms":-1`, "lead_ms -1"},
		{`,"lead_ms":"60001"`, "lead_ms 60001"},
	} {
		g.fake.set(func(f *fakeFleet) { f.action = fleet.Action{} })
		code, body := g.rest(t, "operator", "POST", "/v1/actions", head+tc.extra+`}`)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.reason) || g.fake.action.Kind != "" {
			t.Errorf("%s: %d %s (the fleet got %q)", tc.extra, code, body, g.fake.action.Kind)
		}
	}
	g.fake.set(func(f *fakeFleet) { f.err = fmt.Errorf("%w: 2m0s ahead", fleet.ErrBadTime) })
	_, err := g.client.DoAction(g.ctx(t, "operator"), &fleetv1.DoActionRequest{Selector: &fleetv1.Selector{All: true},
		Kind: "scene_end", FireAt: timestamppb.New(fired)})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("ErrBadTime over gRPC: %v", err)
	}
}
