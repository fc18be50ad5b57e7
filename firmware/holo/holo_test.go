package holo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal/sim"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// mapStore is the Store of the tests: JSON in a map.
type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) Get(key string, v any) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (s *mapStore) Put(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = b
	return nil
}

// recServo records every pulse driven.
type recServo struct {
	*sim.Servo
	mu     sync.Mutex
	pulses []int
}

func (r *recServo) Drive(us int) error {
	r.mu.Lock()
	r.pulses = append(r.pulses, us)
	r.mu.Unlock()
	return r.Servo.Drive(us)
}

func (r *recServo) all() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.pulses...)
}

type recPub struct {
	mu     sync.Mutex
	states []State
	times  []time.Time
	clk    clock.Clock
}

func (p *recPub) SetState(kind string, state any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if kind != Kind {
		panic(kind)
	}
	p.states = append(p.states, state.(State))
	p.times = append(p.times, p.clk.Now())
}

func (p *recPub) reset() {
	p.mu.Lock()
	p.states, p.times = nil, nil
	p.mu.Unlock()
}

type rig struct {
	clk       *clock.Fake
	pan, tilt *recServo
	store     *mapStore
	pub       *recPub
	c         *Controller
}

func newRig(t *testing.T, store *mapStore) *rig {
	t.Helper()
	clk := clock.NewFake(t0)
	if store == nil {
		store = &mapStore{}
	}
	r := &rig{clk: clk, pan: &recServo{Servo: sim.NewServo(clk)}, tilt: &recServo{Servo: sim.NewServo(clk)},
		store: store, pub: &recPub{clk: clk}}
	c, err := New(Options{Clock: clk, Pan: r.pan, Tilt: r.tilt, Store: store, Publisher: r.pub, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// calibrated is a rig with pan 1000-2000 and tilt mounted the other way
// round, 2200 (down) to 1200 (up).
func calibrated(t *testing.T) *rig {
	t.Helper()
	r := newRig(t, nil)
	if _, err := r.c.SetCalibration(Pan, Calibration{1000, 2000}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.SetCalibration(Tilt, Calibration{2200, 1200}); err != nil {
		t.Fatal(err)
	}
	r.pub.reset()
	return r
}

// advance moves the clock one servo frame at a time for d, waiting after
// each for the controller to have stepped (on its notifications, never on
// a timer), unless it is idle.
func (r *rig) advance(t *testing.T, d time.Duration) {
	t.Helper()
	for d > 0 {
		step := min(d, ServoFrame)
		d -= step
		r.clk.Advance(step)
		now := r.clk.Now()
		deadline := time.After(5 * time.Second)
		for {
			r.c.mu.Lock()
			ok := !r.c.active || !r.c.rendered.Before(now)
			ch := r.c.notify
			r.c.mu.Unlock()
			if ok {
				break
			}
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("no step at %v", now.Sub(t0))
			}
		}
	}
}

func (r *rig) motion(t *testing.T, m boardapi.MotionRequest) State {
	t.Helper()
	st, err := r.c.Motion(m)
	if err != nil {
		t.Fatalf("Motion(%+v): %v", m, err)
	}
	return st
}

func pos(s *recServo) int {
	us, _ := s.Position()
	return us
}

func ptr[T any](v T) *T { return &v }

func TestNotReady(t *testing.T) {
	r := newRig(t, nil)
	st := r.c.State()
	want := State{Motion: "off", Ready: false, Reason: "servos pan and tilt are not calibrated (PUT /servos/calibration?id=pan)"}
	if diff := cmp.Diff(st, want); diff != "" {
		t.Errorf("new state (-got +want)\n%s", diff)
	}
	if st.StatusCode() != 0xFF {
		t.Errorf("status code %#x", st.StatusCode())
	}
	for _, m := range []string{"center", "move", "nudge", "twitch", "wag", "nod", "scan", "circle"} {
		_, err := r.c.Motion(boardapi.MotionRequest{Motion: m})
		if !errors.Is(err, api.ErrNotReady) || !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "not calibrated") {
			t.Errorf("%s: err = %v, want not_ready", m, err)
		}
	}
	for _, m := range []string{"stop", "off"} {
		if _, err := r.c.Motion(boardapi.MotionRequest{Motion: m}); err != nil {
			t.Errorf("%s when not ready: %v", m, err)
		}
	}
	// One servo calibrated is not enough.
	if _, err := r.c.SetCalibration(Pan, Calibration{900, 2100}); err != nil {
		t.Fatal(err)
	}
	if st := r.c.State(); st.Ready || st.Reason != "servo tilt is not calibrated (PUT /servos/calibration?id=tilt)" {
		t.Errorf("half calibrated: %+v", st)
	}
	// A servo moves uncalibrated: that is how its ends are found.
	if _, err := r.c.Move(Tilt, 2400); err != nil {
		t.Errorf("move uncalibrated: %v", err)
	}
	if _, err := r.c.SetCalibration(Tilt, Calibration{1000, 2000}); err != nil {
		t.Fatal(err)
	}
	if st := r.c.State(); !st.Ready || st.Reason != "" {
		t.Errorf("calibrated: %+v", st)
	}
	// Forgetting a calibration ends a behaviour: not ready again.
	r.motion(t, boardapi.MotionRequest{Motion: "wag"})
	if _, err := r.c.ClearCalibration(Pan); err != nil {
		t.Fatal(err)
	}
	if st := r.c.State(); st.Ready || st.Motion != "hold" {
		t.Errorf("after DELETE: %+v", st)
	}
}

func TestCalibrationSaved(t *testing.T) {
	store := &mapStore{}
	r := newRig(t, store)
	if _, err := r.c.SetCalibration(Pan, Calibration{800, 2200}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.SetPolicy(Pan, Policy{HoldAtEnds: true, HoldBetween: false}); err != nil {
		t.Fatal(err)
	}
	r2 := newRig(t, store)
	got := r2.c.Servos().Servos
	want := []ServoRecord{
		{ID: "pan", PositionUS: 1500, Calibrated: true, MinUS: 800, MaxUS: 2200, Policy: Policy{HoldAtEnds: true}},
		{ID: "tilt", PositionUS: 1500, MinUS: 1000, MaxUS: 2000, Policy: DefaultPolicy},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("reloaded servos (-got +want)\n%s", diff)
	}
	if _, err := r2.c.ClearCalibration(Pan); err != nil {
		t.Fatal(err)
	}
	r3 := newRig(t, store)
	if rec := r3.c.Servos().Servos[0]; rec.Calibrated || rec.Policy != (Policy{HoldAtEnds: true}) {
		t.Errorf("after clear: %+v", rec)
	}
}

func TestCalibrationValidate(t *testing.T) {
	for _, tc := range []struct {
		c  Calibration
		ok bool
	}{
		{Calibration{1000, 2000}, true},
		{Calibration{500, 2500}, true},
		{Calibration{2000, 1000}, true}, // mounted the other way round
		{Calibration{1000, 1100}, true},
		{Calibration{1000, 1099}, false},
		{Calibration{1500, 1500}, false},
		{Calibration{499, 2000}, false},
		{Calibration{1000, 2501}, false},
		{Calibration{0, 0}, false},
		{Calibration{-1000, 2000}, false},
	} {
		err := tc.c.Validate()
		if tc.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrCalibration) || !errors.Is(err, api.ErrBadRequest))) {
			t.Errorf("%+v: %v", tc.c, err)
		}
	}
}

// within checks every pulse driven to a servo lay within [lo, hi].
func within(t *testing.T, name string, s *recServo, lo, hi int) {
	t.Helper()
	for _, us := range s.all() {
		if us < lo || us > hi {
			t.Fatalf("%s: pulse %d outside calibration %d-%d", name, us, lo, hi)
		}
	}
}

func TestMotions(t *testing.T) {
	type check func(t *testing.T, r *rig)
	panAt := func(us int) check {
		return func(t *testing.T, r *rig) {
			t.Helper()
			if got := pos(r.pan); got != us {
				t.Errorf("pan at %d, want %d", got, us)
			}
		}
	}
	tiltAt := func(us int) check {
		return func(t *testing.T, r *rig) {
			t.Helper()
			if got := pos(r.tilt); got != us {
				t.Errorf("tilt at %d, want %d", got, us)
			}
		}
	}
	motionIs := func(m string) check {
		return func(t *testing.T, r *rig) {
			t.Helper()
			if got := r.c.State().Motion; got != m {
				t.Errorf("motion %q, want %q", got, m)
			}
		}
	}
	// spread checks the pan (or tilt) pulses reached lo and hi.
	spread := func(s func(r *rig) *recServo, lo, hi int) check {
		return func(t *testing.T, r *rig) {
			t.Helper()
			mn, mx := 9999, 0
			for _, us := range s(r).all() {
				mn, mx = min(mn, us), max(mx, us)
			}
			if mn > lo || mx < hi {
				t.Errorf("pulses span %d-%d, want at least %d-%d", mn, mx, lo, hi)
			}
		}
	}
	pan := func(r *rig) *recServo { return r.pan }
	tilt := func(r *rig) *recServo { return r.tilt }
	type at struct {
		after  time.Duration
		checks []check
	}
	tests := []struct {
		name  string
		setup []boardapi.MotionRequest // run to completion first
		m     boardapi.MotionRequest
		steps []at
	}{
		{name: "center", setup: []boardapi.MotionRequest{{Motion: "move", X: ptr(1.0), Y: ptr(1.0)}}, m: boardapi.MotionRequest{Motion: "center"},
			steps: []at{
				{0, []check{motionIs("move")}},
				{400 * time.Millisecond, []check{panAt(1500), tiltAt(1700), motionIs("hold")}},
			}},
		{name: "move at servo speed", m: boardapi.MotionRequest{Motion: "move", X: ptr(1.0), Y: ptr(-1.0)},
			steps: []at{
				{60 * time.Millisecond, []check{panAt(1700), tiltAt(1900), motionIs("move")}},
				{160 * time.Millisecond, []check{panAt(2000), tiltAt(2200), motionIs("hold")}},
			}},
		{name: "move over a duration", m: boardapi.MotionRequest{Motion: "move", X: ptr(-0.5), DurationMS: ptr(1000)},
			steps: []at{
				// The pulse follows the line frame by frame; the horn catches up
				// with each within 2 ms, so at a frame it is at the last one.
				{500 * time.Millisecond, []check{panAt(1380), tiltAt(1700), motionIs("move")}},
				{600 * time.Millisecond, []check{panAt(1250), motionIs("hold")}},
			}},
		{name: "nudge", setup: []boardapi.MotionRequest{{Motion: "move", X: ptr(0.5), Y: ptr(0.5)}}, m: boardapi.MotionRequest{Motion: "nudge", X: ptr(0.2), Y: ptr(-2.0)},
			steps: []at{{time.Second, []check{panAt(1850), tiltAt(2200), motionIs("hold")}}}},
		{name: "wag twice", m: boardapi.MotionRequest{Motion: "wag", Count: ptr(2), Range: ptr(40)},
			steps: []at{
				{200 * time.Millisecond, []check{motionIs("wag"), tiltAt(1700)}},
				{1500 * time.Millisecond, []check{motionIs("hold"), panAt(1500), spread(pan, 1330, 1670)}},
			}},
		{name: "nod", m: boardapi.MotionRequest{Motion: "nod", DurationMS: ptr(2000)},
			steps: []at{
				{500 * time.Millisecond, []check{motionIs("nod"), panAt(1500)}},
				{3 * time.Second, []check{motionIs("nod"), spread(tilt, 1570, 1830)}},
			}},
		{name: "scan", m: boardapi.MotionRequest{Motion: "scan", DurationMS: ptr(4000)},
			steps: []at{
				{time.Second, []check{motionIs("scan"), panAt(1990)}},
				{3 * time.Second, []check{spread(pan, 1000, 2000)}},
			}},
		{name: "circle", m: boardapi.MotionRequest{Motion: "circle", Range: ptr(100), DurationMS: ptr(4000), Count: ptr(1)},
			steps: []at{
				{time.Second, []check{motionIs("circle")}},
				{4 * time.Second, []check{motionIs("hold"), spread(pan, 1010, 1990), spread(tilt, 1210, 2190), tiltAt(1200)}},
			}},
		{name: "twitch", m: boardapi.MotionRequest{Motion: "twitch", IntervalS: []float64{0.5, 0.5}, Count: ptr(3), Range: ptr(50)},
			steps: []at{
				{480 * time.Millisecond, []check{motionIs("twitch"), panAt(1500), tiltAt(1700)}},
				{1400 * time.Millisecond, []check{motionIs("twitch")}},
				{time.Second, []check{motionIs("hold"), panAt(1500), tiltAt(1700)}},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := calibrated(t)
			r.motion(t, boardapi.MotionRequest{Motion: "center"})
			r.advance(t, time.Second)
			for _, m := range tc.setup {
				r.motion(t, m)
				r.advance(t, 2*time.Second)
			}
			before := [2]int{len(r.pan.all()), len(r.tilt.all())}
			if st := r.motion(t, tc.m); st.Motion == "" {
				t.Fatal("empty motion")
			}
			for _, s := range tc.steps {
				r.advance(t, s.after)
				for _, c := range s.checks {
					c(t, r)
				}
			}
			within(t, "pan", r.pan, 1000, 2000)
			within(t, "tilt", r.tilt, 1200, 2200)
			if len(r.pan.all()) == before[0] && len(r.tilt.all()) == before[1] {
				t.Error("no pulse was sent")
			}
		})
	}
}

func TestTwitchMovesAtRandomIntervals(t *testing.T) {
	r := calibrated(t)
	r.motion(t, boardapi.MotionRequest{Motion: "center"})
	r.advance(t, time.Second)
	r.motion(t, boardapi.MotionRequest{Motion: "twitch", IntervalS: []float64{0.2, 0.6}, Range: ptr(30)})
	var changes []time.Duration
	last := [2]int{pos(r.pan), pos(r.tilt)}
	for range 500 { // 10 s
		r.advance(t, ServoFrame)
		now := [2]int{r.pan.Target(), r.tilt.Target()}
		if now != last {
			changes = append(changes, r.clk.Now().Sub(t0))
			last = now
		}
	}
	if len(changes) < 15 || len(changes) > 50 {
		t.Fatalf("%d twitches in 10 s with pauses of 0.2-0.6 s", len(changes))
	}
	gaps := map[time.Duration]bool{}
	for i := 1; i < len(changes); i++ {
		g := changes[i] - changes[i-1]
		if g < 200*time.Millisecond || g > 620*time.Millisecond {
			t.Errorf("pause %v outside 0.2-0.6 s", g)
		}
		gaps[g] = true
	}
	if len(gaps) < 5 {
		t.Errorf("pauses not random: %v", gaps)
	}
	within(t, "pan", r.pan, 1350, 1650)
	within(t, "tilt", r.tilt, 1550, 1850) // tilt runs 2200 (down) to 1200 (up)
}

func TestStopAndOff(t *testing.T) {
	r := calibrated(t)
	r.motion(t, boardapi.MotionRequest{Motion: "scan"})
	r.advance(t, time.Second)
	st := r.motion(t, boardapi.MotionRequest{Motion: "stop"})
	if st.Motion != "hold" {
		t.Errorf("after stop: %+v", st)
	}
	held := pos(r.pan)
	r.advance(t, 2*time.Second)
	if got := pos(r.pan); got != held {
		t.Errorf("stopped holo moved from %d to %d", held, got)
	}
	if _, driven := r.pan.Position(); !driven {
		t.Error("stopped between the ends, pan should be held")
	}
	st = r.motion(t, boardapi.MotionRequest{Motion: "off"})
	_, d1 := r.pan.Position()
	_, d2 := r.tilt.Position()
	if st.Motion != "off" || d1 || d2 {
		t.Errorf("after off: %+v driven %v %v", st, d1, d2)
	}
	// stop while off stays off
	if st := r.motion(t, boardapi.MotionRequest{Motion: "stop"}); st.Motion != "off" {
		t.Errorf("stop after off: %+v", st)
	}
}

func TestPolicy(t *testing.T) {
	r := calibrated(t)
	// Default: released at an end, held between.
	r.motion(t, boardapi.MotionRequest{Motion: "move", X: ptr(1.0), Y: ptr(0.2)})
	r.advance(t, 100*time.Millisecond)
	if _, driven := r.pan.Position(); !driven {
		t.Error("pan released before it arrived")
	}
	r.advance(t, time.Second)
	if us, driven := r.pan.Position(); driven || us != 2000 {
		t.Errorf("pan at the end: %d driven %v, want 2000 released", us, driven)
	}
	if _, driven := r.tilt.Position(); !driven {
		t.Error("tilt between the ends was released")
	}
	// Nearly at an end counts as at it.
	r.motion(t, boardapi.MotionRequest{Motion: "move", X: ptr(-0.95)})
	r.advance(t, time.Second)
	if _, driven := r.pan.Position(); driven {
		t.Error("pan within the end margin still driven")
	}
	if _, err := r.c.SetPolicy(Pan, Policy{HoldAtEnds: true, HoldBetween: false}); err != nil {
		t.Fatal(err)
	}
	r.motion(t, boardapi.MotionRequest{Motion: "move", X: ptr(1.0)})
	r.advance(t, time.Second)
	if _, driven := r.pan.Position(); !driven {
		t.Error("hold_at_ends: pan released")
	}
	r.motion(t, boardapi.MotionRequest{Motion: "move", X: ptr(0.0)})
	r.advance(t, time.Second)
	if us, driven := r.pan.Position(); driven || us != 1500 {
		t.Errorf("hold_between false: pan %d driven %v", us, driven)
	}
	// A behaviour keeps driving even across the ends.
	r.motion(t, boardapi.MotionRequest{Motion: "scan", DurationMS: ptr(1000)})
	for range 100 {
		r.advance(t, ServoFrame)
		if _, driven := r.pan.Position(); !driven {
			t.Fatal("pan released during a scan")
		}
	}
}

func TestPublishThrottled(t *testing.T) {
	r := calibrated(t)
	r.motion(t, boardapi.MotionRequest{Motion: "wag", DurationMS: ptr(500)})
	r.advance(t, 4*time.Second)
	r.pub.mu.Lock()
	times, states := r.pub.times, r.pub.states
	r.pub.mu.Unlock()
	if len(states) < 10 || states[0].Motion != "wag" {
		t.Fatalf("published %d states: %+v", len(states), states)
	}
	for i := 2; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < PublishInterval {
			t.Errorf("publications %d and %d %v apart", i-1, i, d)
		}
	}
	if len(states) > 4*4+2 {
		t.Errorf("%d publications in 4 s", len(states))
	}
	// The final rest is published even when it comes soon after.
	r.pub.reset()
	r.motion(t, boardapi.MotionRequest{Motion: "stop"})
	r.advance(t, time.Second)
	r.pub.mu.Lock()
	defer r.pub.mu.Unlock()
	if n := len(r.pub.states); n == 0 || r.pub.states[n-1] != r.c.State() {
		t.Errorf("last published %+v, state %+v", r.pub.states, r.c.State())
	}
}

func TestSnapshotRestore(t *testing.T) {
	r := calibrated(t)
	r.motion(t, boardapi.MotionRequest{Motion: "twitch", Range: ptr(20)})
	snap := r.c.Snapshot()
	if diff := cmp.Diff(snap, boardapi.MotionRequest{Motion: "twitch", Range: ptr(20)}); diff != "" {
		t.Errorf("snapshot of a behaviour (-got +want)\n%s", diff)
	}
	r.motion(t, boardapi.MotionRequest{Motion: "move", X: ptr(0.5), Y: ptr(-0.5)})
	if diff := cmp.Diff(r.c.Snapshot(), boardapi.MotionRequest{Motion: "move", X: ptr(0.5), Y: ptr(-0.5)}); diff != "" {
		t.Errorf("snapshot of a move (-got +want)\n%s", diff)
	}
	if err := r.c.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if st := r.c.State(); st.Motion != "twitch" {
		t.Errorf("restored: %+v", st)
	}
	r.c.Off()
	if r.c.Snapshot().Motion != "off" {
		t.Errorf("snapshot when off: %+v", r.c.Snapshot())
	}
	r2 := newRig(t, nil)
	if r2.c.Snapshot().Motion != "stop" {
		t.Errorf("snapshot when not ready: %+v", r2.c.Snapshot())
	}
}

type reply struct {
	code int
	body map[string]any
}

func serve(t *testing.T, c *Controller, method, target, body string) reply {
	t.Helper()
	mux := http.NewServeMux()
	for _, rt := range c.Routes() {
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
	}
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("%s %s: reply %q: %v", method, target, rec.Body, err)
	}
	return reply{rec.Code, m}
}

func TestRoutesLink(t *testing.T) {
	r := newRig(t, nil)
	got := map[string]bool{}
	for _, rt := range r.c.Routes() {
		got[rt.Method+" "+rt.Path] = rt.Link
	}
	want := map[string]bool{
		"GET /holo": true, "POST /holo/motion": true, "GET /servos": true, "POST /servos/move": true,
		"POST /servos/release": true, "PUT /servos/calibration": false, "DELETE /servos/calibration": false,
		"PUT /servos/policy": false,
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("routes (-got +want)\n%s", diff)
	}
}

func TestMotionHTTP(t *testing.T) {
	r := newRig(t, nil)
	if rp := serve(t, r.c, "POST", "/holo/motion", `{"motion":"wag"}`); rp.code != 409 || rp.body["error"] != "not_ready" {
		t.Errorf("uncalibrated wag: %+v", rp)
	}
	r = calibrated(t)
	if rp := serve(t, r.c, "POST", "/holo/motion", `{"motion":"move","x":0.5,"y":-0.25,"duration_ms":100}`); rp.code != 202 || rp.body["motion"] != "move" || rp.body["ready"] != true {
		t.Errorf("move: %+v", rp)
	}
	if rp := serve(t, r.c, "POST", "/holo/motion", `{"motion":"stop"}`); rp.code != 200 || rp.body["motion"] != "hold" {
		t.Errorf("stop: %+v", rp)
	}
	if rp := serve(t, r.c, "GET", "/holo", ``); rp.code != 200 || rp.body["motion"] != "hold" {
		t.Errorf("GET: %+v", rp)
	}
	before := r.c.State()
	for _, tc := range []struct{ body, code string }{
		{``, "bad_json"},
		{`{"motion":`, "bad_json"},
		{`{}`, "bad_request"},
		{`{"motion":"dance"}`, "bad_request"},
		{`{"motion":"MOVE"}`, "bad_request"},
		{`{"motion":3}`, "bad_request"},
		{`{"motion":"move","x":1.5}`, "bad_request"},
		{`{"motion":"move","x":50}`, "bad_request"},
		{`{"motion":"move","y":-1.01}`, "bad_request"},
		{`{"motion":"move","x":"1"}`, "bad_request"},
		{`{"motion":"nudge","x":2.5}`, "bad_request"},
		{`{"motion":"wag","count":-1}`, "bad_request"},
		{`{"motion":"wag","count":256}`, "bad_request"},
		{`{"motion":"wag","count":1.5}`, "bad_request"},
		{`{"motion":"wag","range":101}`, "bad_request"},
		{`{"motion":"wag","duration_ms":70000}`, "bad_request"},
		{`{"motion":"twitch","interval_s":[1]}`, "bad_request"},
		{`{"motion":"twitch","interval_s":[3,1]}`, "bad_request"},
		{`{"motion":"twitch","interval_s":[0,1]}`, "bad_request"},
		{`{"motion":"twitch","interval_s":[1,601]}`, "bad_request"},
		{`{"motion":"twitch","interval_s":"1-2"}`, "bad_request"},
		{`{"motion":"twitch","speed":3}`, "bad_request"},
	} {
		rp := serve(t, r.c, "POST", "/holo/motion", tc.body)
		if rp.code != 400 || rp.body["error"] != tc.code || rp.body["message"] == "" {
			t.Errorf("%s: %+v, want 400 %s", tc.body, rp, tc.code)
		}
	}
	if diff := cmp.Diff(r.c.State(), before); diff != "" {
		t.Errorf("state changed by bad requests (-got +want)\n%s", diff)
	}
}

func TestServosHTTP(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		method, target, body string
		code                 int
		err                  string
	}{
		{"GET", "/servos", "", 200, ""},
		{"POST", "/servos/move", `{"id":"pan","us":2400}`, 200, ""},
		{"POST", "/servos/move", `{"id":"pan","us":2600}`, 400, "bad_request"},
		{"POST", "/servos/move", `{"id":"pan"}`, 400, "bad_request"},
		{"POST", "/servos/move", `{"id":"pan","us":"1500"}`, 400, "bad_request"},
		{"POST", "/servos/move", `{"id":"roll","us":1500}`, 404, "not_found"},
		{"POST", "/servos/move", `{"id":"all","us":1500}`, 404, "not_found"},
		{"POST", "/servos/release", `{"id":"all"}`, 200, ""},
		{"POST", "/servos/release", `{"id":"tilt"}`, 200, ""},
		{"POST", "/servos/release", `{"id":"x"}`, 404, "not_found"},
		{"POST", "/servos/release", `{}`, 400, "bad_request"},
		{"PUT", "/servos/calibration?id=pan", `{"min_us":1100,"max_us":1900}`, 200, ""},
		{"PUT", "/servos/calibration?id=pan", `{"min_us":1100}`, 400, "bad_request"},
		{"PUT", "/servos/calibration?id=pan", `{"min_us":400,"max_us":1900}`, 400, "bad_request"},
		{"PUT", "/servos/calibration?id=pan", `{"min_us":1500,"max_us":1550}`, 400, "bad_request"},
		{"PUT", "/servos/calibration?id=pan", `{"min_us":1100,"max_us":1900,"mid_us":1500}`, 400, "bad_request"},
		{"PUT", "/servos/calibration?id=nope", `{"min_us":1100,"max_us":1900}`, 404, "not_found"},
		{"PUT", "/servos/calibration", `{"min_us":1100,"max_us":1900}`, 400, "bad_request"},
		{"POST", "/servos/move", `{"id":"pan","us":2400}`, 400, "bad_request"}, // outside its calibration now
		{"POST", "/servos/move", `{"id":"pan","us":1900}`, 200, ""},
		{"DELETE", "/servos/calibration?id=tilt", "", 200, ""},
		{"DELETE", "/servos/calibration?id=all", "", 404, "not_found"},
		{"PUT", "/servos/policy?id=tilt", `{"hold_at_ends":true}`, 200, ""},
		{"PUT", "/servos/policy?id=tilt", `{"hold":true}`, 400, "bad_request"},
		{"PUT", "/servos/policy?id=tilt", `{"hold_at_ends":1}`, 400, "bad_request"},
		{"PUT", "/servos/policy?id=zz", `{}`, 404, "not_found"},
	} {
		rp := serve(t, r.c, tc.method, tc.target, tc.body)
		if rp.code != tc.code || (tc.err != "" && rp.body["error"] != tc.err) {
			t.Errorf("%s %s %s: %d %v, want %d %s", tc.method, tc.target, tc.body, rp.code, rp.body, tc.code, tc.err)
		}
	}
	got := r.c.Servos().Servos
	if got[0].MinUS != 1100 || !got[0].Calibrated || got[0].US != 1900 || !got[0].Driven {
		t.Errorf("pan: %+v", got[0])
	}
	if got[1].Calibrated || got[1].Policy != (Policy{HoldAtEnds: true, HoldBetween: true}) || got[1].Driven {
		t.Errorf("tilt: %+v", got[1])
	}
}

func FuzzDecodeMotion(f *testing.F) {
	for _, s := range []string{
		`{"motion":"move","x":0.5,"y":-0.25,"duration_ms":100}`,
		`{"motion":"twitch","interval_s":[0.5,2],"range":20,"count":4}`,
		`{"motion":"nudge","x":-2}`, `{"motion":"stop"}`, `{"motion":"wag","count":256}`,
		`{"motion":"twitch","interval_s":[1]}`, `{}`, `[]`, `{"motion":"scan"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := boardapi.DecodeMotion(b)
		if err != nil {
			var e *api.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("error %v is not a 400 API error", err)
			}
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := boardapi.DecodeMotion(out)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if diff := cmp.Diff(back, m); diff != "" {
			t.Fatalf("round trip of %s (-got +want)\n%s", out, diff)
		}
		// Every valid request's path stays within -1..1 for a while.
		p, _ := m.Validate()
		b2 := &behaviour{name: m.Motion, req: m, p: p, target: point{}.clamp(), seed: 1}
		for e := time.Duration(0); e < 3*time.Second; e += 50 * time.Millisecond {
			pt, _ := b2.at(e)
			if pt.x < -1 || pt.x > 1 || pt.y < -1 || pt.y > 1 {
				t.Fatalf("%s at %v: %+v", out, e, pt)
			}
		}
	})
}

func BenchmarkStep(b *testing.B) {
	clk := clock.NewFake(t0)
	c, err := New(Options{Clock: clk, Pan: sim.NewServo(clk), Tilt: sim.NewServo(clk), Store: &mapStore{}})
	if err != nil {
		b.Fatal(err)
	}
	_, _ = c.SetCalibration(Pan, Calibration{1000, 2000})
	_, _ = c.SetCalibration(Tilt, Calibration{1000, 2000})
	if _, err := c.Motion(boardapi.MotionRequest{Motion: "circle"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		clk.Advance(ServoFrame)
		c.mu.Lock()
		_ = c.stepLocked(false)
		c.mu.Unlock()
	}
}
