package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
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

// TestCueRoutesRoles: viewers read, operators GO, admins edit; every
// change and refusal is audited; a bad list changes nothing.
func TestCueRoutesRoles(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tokens, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	secret := map[auth.Role]string{}
	for _, r := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		if secret[r], _, err = tokens.Create(r.String(), r); err != nil {
			t.Fatal(err)
		}
	}
	fl := cueFleet{calls: make(chan fleet.Action, 10)}
	eng, err := cue.New(cue.Options{DB: db, Fleet: fl, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rec := &recAuditor{}
	srv := httptest.NewServer(CueHandler(eng, &auth.Guard{Tokens: tokens, Audit: rec}))
	defer srv.Close()

	do := func(role auth.Role, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if role != auth.RoleNone {
			req.Header.Set("Authorization", "Bearer "+secret[role])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, step := range []struct {
		role         auth.Role
		method, path string
		body         string
		code         int
		has          string
	}{
		{auth.RoleNone, "GET", "/v1/cuelists", "", 401, "unauthenticated"},
		{auth.RoleOperator, "PUT", "/v1/cuelists/show", cueListJSON, 403, "permission_denied"},
		{auth.RoleAdmin, "PUT", "/v1/cuelists/show", `{"cues":[{"number":"1","actions":[{"kind":"leds","selector":{"groups":[0]},"body":{}}]}]}`, 400, "invalid_argument"},
		{auth.RoleAdmin, "PUT", "/v1/cuelists/show", `{"cues":[], "extra": 1}`, 400, "unknown field"},
		{auth.RoleAdmin, "PUT", "/v1/cuelists/show", `{"name":"other","cues":[]}`, 400, "the path"},
		{auth.RoleViewer, "GET", "/v1/cuelists/show", "", 404, "not_found"},
		{auth.RoleAdmin, "PUT", "/v1/cuelists/show", cueListJSON, 200, `"name":"show"`},
		{auth.RoleViewer, "GET", "/v1/cuelists", "", 200, `"lists":[{"name":"show"`},
		{auth.RoleViewer, "GET", "/v1/cuelists/show", "", 200, `"standby":"1"`},
		{auth.RoleViewer, "POST", "/v1/cuelists/show/go", "", 403, "permission_denied"},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/go?asap=maybe", "", 400, "asap"},
		{auth.RoleOperator, "POST", "/v1/cuelists/-/go", "", 200, `"standby":"2"`},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/back", "", 200, `"standby":"1"`},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/standby", `{"cue":"2"}`, 200, `"standby_notes":"blackout"`},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/standby", `{"cue":"9"}`, 404, "no such cue"},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/cues/2/start", "", 200, `"running":[{"cue":"2"`},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/stop", "", 200, `"running":[]`},
		{auth.RoleOperator, "POST", "/v1/cuelists/show/go", "", 412, "failed_precondition"},
		{auth.RoleOperator, "DELETE", "/v1/cuelists/show", "", 403, "permission_denied"},
		{auth.RoleAdmin, "DELETE", "/v1/cuelists/show", "", 200, "deleted"},
	} {
		code, body := do(step.role, step.method, step.path, step.body)
		if code != step.code || !strings.Contains(body, step.has) {
			t.Fatalf("%v %s %s: %d %s; want %d with %q", step.role, step.method, step.path, code, body, step.code, step.has)
		}
		// A GO or a start hands its cue to the fleet on the engine's own
		// goroutine; the steps after it are about the list, not about that
		// race (what STOP does to waits is the engine's TestPreWaitAndStop).
		for (step.path == "/v1/cuelists/-/go" || strings.HasSuffix(step.path, "/start")) && !strings.Contains(body, `"running":[]`) {
			_, body = do(auth.RoleViewer, "GET", "/v1/cuelists/show", "")
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
	// Allowed changes, each with its outcome: 3 PUTs refused by the
	// engine (InvalidArgument), 1 saved, a GO refused for its asap, the
	// GO, BACK, 2 standbys, the start, STOP, the GO at the end, the
	// delete; refused: no token, operator PUT, viewer GO, operator DELETE.
	if changes != 13 || denied != 4 {
		for _, r := range rec.all() {
			b, _ := json.Marshal(r)
			t.Log(string(b))
		}
		t.Fatalf("audit: %d changes, %d refusals", changes, denied)
	}
}

// TestCueRoutesRateLimited: changing requests beyond a caller's budget
// are 429 and recorded; reads are not counted.
func TestCueRoutesRateLimited(t *testing.T) {
	fl := cueFleet{calls: make(chan fleet.Action, 10)}
	eng, err := cue.New(cue.Options{Fleet: fl})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Put(cue.List{Name: "show"}); err != nil {
		t.Fatal(err)
	}
	rec := &recAuditor{}
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := CueHandlerLimited(eng, &auth.Guard{Insecure: true, Audit: rec}, auth.NewRateLimiter(1, 2, func() time.Time { return fixed }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(path string) int {
		resp, err := http.Post(srv.URL+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 5 {
		resp, err := http.Get(srv.URL + "/v1/cuelists/show/state")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("read %d: %d", i, resp.StatusCode)
		}
	}
	if a, b, c := post("/v1/cuelists/show/stop"), post("/v1/cuelists/show/back"), post("/v1/cuelists/show/stop"); a != 200 || b != 200 || c != 429 {
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
