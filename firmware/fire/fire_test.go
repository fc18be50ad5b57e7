package fire

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/timesync"
)

// boot is the board's start on the fake clock; the tests run 5 s after.
var boot = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newSched(t *testing.T) (*Scheduler, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(boot.Add(5 * time.Second))
	return New(Options{Clock: clk, Board: timesync.New(clk, boot)}), clk
}

func TestWhen(t *testing.T) {
	s, _ := newSched(t) // the board's clock reads 5 000 000 µs
	for _, tc := range []struct {
		query string
		lead  time.Duration
		at    int64
		none  bool
		bad   string
	}{
		{query: "", none: true},
		{query: "x=1", none: true},
		{query: "at_ms=0", lead: 0, at: 5_000_000},
		{query: "at_ms=250", lead: 250 * time.Millisecond, at: 5_250_000},
		{query: "at_ms=60000", lead: time.Minute, at: 65_000_000},
		{query: "at_ms=60001", bad: "at_ms must be an integer 0-60000"},
		{query: "at_ms=-1", bad: "at_ms must be an integer 0-60000"},
		{query: "at_ms=1.5", bad: "at_ms must be"},
		{query: "at_ms=", bad: "at_ms must be"},
		{query: "fire_at=5000100", lead: 100 * time.Microsecond, at: 5_000_100},
		{query: "fire_at=65000000", lead: time.Minute, at: 65_000_000},
		{query: "fire_at=65000001", bad: "60000 ms"},
		{query: "fire_at=4000000", lead: -time.Second, at: 4_000_000},
		{query: "fire_at=0", lead: -5 * time.Second, at: 0},
		{query: "fire_at=-5000000", lead: -10 * time.Second, at: -5_000_000},
		{query: "fire_at=-5000001", bad: "behind the board's clock"},
		{query: "fire_at=-9223372036854775808", bad: "behind the board's clock"},
		{query: "fire_at=9223372036854775807", bad: "ahead of the board's clock"},
		{query: "fire_at=soon", bad: "fire_at must be an integer"},
		{query: "fire_at=1&at_ms=1", bad: "not both"},
	} {
		q, _ := url.ParseQuery(tc.query)
		lead, at, ok, err := s.When(q)
		if tc.bad != "" {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != "bad_request" || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: err %v, want bad_request saying %q", tc.query, err, tc.bad)
			}
			continue
		}
		if err != nil || ok == tc.none || (!tc.none && (lead != tc.lead || at != tc.at)) {
			t.Errorf("%q: lead %v at %d ok %v err %v; want lead %v at %d", tc.query, lead, at, ok, err, tc.lead, tc.at)
		}
	}
}

// recorder is a schedulable route that records its changes.
type recorder struct {
	mu       sync.Mutex
	made     []string
	discards int
	prepared int
	clk      clock.Clock
	at       []time.Time
}

func (r *recorder) route() api.Route {
	prepare := func(req *http.Request) (api.Change, error) {
		var body struct {
			Name string `json:"name"`
		}
		if err := api.Decode(req, &body, false); err != nil {
			return api.Change{}, err
		}
		if body.Name == "" {
			return api.Change{}, api.Errorf(api.ErrBadRequest, "name is required")
		}
		r.mu.Lock()
		r.prepared++
		r.mu.Unlock()
		return api.Change{
			Apply: func() (int, any, error) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.made = append(r.made, body.Name)
				r.at = append(r.at, r.clk.Now())
				return http.StatusOK, map[string]string{"made": body.Name}, nil
			},
			Discard: func() {
				r.mu.Lock()
				r.discards++
				r.mu.Unlock()
			},
		}, nil
	}
	return api.Route{Method: http.MethodPost, Path: "/thing", Prepare: prepare, Handler: api.Prepared(prepare)}
}

func (r *recorder) state() ([]string, int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.made...), r.prepared, r.discards
}

func post(h http.Handler, query, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/thing?"+query, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestScheduled(t *testing.T) {
	s, clk := newSched(t)
	rec := &recorder{clk: clk}
	rt := s.Wrap(rec.route())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Without a moment: as before, at once.
	if w := post(rt.Handler, "", `{"name":"now"}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"made":"now"`) {
		t.Fatalf("now: %d %s", w.Code, w.Body)
	}
	// Refused requests change nothing and schedule nothing.
	for _, tc := range []struct{ query, body, code string }{
		{"at_ms=100", `{}`, "bad_request"},
		{"at_ms=100", `{"name":"x","extra":1}`, "bad_request"},
		{"at_ms=70000", `{"name":"x"}`, "bad_request"},
		{"fire_at=1&at_ms=1", `{"name":"x"}`, "bad_request"},
	} {
		w := post(rt.Handler, tc.query, tc.body)
		var e api.Error
		if w.Code != 400 || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Code != tc.code {
			t.Errorf("%s %s: %d %s, want 400 %s", tc.query, tc.body, w.Code, w.Body, tc.code)
		}
	}
	// Two changes for the same moment and one earlier, given out of order.
	w := post(rt.Handler, "at_ms=100", `{"name":"b"}`)
	var fr boardapi.FireReply
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &fr) != nil {
		t.Fatalf("scheduled: %d %s", w.Code, w.Body)
	}
	if diff := cmp.Diff(fr, boardapi.FireReply{Scheduled: true, FireAt: 5_100_000, InUS: 100_000}); diff != "" {
		t.Errorf("reply (-got +want)\n%s", diff)
	}
	if w := post(rt.Handler, "fire_at=5100000", `{"name":"c"}`); w.Code != http.StatusAccepted {
		t.Fatalf("fire_at: %d %s", w.Code, w.Body)
	}
	if w := post(rt.Handler, "fire_at=5050000", `{"name":"a"}`); w.Code != http.StatusAccepted {
		t.Fatalf("fire_at: %d %s", w.Code, w.Body)
	}
	// A moment already passed (within 10 s): made at once, answered as
	// without a moment.
	if w := post(rt.Handler, "fire_at=4000000", `{"name":"late"}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"made":"late"`) {
		t.Fatalf("late: %d %s", w.Code, w.Body)
	}
	if st := s.Stats(); st.Pending != 3 || st.Scheduled != 3 {
		t.Fatalf("stats %+v", st)
	}
	step := func(d time.Duration) {
		t.Helper()
		if !clk.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("the scheduler waits on no timer")
		}
		clk.Advance(d)
	}
	waitMade := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			made, _, _ := rec.state()
			if len(made) >= n || time.Now().After(deadline) {
				return made
			}
			time.Sleep(time.Millisecond)
		}
	}
	step(49 * time.Millisecond)
	step(999 * time.Microsecond)
	// A microsecond before the moment: the scheduler is back on its
	// timer (it made nothing on the way, or it would not wait again).
	if !clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("the scheduler waits on no timer")
	}
	if made, _, _ := rec.state(); len(made) != 2 {
		t.Fatalf("made before the moment: %v", made)
	}
	step(time.Microsecond)
	if made := waitMade(3); !cmp.Equal(made, []string{"now", "late", "a"}) {
		t.Fatalf("made %v", made)
	}
	step(50 * time.Millisecond)
	if made := waitMade(5); !cmp.Equal(made, []string{"now", "late", "a", "b", "c"}) {
		t.Fatalf("made %v, want b then c (the order they came in)", made)
	}
	rec.mu.Lock()
	for i, want := range []time.Duration{5050 * time.Millisecond, 5100 * time.Millisecond, 5100 * time.Millisecond} {
		if got := rec.at[2+i].Sub(boot); got != want {
			t.Errorf("change %d made at %v of the board's clock, want %v", i, got, want)
		}
	}
	rec.mu.Unlock()
	if st := s.Stats(); st.Applied != 3 || st.Pending != 0 || st.Failed != 0 || st.LateMax != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPendingLimitAndStop(t *testing.T) {
	s, clk := newSched(t)
	rec := &recorder{clk: clk}
	rt := s.Wrap(rec.route())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	for range MaxPending {
		if w := post(rt.Handler, "at_ms=1000", `{"name":"x"}`); w.Code != http.StatusAccepted {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	w := post(rt.Handler, "at_ms=1000", `{"name":"x"}`)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"busy"`) {
		t.Fatalf("over the limit: %d %s", w.Code, w.Body)
	}
	if _, prepared, discards := rec.state(); prepared != MaxPending+1 || discards != 1 {
		t.Fatalf("prepared %d, discarded %d", prepared, discards)
	}
	// The boot ends: what waits is dropped (discarded), never made.
	cancel()
	<-done
	made, _, discards := rec.state()
	if len(made) != 0 || discards != MaxPending+1 {
		t.Fatalf("made %v, discarded %d", made, discards)
	}
	if st := s.Stats(); st.Dropped != MaxPending || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
	if w := post(rt.Handler, "at_ms=10", `{"name":"x"}`); w.Code != http.StatusConflict {
		t.Errorf("after the end: %d %s", w.Code, w.Body)
	}
}

func TestWrapLeavesOthers(t *testing.T) {
	s, _ := newSched(t)
	plain := api.Route{Method: http.MethodGet, Path: "/x"}
	if got := s.Wrap(plain); got.Accepted != nil || len(got.Query) != 0 {
		t.Errorf("a route without Prepare changed: %+v", got)
	}
	rec := &recorder{}
	got := s.Wrap(rec.route())
	if got.Accepted == nil || len(got.Query) != 2 || got.Query[0].Name != "fire_at" || got.Query[1].Name != "at_ms" {
		t.Errorf("wrapped: accepted %v query %+v", got.Accepted, got.Query)
	}
}

// FuzzWhen: any query is read without panicking; a moment it takes is
// within the bounds, and at stands for now plus the lead.
func FuzzWhen(f *testing.F) {
	for _, q := range []string{"", "at_ms=0", "at_ms=60000", "fire_at=5000100", "fire_at=-9223372036854775808",
		"fire_at=1&at_ms=1", "at_ms=%zz", "fire_at=9223372036854775807"} {
		f.Add(q)
	}
	s, _ := newSchedFuzz()
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lead, at, ok, err := s.When(q)
		if err != nil || !ok {
			return
		}
		if lead > MaxLead || lead < -MaxLate {
			t.Fatalf("%q: lead %v out of bounds", raw, lead)
		}
		if now := s.o.Board.Micros(); at-now != lead.Microseconds() {
			t.Fatalf("%q: at %d is not now %d plus the lead %v", raw, at, now, lead)
		}
	})
}

func newSchedFuzz() (*Scheduler, *clock.Fake) {
	clk := clock.NewFake(boot.Add(5 * time.Second))
	return New(Options{Clock: clk, Board: timesync.New(clk, boot)}), clk
}
