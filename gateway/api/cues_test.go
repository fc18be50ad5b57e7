package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/nettest"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

type recAuditor struct {
	mu   sync.Mutex
	recs []auth.Record
}

func (a *recAuditor) Audit(r auth.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
}

func (a *recAuditor) all() []auth.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]auth.Record(nil), a.recs...)
}

type cueFleet struct{ calls chan fleet.Action }

func (f cueFleet) Do(_ context.Context, _ fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	f.calls <- a
	return []fleet.Result{{Board: "b", Via: "lan"}}, nil
}

const cueListJSON = `{"cues":[
 {"number":"1","name":"red","actions":[{"kind":"leds","selector":{"groups":[1]},"body":{"mode":"solid","colour":"red","loop":true}}]},
 {"number":"2","name":"off","actions":[{"kind":"leds","selector":{"all":true},"body":{"mode":"off"}}],"notes":"blackout"}]}`

// cueGateway is a Server with a cue engine on a fake clock and the
// guard's records kept.
func cueGateway(t *testing.T, opts ...gwOpt) (*testGateway, *cue.Engine, cueFleet, *recAuditor) {
	t.Helper()
	fl := cueFleet{calls: make(chan fleet.Action, 10)}
	eng, err := cue.New(cue.Options{Fleet: fl, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	rec := &recAuditor{}
	g := startGateway(t, append([]gwOpt{func(c *Config) {
		c.Cues = eng
		c.Guard = &auth.Guard{Tokens: c.Tokens, Audit: rec}
	}}, opts...)...)
	return g, eng, fl, rec
}

// TestCueRoutesRoles: the REST routes of CueService (grpc-gateway):
// viewers read, operators GO, admins edit; every change and refusal is
// audited; a bad list changes nothing; the JSON is the documented one.
func TestCueRoutesRoles(t *testing.T) {
	g, _, fl, rec := cueGateway(t)
	for _, step := range []struct {
		role         string
		method, path string
		body         string
		code         int
		has          string
	}{
		{"", "GET", "/v1/cuelists", "", 401, "unauthenticated"},
		{"operator", "PUT", "/v1/cuelists/show", cueListJSON, 403, "permission_denied"},
		{"admin", "PUT", "/v1/cuelists/show", `{"cues":[{"number":"1","actions":[{"kind":"leds","selector":{"groups":[0]},"body":{}}]}]}`, 400, "invalid_argument"},
		{"admin", "PUT", "/v1/cuelists/show", `{"cues":[], "extra": 1}`, 400, "unknown field"},
		{"admin", "PUT", "/v1/cuelists/show", `{"name":"other","cues":[]}`, 400, "the path"},
		{"viewer", "GET", "/v1/cuelists/show", "", 404, "not_found"},
		{"admin", "PUT", "/v1/cuelists/show", cueListJSON, 200, `"name":"show"`},
		{"viewer", "GET", "/v1/cuelists", "", 200, `"lists":[{"name":"show"`},
		{"viewer", "GET", "/v1/cuelists/show", "", 200, `"standby":"1"`},
		{"viewer", "GET", "/v1/cuelists/show", "", 200, `"body":{"colour":"red","loop":true,"mode":"solid"}`},
		{"viewer", "POST", "/v1/cuelists/show/go", "", 403, "permission_denied"},
		{"operator", "POST", "/v1/cuelists/show/go?asap=maybe", "", 400, "asap"},
		{"operator", "POST", "/v1/cuelists/-/go", "", 200, `"standby":"2"`},
		{"operator", "POST", "/v1/cuelists/show/back", "", 200, `"standby":"1"`},
		{"operator", "POST", "/v1/cuelists/show/standby", `{"cue":"2"}`, 200, `"standby_notes":"blackout"`},
		{"operator", "POST", "/v1/cuelists/show/standby", `{"cue":"9"}`, 404, "no such cue"},
		{"operator", "POST", "/v1/cuelists/show/cues/2/start", "", 200, `"running":[{"cue":"2"`},
		{"operator", "POST", "/v1/cuelists/show/stop", "", 200, `"running":[]`},
		{"operator", "POST", "/v1/cuelists/show/go", "", 412, "failed_precondition"},
		{"operator", "DELETE", "/v1/cuelists/show", "", 403, "permission_denied"},
		{"admin", "DELETE", "/v1/cuelists/show", "", 200, `"deleted":"show"`},
	} {
		code, body := g.rest(t, step.role, step.method, step.path, step.body)
		if code != step.code || !strings.Contains(body, step.has) {
			t.Fatalf("%q %s %s: %d %s; want %d with %q", step.role, step.method, step.path, code, body, step.code, step.has)
		}
		// A GO or a start hands its cue to the fleet on the engine's own
		// goroutine; the steps after it are about the list, not about that
		// race (what STOP does to waits is the engine's TestPreWaitAndStop).
		for (step.path == "/v1/cuelists/-/go" || strings.HasSuffix(step.path, "/start")) && !strings.Contains(body, `"running":[]`) {
			_, body = g.rest(t, "viewer", "GET", "/v1/cuelists/show", "")
		}
	}
	// The GO and the jump reached the fleet, each as a timed fire.
	for range 2 {
		if a := <-fl.calls; a.At.IsZero() {
			t.Fatalf("a GO fired without a moment: %+v", a)
		}
	}
	var changes, denied int
	for _, r := range rec.all() {
		if r.Resource != auth.ResCues {
			continue
		}
		if r.Allowed {
			changes++
		} else {
			denied++
		}
	}
	// Allowed changes, each with its outcome: 2 PUTs refused by the
	// service (InvalidArgument), 1 saved, the GO, BACK, 2 standbys, the
	// start, STOP, the GO at the end, the delete; refused: no token,
	// operator PUT, viewer GO, operator DELETE. A body or query that does
	// not decode (the unknown field, asap=maybe) is refused by
	// grpc-gateway before the gate, as on every REST route.
	if changes != 11 || denied != 4 {
		for _, r := range rec.all() {
			b, _ := json.Marshal(r)
			t.Log(string(b))
		}
		t.Fatalf("audit: %d changes, %d refusals", changes, denied)
	}
}

// TestCueRoutesRateLimited: changing calls beyond a caller's budget are
// 429 and recorded; reads are not counted.
func TestCueRoutesRateLimited(t *testing.T) {
	g, eng, _, rec := cueGateway(t, func(c *Config) { c.Limits = Limits{Rate: 1e-6, Burst: 2} })
	if _, err := eng.Put(cue.List{Name: "show"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if code, body := g.rest(t, "operator", "GET", "/v1/cuelists/show/state", ""); code != 200 {
			t.Fatalf("read %d: %d %s", i, code, body)
		}
	}
	a, _ := g.rest(t, "operator", "POST", "/v1/cuelists/show/stop", "")
	b, _ := g.rest(t, "operator", "POST", "/v1/cuelists/show/back", "")
	c, _ := g.rest(t, "operator", "POST", "/v1/cuelists/show/stop", "")
	if a != 200 || b != 200 || c != 429 {
		t.Fatalf("three changes with a burst of 2: %d %d %d", a, b, c)
	}
	var limited int
	for _, r := range rec.all() {
		if !r.Allowed && r.Code == "ResourceExhausted" {
			limited++
		}
	}
	if limited != 1 {
		t.Fatalf("%d refusals recorded, want 1", limited)
	}
}

// TestCueEventsSSE: GET /v1/cuelists/events streams every list's events
// as Server-Sent Events with the state after each; without a token it
// is refused.
func TestCueEventsSSE(t *testing.T) {
	g, eng, _, _ := cueGateway(t)
	if code, _ := g.rest(t, "", "GET", "/v1/cuelists/events", ""); code != 401 {
		t.Fatalf("events without a token: %d", code)
	}
	req, _ := http.NewRequest("GET", g.url+"/v1/cuelists/events", nil)
	req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var l cue.List
	if err := json.Unmarshal([]byte(cueListJSON), &l); err != nil {
		t.Fatal(err)
	}
	l.Name = "show"
	if _, err := eng.Put(l); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.SetStandby("show", "2"); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	for _, want := range []string{"edited", "standby"} {
		var ev struct {
			N     string `json:"n"`
			List  string `json:"list"`
			Type  string `json:"type"`
			State struct {
				Standby string `json:"standby"`
			} `json:"state"`
		}
		var typ string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				if err := json.Unmarshal([]byte(v), &ev); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if typ != want || ev.Type != want || ev.List != "show" || ev.N == "" {
			t.Fatalf("event %q %+v, want %s", typ, ev, want)
		}
		if want == "standby" && ev.State.Standby != "2" {
			t.Fatalf("standby event's state %+v", ev.State)
		}
	}
}

// TestCueGRPC: CueService over gRPC: the roles, the sentinel errors'
// codes, and WatchCues.
func TestCueGRPC(t *testing.T) {
	g, _, _, _ := cueGateway(t)
	cc := fleetv1.NewCueServiceClient(g.conn)
	var l fleetv1.CueList
	if err := protojson.Unmarshal([]byte(cueListJSON), &l); err != nil {
		t.Fatal(err)
	}
	ctx := g.ctx(t, "viewer")
	w, err := cc.WatchCues(ctx, &fleetv1.WatchCuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if md, err := w.Header(); err != nil || len(md.Get(WatchHeader)) == 0 {
		t.Fatalf("the watch did not say it is on: %v %v", md, err)
	}
	if _, err := cc.PutCueList(g.ctx(t, "operator"), &fleetv1.PutCueListRequest{Name: "show", List: &l}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("operator put: %v", err)
	}
	saved, err := cc.PutCueList(g.ctx(t, "admin"), &fleetv1.PutCueListRequest{Name: "show", List: &l})
	if err != nil || len(saved.GetCues()) != 2 || saved.GetCues()[0].GetActions()[0].GetBody().GetStructValue().GetFields()["colour"].GetStringValue() != "red" {
		t.Fatalf("admin put: %v %v", saved, err)
	}
	if _, err := cc.GoCue(g.ctx(t, "viewer"), &fleetv1.GoCueRequest{Name: "show"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("viewer GO: %v", err)
	}
	st, err := cc.GoCue(g.ctx(t, "operator"), &fleetv1.GoCueRequest{Name: "-"})
	if err != nil || st.GetStandby() != "2" || st.GetList() != "show" {
		t.Fatalf("GO: %v %v", st, err)
	}
	if _, err := cc.StartCue(g.ctx(t, "operator"), &fleetv1.StartCueRequest{Name: "show", Number: "7"}); status.Code(err) != codes.NotFound {
		t.Fatalf("start of no cue: %v", err)
	}
	if _, err := cc.GetCueList(g.ctx(t, "viewer"), &fleetv1.CueListRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get of no list: %v", err)
	}
	for _, want := range []string{"edited", "go"} {
		ev, err := w.Recv()
		if err != nil || ev.GetType() != want || ev.GetList() != "show" {
			t.Fatalf("watch: %v %v, want %s", ev, err, want)
		}
	}
}

// TestCueGrpcurl drives CueService with grpcurl, a real gRPC client
// working from reflection alone: save as admin, GO as operator, a
// viewer's GO refused, the state read back.
func TestCueGrpcurl(t *testing.T) {
	grpcurl, run := nettest.Grpcurl(t)
	g, _, fl, _ := cueGateway(t)
	bearer := func(role string) string { return "authorization: Bearer " + g.secrets[role] }
	if d := run("-H", bearer("viewer"), g.addr, "describe", "holo.fleet.v1.CueService"); !strings.Contains(d, "rpc GoCue") {
		t.Fatalf("grpcurl describe:\n%s", d)
	}
	put := `{"name": "show", "list": ` + cueListJSON + `}`
	if out, err := grpcurl("-H", bearer("operator"), "-d", put, g.addr, "holo.fleet.v1.CueService/PutCueList"); err == nil || !strings.Contains(out, "PermissionDenied") {
		t.Fatalf("operator put: %v\n%s", err, out)
	}
	if out := run("-H", bearer("admin"), "-d", put, g.addr, "holo.fleet.v1.CueService/PutCueList"); !strings.Contains(out, `"colour": "red"`) {
		t.Fatalf("admin put:\n%s", out)
	}
	if out, err := grpcurl("-H", bearer("viewer"), "-d", `{"name": "show"}`, g.addr, "holo.fleet.v1.CueService/GoCue"); err == nil || !strings.Contains(out, "PermissionDenied") {
		t.Fatalf("viewer GO: %v\n%s", err, out)
	}
	if out := run("-H", bearer("operator"), "-d", `{"name": "show"}`, g.addr, "holo.fleet.v1.CueService/GoCue"); !strings.Contains(out, `"standby": "2"`) {
		t.Fatalf("GO:\n%s", out)
	}
	if a := <-fl.calls; a.At.IsZero() {
		t.Fatalf("the GO fired without a moment: %+v", a)
	}
	if out := run("-H", bearer("viewer"), "-d", `{"name": "-"}`, g.addr, "holo.fleet.v1.CueService/GetCueState"); !strings.Contains(out, `"standbyNotes": "blackout"`) {
		t.Fatalf("state:\n%s", out)
	}
}

// TestCueEventsStreamLimit: the cue event stream counts among a token's
// watch streams (the gate decides it as WatchCues): one more than the
// limit is 429 with a Retry-After.
func TestCueEventsStreamLimit(t *testing.T) {
	g, _, _, _ := cueGateway(t, func(c *Config) { c.Limits = Limits{StreamsPerToken: 1} })
	open := func() *http.Response {
		req, _ := http.NewRequest("GET", g.url+"/v1/cuelists/events", nil)
		req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := open(); r.StatusCode != 200 {
		t.Fatalf("first stream: %d", r.StatusCode)
	}
	if r := open(); r.StatusCode != 429 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("second stream: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
}
