package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/frame"
)

// timedFakeLine is a fake line that times group sends (TimedLine): it
// records the moment asked and reports the frame ended then.
type timedFakeLine struct {
	*fakeLine
	mu  sync.Mutex
	ats []time.Time
}

func (l *timedFakeLine) GroupAt(ctx context.Context, group int, req frame.Request, at time.Time) (time.Time, error) {
	l.mu.Lock()
	l.ats = append(l.ats, at)
	l.mu.Unlock()
	return at, l.Group(ctx, group, req)
}

func (l *timedFakeLine) GroupCallAt(ctx context.Context, group int, method, path string, body []byte, at time.Time) (time.Time, error) {
	l.mu.Lock()
	l.ats = append(l.ats, at)
	l.mu.Unlock()
	return at, l.GroupCall(ctx, group, method, path, body)
}

// fireSetup: line0 (not timed) holds b01, b02 in group 1; line1 (timed)
// holds b03 in group 1; on the LAN b04 (group 1) has an aligned clock and
// the fire feature, b05 (group 1) has neither, b06 (group 1) a clock
// known too loosely, b07 (group 1) the feature and an aligned clock but
// is reached over line0 only by id.
func fireSetup(t *testing.T) (*setup, *timedFakeLine, []FireReport, func() []FireReport) {
	t.Helper()
	line1 := &timedFakeLine{fakeLine: newFakeLine("rs485:line1")}
	s := newSetup(t, Options{Drivers: []Driver{line1}})
	<-line1.ready
	// Boards list fire in /info's extensions; b04 runs a firmware from
	// before that field and lists it in features, which still counts.
	feats, fire := []string{"leds"}, []string{"fire", "time"}
	s.plug(t, &fakeBoard{id: "b01", groups: []int{1}, features: feats, extensions: fire}, "1", "")
	s.plug(t, &fakeBoard{id: "b02", groups: []int{1}}, "2", "")
	b3 := &fakeBoard{id: "b03", groups: []int{1}, features: feats, extensions: fire}
	line1.put("3", b3)
	s.f.Seen(Ref{Driver: "rs485:line1", Addr: "3"}, b3.info())
	eventually(t, "b03's groups", func() bool { v, _ := s.f.Board("b03"); return len(v.Groups) == 1 })
	accepted := &Reply{Status: 202, Body: []byte(`{"scheduled":true,"fire_at":1,"in_us":1}`)}
	s.plug(t, &fakeBoard{id: "b04", groups: []int{1}, features: []string{"leds", "fire", "time"}, reply: accepted}, "", "http://b04")
	s.plug(t, &fakeBoard{id: "b05", groups: []int{1}}, "", "http://b05")
	s.plug(t, &fakeBoard{id: "b06", groups: []int{1}, features: feats, extensions: fire, reply: accepted}, "", "http://b06")
	s.plug(t, &fakeBoard{id: "b07", groups: []int{2}, features: feats, extensions: fire, reply: accepted}, "7", "")
	// b04 booted 5 s before t0, known to 300 µs; b06 to 5 ms; b07 over
	// the line, booted 1 s before t0, to 500 µs.
	s.f.Clock(lanRef("http://b04"), BoardClock{OffsetUS: 1, UncertaintyUS: 300, Epoch: t0.Add(-5 * time.Second)})
	s.f.Clock(lanRef("http://b06"), BoardClock{OffsetUS: 1, UncertaintyUS: 5000, Epoch: t0.Add(-5 * time.Second)})
	s.f.Clock(lineRef("7"), BoardClock{OffsetUS: 1, UncertaintyUS: 500, Epoch: t0.Add(-time.Second)})
	var mu sync.Mutex
	var reports []FireReport
	s.f.ObserveFire(func(r FireReport) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	})
	return s, line1, nil, func() []FireReport {
		mu.Lock()
		defer mu.Unlock()
		out := reports
		reports = nil
		return out
	}
}

// doAsync runs Do in a goroutine.
func doAsync(f *Fleet, sel Selector, a Action) chan []Result {
	out := make(chan []Result, 1)
	go func() {
		res, err := f.Do(context.Background(), sel, a)
		if err != nil {
			res = []Result{{Board: "error", Error: err.Error()}}
		}
		out <- res
	}()
	return out
}

func TestTimedFire(t *testing.T) {
	s, line1, _, reports := fireSetup(t)
	base := s.clk.Waiters() // the core's own timers
	at := t0.Add(250 * time.Millisecond)
	colour := Action{Kind: ActionScreenShow, Body: []byte(`{"colour":"#ff0000"}`), At: at}
	done := doAsync(s.f, Selector{Groups: []int{1}, Boards: []string{"b07"}}, colour)

	// Until the moment: the timed line has its frame (for at), the board
	// with an aligned clock its scheduled call; line0 and the LAN boards
	// without a usable clock wait (their timers: line0's frame, b05, b06).
	if !s.clk.WaitForWaiters(base+3, 5*time.Second) {
		t.Fatalf("waiters %d, want %d", s.clk.Waiters(), base+3)
	}
	eventually(t, "the scheduled calls", func() bool {
		s.lan.mu.Lock()
		n := len(s.lan.calls)
		s.lan.mu.Unlock()
		s.line.mu.Lock()
		m := len(s.line.calls)
		s.line.mu.Unlock()
		return n == 1 && m == 1
	})
	colourFrame := frame.ColourRequest{R: 255}
	if diff := cmp.Diff(line1.takeSent(), []groupSent{{Group: 1, Native: colourFrame}}); diff != "" {
		t.Errorf("line1 before the moment (-got +want)\n%s", diff)
	}
	if len(s.line.takeSent()) != 0 {
		t.Error("line0 (not timed) sent before the moment")
	}
	// b04: booted 5 s before t0, so At is 5.25 s on its clock.
	if diff := cmp.Diff(s.lan.takeCalls(), []call{{"http://b04", "POST", "/screen/show?fire_at=5250000", `{"colour":"#ff0000"}`}}); diff != "" {
		t.Errorf("LAN before the moment (-got +want)\n%s", diff)
	}
	// b07 is on line0 only: its scheduled call goes over the line.
	if diff := cmp.Diff(s.line.takeCalls(), []call{{"7", "POST", "/screen/show?fire_at=1250000", `{"colour":"#ff0000"}`}}); diff != "" {
		t.Errorf("line0 calls before the moment (-got +want)\n%s", diff)
	}

	s.clk.Set(at)
	res := <-done
	if diff := cmp.Diff(s.line.takeSent(), []groupSent{{Group: 1, Native: colourFrame}}); diff != "" {
		t.Errorf("line0 at the moment (-got +want)\n%s", diff)
	}
	if diff := cmp.Diff(s.lan.takeCalls(), []call{
		{"http://b05", "POST", "/screen/show", `{"colour":"#ff0000"}`},
		{"http://b06", "POST", "/screen/show", `{"colour":"#ff0000"}`},
	}, sortCalls); diff != "" {
		t.Errorf("LAN at the moment (-got +want)\n%s", diff)
	}
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s %s %s %v", r.Board, r.Via, r.Fire, r.FiredAt.Sub(t0)))
		if r.Error != "" {
			t.Errorf("%s: %s", r.Board, r.Error)
		}
	}
	want := []string{"b01 group line 250ms", "b02 group line 250ms", "b03 group line 250ms",
		"b04 lan board 250ms", "b05 lan gateway 250ms", "b06 lan gateway 250ms", "b07 rs485 board 250ms"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("results (-got +want)\n%s", diff)
	}
	rs := reports()
	if len(rs) != 1 || len(rs[0].Changes) != 7 || !rs[0].At.Equal(at) || rs[0].Skew() != 0 {
		t.Fatalf("reports %+v", rs)
	}
	line1.mu.Lock()
	if len(line1.ats) != 1 || !line1.ats[0].Equal(at) {
		t.Errorf("line1 asked for %v", line1.ats)
	}
	line1.mu.Unlock()
}

// sortCalls compares call lists in any order (boards fired at one
// moment are called concurrently).
var sortCalls = cmp.Transformer("sort", func(in []call) []call {
	out := append([]call(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Addr < out[i].Addr {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// TestFireNowUnchanged: an action without a time runs as before: at once,
// no fire_at, no fire report, no Fire in the results.
func TestFireNowUnchanged(t *testing.T) {
	s, line1, _, reports := fireSetup(t)
	res, err := s.f.Do(context.Background(), Selector{Groups: []int{1}}, Action{Kind: ActionScreenShow, Body: []byte(`{"colour":"#00ff00"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Fire != "" || !r.FiredAt.IsZero() || r.Error != "" {
			t.Errorf("%+v", r)
		}
	}
	if len(s.line.takeSent()) != 1 || len(line1.takeSent()) != 1 {
		t.Error("group frames not sent at once")
	}
	for _, c := range s.lan.takeCalls() {
		if c.Path != "/screen/show" {
			t.Errorf("a call now carries %q", c.Path)
		}
	}
	line1.mu.Lock()
	if len(line1.ats) != 0 {
		t.Error("a fire now was timed")
	}
	line1.mu.Unlock()
	if rs := reports(); len(rs) != 0 {
		t.Errorf("reports %+v", rs)
	}
}

// TestFireBadTimes: out of bounds, nothing is sent; a moment passed
// fires at once.
func TestFireBadTimes(t *testing.T) {
	s, line1, _, reports := fireSetup(t)
	a := Action{Kind: ActionLEDs, Body: []byte(`{"mode":"solid","loop":true}`)}
	for _, at := range []time.Time{t0.Add(MaxFireLead + time.Millisecond), t0.Add(-MaxFirePast - time.Millisecond)} {
		a.At = at
		if _, err := s.f.Do(context.Background(), Selector{All: true}, a); !errors.Is(err, ErrBadTime) {
			t.Errorf("at %v: err %v, want ErrBadTime", at.Sub(t0), err)
		}
	}
	if len(s.line.takeSent())+len(line1.takeSent())+len(s.lan.takeCalls())+len(s.line.takeCalls()) != 0 || len(reports()) != 0 {
		t.Fatal("a refused fire sent something")
	}
	// Passed by 2 s: at once, and late by 2 s by every measure.
	a.At = t0.Add(-2 * time.Second)
	res, err := s.f.Do(context.Background(), Selector{Boards: []string{"b01", "b05"}}, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" || r.FiredAt.Sub(a.At) != 2*time.Second {
			t.Errorf("%s: %s late %v", r.Board, r.Error, r.FiredAt.Sub(a.At))
		}
	}
	if rs := reports(); len(rs) != 1 || len(rs[0].Changes) != 2 {
		t.Errorf("reports %+v", rs)
	}
}

func TestFireReportSkew(t *testing.T) {
	at := t0
	r := FireReport{At: at, Changes: []FireChange{{At: at.Add(3 * time.Millisecond)}, {At: at.Add(-time.Millisecond)}, {At: at}}}
	if got := r.Skew(); got != 4*time.Millisecond {
		t.Errorf("skew %v", got)
	}
	if got := (FireReport{Changes: r.Changes[:1]}).Skew(); got != 0 {
		t.Errorf("one board: skew %v", got)
	}
	if got := r.Changes[0].Lateness(at); got != 3*time.Millisecond {
		t.Errorf("lateness %v", got)
	}
}

func TestBoardTime(t *testing.T) {
	for _, tc := range []struct {
		epoch, at time.Time
		us        int64
		ok        bool
	}{
		{time.Time{}, t0, 0, false},
		{t0, t0, 0, true},
		{t0.Add(-90 * time.Second), t0.Add(1500 * time.Microsecond), 90_001_500, true},
	} {
		us, ok := BoardClock{Epoch: tc.epoch}.BoardTime(tc.at)
		if us != tc.us || ok != tc.ok {
			t.Errorf("epoch %v at %v: %d %v, want %d %v", tc.epoch, tc.at, us, ok, tc.us, tc.ok)
		}
	}
}

// TestFireTime: a lead becomes its moment once (so an action passed on to
// another gateway keeps it), and times out of bounds are ErrBadTime.
func TestFireTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		a      Action
		wantAt time.Time
		bad    bool
	}{
		{"now", Action{}, time.Time{}, false},
		{"lead", Action{Lead: 250 * time.Millisecond}, now.Add(250 * time.Millisecond), false},
		{"moment", Action{At: now.Add(time.Second)}, now.Add(time.Second), false},
		{"moment just passed", Action{At: now.Add(-time.Second)}, now.Add(-time.Second), false},
		{"lead and moment", Action{Lead: time.Second, At: now.Add(time.Second)}, time.Time{}, true},
		{"negative lead", Action{Lead: -time.Second}, time.Time{}, true},
		{"lead too long", Action{Lead: MaxFireLead + time.Millisecond}, time.Time{}, true},
		{"moment too far", Action{At: now.Add(MaxFireLead + time.Second)}, time.Time{}, true},
		{"moment long past", Action{At: now.Add(-MaxFirePast - time.Second)}, time.Time{}, true},
	} {
		got, err := FireTime(tc.a, now)
		if tc.bad {
			if !errors.Is(err, ErrBadTime) {
				t.Errorf("%s: %v, want ErrBadTime", tc.name, err)
			}
			continue
		}
		if err != nil || !got.At.Equal(tc.wantAt) || got.Lead != 0 {
			t.Errorf("%s: at %v lead %v (%v), want at %v and no lead", tc.name, got.At, got.Lead, err, tc.wantAt)
		}
	}
}

// TestTimedClipStart: a timed show of a file carries clip_start, the
// moment in the gateway's time each board was told (PUT /time: its
// estimate's Epoch less its offset), in a timed line's group call and in
// a board's scheduled call alike; a line whose boards have no clock
// estimate sends none (its boards start when they take the frame).
func TestTimedClipStart(t *testing.T) {
	s, line1, _, _ := fireSetup(t)
	// b03 on line1 booted 2 s before t0, offset 7 µs.
	s.f.Clock(Ref{Driver: "rs485:line1", Addr: "3"}, BoardClock{OffsetUS: 7, UncertaintyUS: 100, Epoch: t0.Add(-2 * time.Second)})
	base := s.clk.Waiters()
	at := t0.Add(250 * time.Millisecond)
	body := `{"path":"/c.mov","loop":true}`
	done := doAsync(s.f, Selector{Groups: []int{1}}, Action{Kind: ActionScreenShow, Body: []byte(body), At: at})
	if !s.clk.WaitForWaiters(base+3, 5*time.Second) {
		t.Fatalf("waiters %d, want %d", s.clk.Waiters(), base+3)
	}
	eventually(t, "the scheduled call", func() bool {
		s.lan.mu.Lock()
		defer s.lan.mu.Unlock()
		return len(s.lan.calls) == 1
	})
	// line1's group call: 2.25 s on b03's clock, less its offset.
	if diff := cmp.Diff(line1.takeSent(), []groupSent{{Group: 1, Method: "POST", Path: "/screen/show?clip_start=2249993", Body: body}}); diff != "" {
		t.Errorf("line1 (-got +want)\n%s", diff)
	}
	// b04: 5.25 s on its clock, offset 1 µs; fire_at after clip_start.
	if diff := cmp.Diff(s.lan.takeCalls(), []call{{"http://b04", "POST", "/screen/show?clip_start=5249999&fire_at=5250000", body}}); diff != "" {
		t.Errorf("b04 (-got +want)\n%s", diff)
	}
	s.clk.Set(at)
	<-done
	// line0 has no clock for b01 and b02: its group call names no start.
	if diff := cmp.Diff(s.line.takeSent(), []groupSent{{Group: 1, Method: "POST", Path: "/screen/show", Body: body}}); diff != "" {
		t.Errorf("line0 (-got +want)\n%s", diff)
	}
}

// TestToldSharper: an alignment is told when the board holds none, when
// it is within DefaultFireUncertainty, or when it beats the one held aged
// at 50 ppm; a blurred one never replaces a sharp one.
func TestToldSharper(t *testing.T) {
	held := Told{UncertaintyUS: 3000, AtUS: 1_000_000, Set: true}
	for _, tc := range []struct {
		name  string
		told  Told
		u, at int64
		want  bool
	}{
		{"nothing held", Told{}, 50_000, 0, true},
		{"sharp", held, 2000, 1_000_001, true},
		{"blurred, just after", held, 3100, 1_000_001, false},
		{"as good", held, 3000, 1_000_000, true},
		{"blurred, held one aged 60 s (+3 ms)", held, 5900, 61_000_000, true},
		{"blurred beyond the aged one", held, 6100, 61_000_000, false},
	} {
		if got := tc.told.Sharper(tc.u, tc.at); got != tc.want {
			t.Errorf("%s: Sharper(%d, %d) = %v", tc.name, tc.u, tc.at, got)
		}
	}
}
