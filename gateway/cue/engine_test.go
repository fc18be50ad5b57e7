package cue

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timecode"
	"github.com/holofleet/holofleet/store"
)

// call is one fleet.Do the engine made.
type call struct {
	Sel  fleet.Selector
	Kind string
	Body string
	At   time.Time // the action's moment (zero: now)
	When time.Time // the engine's clock when it called
}

// fakeFleet records Do calls; every board of a call succeeds.
type fakeFleet struct {
	clk   clock.Clock
	calls chan call
	fail  error
	// gate, when set before the engine runs, holds a call's answer until
	// the channel it returns closes (nil: answered at once).
	gate func(fleet.Selector) <-chan struct{}
}

func newFakeFleet(clk clock.Clock) *fakeFleet {
	return &fakeFleet{clk: clk, calls: make(chan call, 100)}
}

func (f *fakeFleet) Do(_ context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	f.calls <- call{Sel: sel, Kind: a.Kind, Body: string(a.Body), At: a.At, When: f.clk.Now()}
	if f.gate != nil {
		if g := f.gate(sel); g != nil {
			<-g
		}
	}
	if f.fail != nil {
		return nil, f.fail
	}
	return []fleet.Result{{Board: "b1", Via: "lan"}, {Board: "b2", Via: "group"}}, nil
}

// next waits for the next call (real time bounds a broken test only: a
// minute, for a loaded machine where 10 s once ran out).
func (f *fakeFleet) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(time.Minute):
		t.Fatal("no fleet call")
	}
	return call{}
}

// none asserts no call was made (the engine's timers are not due, so
// none can be on its way).
func (f *fakeFleet) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-f.calls:
		t.Fatalf("unexpected fleet call %+v", c)
	default:
	}
}

var t0 = time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)

func act(kind string, sel fleet.Selector, body string) Action {
	return Action{Kind: kind, Selector: sel, Body: json.RawMessage(body)}
}

// demoList is the demo's show (gateway/demo's DemoList has the same).
func demoList() List {
	return List{Name: "demo", Cues: []Cue{
		{Number: "1", Name: "red", Actions: []Action{act("leds", fleet.Selector{Groups: []int{1}}, `{"mode":"solid","colour":"red","loop":true}`)}},
		{Number: "2", Name: "blue", Actions: []Action{act("leds", fleet.Selector{Groups: []int{2}}, `{"mode":"solid","colour":"blue","loop":true}`)},
			Follow: FollowAfter, FollowMS: 2000},
		{Number: "3", Name: "off", Actions: []Action{act("leds", fleet.Selector{All: true}, `{"mode":"off"}`)}, Notes: "blackout"},
	}}
}

type rig struct {
	clk *clock.Fake
	fl  *fakeFleet
	e   *Engine
}

func newRig(t *testing.T, o Options, lists ...List) *rig {
	t.Helper()
	clk := clock.NewFake(t0)
	fl := newFakeFleet(clk)
	o.Fleet, o.Clock = fl, clk
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	for _, l := range lists {
		if _, err := e.Put(l); err != nil {
			t.Fatal(err)
		}
	}
	return &rig{clk: clk, fl: fl, e: e}
}

func TestGoFiresOnTheMoment(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	st, err := r.e.Go("demo", false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Standby != "2" || len(st.Running) != 1 || st.Running[0].Cue != "1" || !st.Running[0].FiresAt.Equal(t0.Add(DefaultLead)) {
		t.Fatalf("state after GO: %+v", st)
	}
	c := r.fl.next(t) // sent at once: the lead is the fleet's to plan
	want := call{Sel: fleet.Selector{Groups: []int{1}}, Kind: "leds", Body: `{"mode":"solid","colour":"red","loop":true}`, At: t0.Add(DefaultLead), When: t0}
	if diff := cmp.Diff(c, want); diff != "" {
		t.Fatalf("(-got +want)\n%s", diff)
	}
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && s.Last.Cue == "1" && len(s.Running) == 0 })
	st, _ = r.e.State("demo")
	if st.Last.Boards != 2 || st.Last.Failed != 0 || !st.Last.At.Equal(t0.Add(DefaultLead)) {
		t.Fatalf("last fired: %+v", st.Last)
	}
}

// TestFollowChain: GO on cue 2 fires it on the moment and cue 3 two
// seconds after that moment, on the frame, without sleeping; the standby
// moves past the whole chain at once.
func TestFollowChain(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	if _, err := r.e.SetStandby("demo", "2"); err != nil {
		t.Fatal(err)
	}
	st, err := r.e.Go("", false) // the current list
	if err != nil {
		t.Fatal(err)
	}
	if st.Standby != "" || len(st.Running) != 2 || st.Running[1].Phase != PhaseFollow || st.Running[1].RemainingMS != 2150 {
		t.Fatalf("state after GO: %+v", st)
	}
	c := r.fl.next(t)
	if !c.At.Equal(t0.Add(DefaultLead)) || c.Sel.Groups[0] != 2 {
		t.Fatalf("cue 2: %+v", c)
	}
	r.clk.Advance(2*time.Second - time.Millisecond)
	r.fl.none(t)
	r.clk.Advance(time.Millisecond)
	c = r.fl.next(t)
	if !c.At.Equal(t0.Add(DefaultLead+2*time.Second)) || !c.Sel.All || !c.When.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("cue 3: %+v", c)
	}
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && s.Last.Cue == "3" })
	if _, err := r.e.Go("demo", false); !errors.Is(err, ErrEnd) {
		t.Fatalf("GO at the end: %v", err)
	}
}

// TestLastFiredIsTheLatest: cue 2's boards answer after cue 3's (a slow
// board); the list's last fired cue stays cue 3, the later moment.
func TestLastFiredIsTheLatest(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	release := make(chan struct{})
	r.fl.gate = func(sel fleet.Selector) <-chan struct{} {
		if len(sel.Groups) == 1 && sel.Groups[0] == 2 {
			return release
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := r.e.Watch(ctx)
	if _, err := r.e.SetStandby("demo", "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.Go("demo", false); err != nil {
		t.Fatal(err)
	}
	if c := r.fl.next(t); c.Sel.Groups[0] != 2 {
		t.Fatalf("cue 2: %+v", c)
	}
	r.clk.Advance(2 * time.Second)
	if c := r.fl.next(t); !c.Sel.All {
		t.Fatalf("cue 3: %+v", c)
	}
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && s.Last.Cue == "3" })
	close(release)
	for ev := range evs {
		if ev.Type == EventFired && ev.Cue == "2" {
			break
		}
	}
	if st, _ := r.e.State("demo"); st.Last == nil || st.Last.Cue != "3" {
		t.Fatalf("last fired after cue 2's late answers: %+v, want cue 3", st.Last)
	}
}

func TestPreWaitAndStop(t *testing.T) {
	l := demoList()
	l.Cues[0].PreWaitMS = 5000
	r := newRig(t, Options{}, l)
	if _, err := r.e.Go("demo", false); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(4 * time.Second)
	r.fl.none(t)
	st, _ := r.e.State("demo")
	if len(st.Running) != 1 || st.Running[0].Phase != PhasePreWait || st.Running[0].RemainingMS != 1150 {
		t.Fatalf("running: %+v", st.Running)
	}
	st, err := r.e.Stop("demo")
	if err != nil || len(st.Running) != 0 {
		t.Fatalf("stop: %+v %v", st, err)
	}
	r.clk.Advance(time.Minute)
	r.fl.none(t)
	if st.Standby != "2" {
		t.Fatalf("standby after STOP %q, want 2 (STOP does not move it)", st.Standby)
	}
	// The pre-wait runs from the GO's moment: GO again fires at
	// now + lead + 5 s, sent 5 s after the GO.
	go2 := r.clk.Now()
	if _, err := r.e.Start("demo", "1", false); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(5 * time.Second)
	if c := r.fl.next(t); !c.At.Equal(go2.Add(DefaultLead+5*time.Second)) || !c.When.Equal(go2.Add(5*time.Second)) {
		t.Fatalf("after a pre-wait: %+v", c)
	}
}

func TestASAP(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	if _, err := r.e.Go("demo", true); err != nil {
		t.Fatal(err)
	}
	if c := r.fl.next(t); !c.At.IsZero() || !c.When.Equal(t0) {
		t.Fatalf("asap: %+v", c)
	}
	r2 := newRig(t, Options{ASAP: true}, demoList())
	if _, err := r2.e.Go("demo", false); err != nil {
		t.Fatal(err)
	}
	if c := r2.fl.next(t); !c.At.IsZero() {
		t.Fatalf("Options.ASAP: %+v", c)
	}
}

func TestBackJumpStandby(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	for _, step := range []struct {
		name string
		op   func() (State, error)
		want Number
		err  error
	}{
		{"back at the first stays", func() (State, error) { return r.e.Back("demo") }, "1", nil},
		{"standby 3", func() (State, error) { return r.e.SetStandby("demo", "3") }, "3", nil},
		{"back", func() (State, error) { return r.e.Back("demo") }, "2", nil},
		{"standby 2.0 is 2", func() (State, error) { return r.e.SetStandby("demo", "2.0") }, "2", nil},
		{"no cue 7", func() (State, error) { return r.e.SetStandby("demo", "7") }, "", ErrNoCue},
		{"not a number", func() (State, error) { return r.e.Start("demo", "x", false) }, "", ErrNoCue},
		{"no list", func() (State, error) { return r.e.Go("nope", false) }, "", ErrNoList},
		{"jump to 1", func() (State, error) { return r.e.Start("demo", "1", false) }, "2", nil},
	} {
		st, err := step.op()
		if !errors.Is(err, step.err) {
			t.Fatalf("%s: %v, want %v", step.name, err, step.err)
		}
		if err == nil && st.Standby != step.want {
			t.Fatalf("%s: standby %q, want %q", step.name, st.Standby, step.want)
		}
	}
	if c := r.fl.next(t); c.Sel.Groups[0] != 1 {
		t.Fatalf("jump fired %+v", c)
	}
}

func TestCheck(t *testing.T) {
	ok := demoList()
	for _, tc := range []struct {
		name string
		edit func(l *List)
	}{
		{"bad name", func(l *List) { l.Name = "a/b" }},
		{"empty name", func(l *List) { l.Name = "" }},
		{"bad number", func(l *List) { l.Cues[0].Number = "1a" }},
		{"negative number", func(l *List) { l.Cues[0].Number = "-1" }},
		{"two cues numbered 2", func(l *List) { l.Cues[0].Number = "2.00" }},
		{"no actions", func(l *List) { l.Cues[0].Actions = nil }},
		{"unknown kind", func(l *List) { l.Cues[0].Actions[0].Kind = "dance" }},
		{"bad body", func(l *List) { l.Cues[0].Actions[0].Body = json.RawMessage(`{"mode":"disco"}`) }},
		{"group 0", func(l *List) { l.Cues[0].Actions[0].Selector = fleet.Selector{Groups: []int{0}} }},
		{"no selector", func(l *List) { l.Cues[0].Actions[0].Selector = fleet.Selector{} }},
		{"bad follow", func(l *List) { l.Cues[0].Follow = "later" }},
		{"follow_ms without after", func(l *List) { l.Cues[0].FollowMS = 10 }},
		{"negative pre-wait", func(l *List) { l.Cues[0].PreWaitMS = -1 }},
		{"pre-wait beyond a day", func(l *List) { l.Cues[0].PreWaitMS = MaxWait.Milliseconds() + 1 }},
		{"bad timecode", func(l *List) { l.Cues[0].Timecode = "25:00:00:00" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ok.Clone()
			tc.edit(&l)
			r := newRig(t, Options{}, demoList())
			if _, err := r.e.Put(l); !errors.Is(err, ErrBadList) && !errors.Is(err, fleet.ErrBadAction) && !errors.Is(err, fleet.ErrBadSelector) {
				t.Fatalf("Put: %v", err)
			}
			if got, _ := r.e.Get("demo"); !cmp.Equal(got, mustCheck(t, demoList())) {
				t.Fatalf("a refused edit changed the list: %+v", got)
			}
		})
	}
	// Canonical form: sorted, numbers canonical, follow none.
	l := List{Name: "x", Cues: []Cue{demoList().Cues[2], demoList().Cues[0]}}
	l.Cues[0].Number, l.Cues[1].Number = "03.50", "01"
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if l.Cues[0].Number != "1" || l.Cues[1].Number != "3.5" || l.Cues[0].Follow != FollowNone {
		t.Fatalf("canonical: %+v", l.Cues)
	}
}

func mustCheck(t *testing.T, l List) List {
	t.Helper()
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNumberOrder(t *testing.T) {
	ns := []string{"1", "1.05", "1.5", "1.55", "2", "10", "10.1"}
	for i := range ns {
		for j := range ns {
			a, _ := ParseNumber(ns[i])
			b, _ := ParseNumber(ns[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s vs %s: %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestStoreAcrossRestarts: lists live in a real bbolt file; an edit
// refused leaves the saved list as it was.
func TestStoreAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Options{DB: db}, demoList())
	if err := r.e.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.Put(demoList()); err != nil {
		t.Fatal(err)
	}
	r.e.Close()
	db.Close()
	db, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := New(Options{DB: db, Fleet: r.fl, Clock: r.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.Get("demo")
	if err != nil || !cmp.Equal(got, mustCheck(t, demoList())) {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	// The standby is kept across a restart.
	if _, err := e.SetStandby("demo", "3"); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e, err = New(Options{DB: db, Fleet: r.fl, Clock: r.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if st, _ := e.State("demo"); st.Standby != "3" {
		t.Fatalf("standby after a restart %q, want 3", st.Standby)
	}
	if err := e.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get("demo"); !errors.Is(err, ErrNoList) {
		t.Fatalf("deleted: %v", err)
	}
}

func TestEvents(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := r.e.Watch(ctx)
	if _, err := r.e.Go("demo", false); err != nil {
		t.Fatal(err)
	}
	var types []string
	for ev := range ch {
		types = append(types, ev.Type+" "+string(ev.Cue))
		if ev.Type == EventFired {
			if ev.State.Last == nil || ev.State.Standby != "2" {
				t.Fatalf("fired event state %+v", ev.State)
			}
			break
		}
	}
	if diff := cmp.Diff(types, []string{"go 1", "fired 1"}); diff != "" {
		t.Fatalf("(-got +want)\n%s", diff)
	}
}

func TestFailuresAreReported(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	r.fl.fail = fleet.ErrUnknownGroup
	if _, err := r.e.Go("demo", true); err != nil {
		t.Fatal(err)
	}
	r.fl.next(t)
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && len(s.Last.Errors) == 1 })
}

// waitState waits for the list's state to satisfy ok (the engine's
// goroutines finish their fire on their own time).
func waitState(t *testing.T, e *Engine, name string, ok func(State) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.State(name)
		if err == nil && ok(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("state never came: %+v %v", s, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// tcList has three timecoded cues on group 1, 2, 3.
func tcList() List {
	l := List{Name: "tc"}
	for i, tc := range []string{"00:00:01:00", "00:00:02:00", "00:00:03:00"} {
		l.Cues = append(l.Cues, Cue{Number: Number(string(rune('1' + i))), Timecode: tc,
			Actions: []Action{act("scene_apply", fleet.Selector{Groups: []int{i + 1}}, `{"slot":1}`)}})
	}
	return l
}

// feed sends frames from..to (counts at r) one frame time apart.
func feed(t *testing.T, rg *rig, from, to int64, r timecode.Rate) {
	t.Helper()
	for n := from; n <= to; n++ {
		if err := rg.e.Timecode("test", timecode.FromCount(n, r)); err != nil {
			t.Fatal(err)
		}
		rg.clk.Advance(r.FrameDuration())
	}
}

func TestTimecodeChase(t *testing.T) {
	for _, rate := range []timecode.Rate{timecode.EBU, timecode.SMPTE} {
		t.Run(rate.String(), func(t *testing.T) {
			fps := int64(rate.FPS())
			r := newRig(t, Options{Freewheel: 5}, tcList())
			// Play from 00:00:00:10 to 00:00:02:05: cues 1 and 2 fire in
			// order, each on the frame that passes it.
			feed(t, r, 10, 2*fps+5, rate)
			got := map[int]time.Time{}
			for range 2 {
				c := r.fl.next(t)
				got[c.Sel.Groups[0]] = c.At
			}
			want := map[int]time.Time{1: t0.Add(rate.FrameDuration() * time.Duration(fps-10)), 2: t0.Add(rate.FrameDuration() * time.Duration(2*fps-10))}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Fatalf("cues fired for the frames that passed them (-got +want)\n%s", diff)
			}
			r.fl.none(t)
			st, _ := r.e.State("tc")
			if st.Timecode == nil || st.Timecode.Rate != rate.String() || st.Timecode.Status != ChaseLocked || st.Standby != "3" {
				t.Fatalf("state %+v %+v", st, st.Timecode)
			}
			// A jump back to 00:00:01:10 chases: cue 1 only.
			feed(t, r, fps+10, fps+10, rate)
			if c := r.fl.next(t); c.Sel.Groups[0] != 1 {
				t.Fatalf("chase back: %+v", c)
			}
			r.fl.none(t)
			// Play on to 2:29 / 2:24 (cue 2), then stop sending: the
			// chase freewheels over cue 3 (one frame on) and stops after 5.
			feed(t, r, fps+11, 3*fps-1, rate)
			if c := r.fl.next(t); c.Sel.Groups[0] != 2 {
				t.Fatalf("cue 2 again: %+v", c)
			}
			r.fl.none(t)
			r.clk.Advance(rate.FrameDuration()) // 1.5 frame times since the last
			if c := r.fl.next(t); c.Sel.Groups[0] != 3 {
				t.Fatalf("freewheel: %+v", c)
			}
			waitState(t, r.e, "tc", func(s State) bool { return s.Timecode.Status == ChaseFreewheel })
			// Each freewheeled frame re-arms its timer from its callback:
			// advance one frame at a time once it is armed.
			frames := 1
			for {
				// Wait until the callback either re-armed or stopped.
				var stopped bool
				deadline := time.Now().Add(10 * time.Second)
				for {
					st, _ := r.e.State("tc")
					if stopped = st.Timecode.Status == ChaseStopped; stopped || r.clk.Waiters() > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the freewheel timer was neither armed nor the chase stopped")
					}
					time.Sleep(time.Millisecond)
				}
				if stopped {
					break
				}
				r.clk.Advance(rate.FrameDuration())
				frames++
				if frames > 20 {
					t.Fatal("the chase never stopped")
				}
			}
			if frames != 6 && frames != 7 {
				t.Fatalf("stopped after %d frame times, want 5 freewheeled frames", frames)
			}
			r.fl.none(t)
			// The next frame after a stop chases again.
			feed(t, r, 10*fps, 10*fps, rate)
			if c := r.fl.next(t); c.Sel.Groups[0] != 3 {
				t.Fatalf("chase after a stop: %+v", c)
			}
		})
	}
}

// TestTimecodeStalledSender: a sender the host keeps off the processor
// for a few frames lets the chase freewheel over a cue and fire it on
// time; the sender's late frames then catch up with the chase and fire
// nothing: neither the cue before (a frame behind the position is not a
// jump back here) nor the same cue again. The chase is locked to the
// source again at once, and past the frames it ran ahead a frame back is
// a jump that chases.
func TestTimecodeStalledSender(t *testing.T) {
	rate := timecode.SMPTE
	fps := int64(rate.FPS())
	r := newRig(t, Options{Freewheel: 10}, tcList())
	feed(t, r, 2*fps, 3*fps-3, rate) // 00:00:02:00 (cue 2) to 02:27
	if c := r.fl.next(t); c.Sel.Groups[0] != 2 {
		t.Fatalf("cue 2: %+v", c)
	}
	// The sender stalls after 02:27: 1.5 frame times on, the chase runs
	// on to 02:28, then 02:29, then 03:00, firing cue 3 on its frame.
	ctx := context.Background()
	for _, d := range []time.Duration{rate.FrameDuration() / 2, rate.FrameDuration(), rate.FrameDuration()} {
		if err := r.clk.AdvanceWait(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if c := r.fl.next(t); c.Sel.Groups[0] != 3 {
		t.Fatalf("freewheel onto cue 3: %+v", c)
	}
	waitState(t, r.e, "tc", func(s State) bool { return s.Timecode.Status == ChaseFreewheel && s.Timecode.Position == "00:00:03:00" })
	// The late frames: 02:28, 02:29, 03:00, then on.
	for n := 3*fps - 2; n <= 3*fps+3; n++ {
		if err := r.e.Timecode("test", timecode.FromCount(n, rate)); err != nil {
			t.Fatal(err)
		}
		if n == 3*fps-2 {
			if st, _ := r.e.State("tc"); st.Timecode.Status != ChaseLocked || st.Timecode.Position != "00:00:03:00" || st.Standby != "" {
				t.Fatalf("a late frame: %+v %+v, want locked at 03:00 with no standby", st, st.Timecode)
			}
		}
	}
	r.fl.none(t)
	// Back by more than it ran ahead: a jump, which chases.
	feed(t, r, 2*fps+5, 2*fps+5, rate)
	if c := r.fl.next(t); c.Sel.Groups[0] != 2 {
		t.Fatalf("a jump back: %+v", c)
	}
}

func TestClosedEngine(t *testing.T) {
	r := newRig(t, Options{}, demoList())
	l := demoList()
	l.Cues[0].PreWaitMS = 1000
	if _, err := r.e.Put(l); err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.Go("demo", false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(r.e.Close) // waits for nothing: the pre-wait is cancelled
	wg.Wait()
	if _, err := r.e.Go("demo", false); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
