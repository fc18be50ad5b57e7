package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/clock"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newHub(t testing.TB, opts Options) (*Hub, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	h := New(clk, nil, opts)
	t.Cleanup(h.Close)
	return h, clk
}

// next returns the subscription's next message, failing after 5 s of real
// time (a safety net, not a timer the test waits for).
func next(t testing.TB, s *Subscription) Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return m
}

func nothingQueued(t testing.TB, s *Subscription) {
	t.Helper()
	if m, ok, err := s.TryNext(); ok || err != nil {
		t.Fatalf("TryNext = %q, %v, %v; want nothing queued", m.Data, ok, err)
	}
}

type msg struct {
	Kind      string
	Data      string
	ID        uint16
	Happening bool
}

func asMsg(m Message) msg { return msg{m.Kind, string(m.Data), m.ID, m.Happening} }

type clipStarted struct {
	Path   string `json:"path"`
	Loop   bool   `json:"loop"`
	Plays  int    `json:"plays"`
	Frames int    `json:"frames"`
	FPS    int    `json:"fps"`
}

func TestEmitData(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		fields any
		want   string
	}{
		{"no fields", "touch", nil, `{"event":"touch","seq":1,"t_ms":1500}`},
		{"struct", "clip_started", clipStarted{"/clips/a.gif", true, 0, 24, 12},
			`{"event":"clip_started","seq":1,"t_ms":1500,"path":"/clips/a.gif","loop":true,"plays":0,"frames":24,"fps":12}`},
		{"map", "touch", map[string]any{"action": "down", "x": 3, "y": 239},
			`{"event":"touch","seq":1,"t_ms":1500,"action":"down","x":3,"y":239}`},
		{"empty object", "clip_ended", struct{}{}, `{"event":"clip_ended","seq":1,"t_ms":1500}`},
		{"not an object is left out", "touch", 42, `{"event":"touch","seq":1,"t_ms":1500}`},
		{"does not marshal", "touch", map[string]any{"f": func() {}}, `{"event":"touch","seq":1,"t_ms":1500}`},
		{"newline inside a string stays escaped", "clip_ended", map[string]string{"path": "a\nb"},
			`{"event":"clip_ended","seq":1,"t_ms":1500,"path":"a\nb"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, clk := newHub(t, Options{})
			clk.Advance(1500 * time.Millisecond)
			got := h.Emit(tt.kind, tt.fields)
			if diff := cmp.Diff(string(got.Data), tt.want); diff != "" {
				t.Errorf("Data (-got +want)\n%s", diff)
			}
			if got.Seq != 1 || got.Kind != tt.kind || got.TMs != 1500 {
				t.Errorf("Happening = %d %q %d; want 1 %q 1500", got.Seq, got.Kind, got.TMs, tt.kind)
			}
		})
	}
}

func TestBadKindDropped(t *testing.T) {
	h, _ := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	for _, k := range []string{"", "Touch", "to uch", "a\nb", "x_123456789_123456789_1234567890ab"} {
		if got := h.Emit(k, nil); got.Seq != 0 {
			t.Errorf("Emit(%q) seq %d; want dropped", k, got.Seq)
		}
		h.SetState(k, 1)
	}
	nothingQueued(t, s)
	if h.Latest() != 0 {
		t.Errorf("Latest = %d; want 0", h.Latest())
	}
}

func TestInjectedUptime(t *testing.T) {
	h, _ := newHub(t, Options{Uptime: func() time.Duration { return 90 * time.Second }})
	if got := h.Emit("touch", nil); got.TMs != 90000 {
		t.Errorf("t_ms = %d; want 90000", got.TMs)
	}
}

func TestSeqWrap(t *testing.T) {
	h, _ := newHub(t, Options{})
	for n := 1; n <= MaxSeq+2; n++ {
		hp := h.Emit("touch", nil)
		want := uint16((n-1)%MaxSeq + 1)
		if hp.Seq != want || hp.Seq == 0 {
			t.Fatalf("happening %d: seq %d; want %d", n, hp.Seq, want)
		}
	}
	if h.Latest() != 2 {
		t.Errorf("Latest = %d; want 2", h.Latest())
	}
	seq, lost, evs := h.Since(MaxSeq-1, Filter{})
	if diff := cmp.Diff(seqs(evs), []uint16{MaxSeq, 1, 2}); diff != "" || seq != 2 || lost != 0 {
		t.Errorf("Since(65534) = %d, %d, (-got +want)\n%s", seq, lost, diff)
	}
}

func seqs(evs []Happening) []uint16 {
	out := []uint16{}
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func span(from, to int) []uint16 {
	out := []uint16{}
	for n := from; n <= to; n++ {
		out = append(out, uint16((n-1)%MaxSeq+1))
	}
	return out
}

func TestSinceKeepAndLost(t *testing.T) {
	h, _ := newHub(t, Options{})
	for n := 1; n <= 40; n++ {
		kind := "touch"
		if n%2 == 0 {
			kind = "clip_ended"
		}
		h.Emit(kind, nil)
	}
	tests := []struct {
		name     string
		after    uint16
		kinds    Filter
		wantLost int
		want     []uint16
	}{
		{"from the start", 0, Filter{}, 8, span(9, 40)},
		{"some forgotten", 5, Filter{}, 3, span(9, 40)},
		{"just before the oldest kept", 8, Filter{}, 0, span(9, 40)},
		{"the oldest kept", 9, Filter{}, 0, span(10, 40)},
		{"one left", 39, Filter{}, 0, span(40, 40)},
		{"up to date", 40, Filter{}, 0, span(1, 0)},
		{"not issued yet counts as 0", 41, Filter{}, 8, span(9, 40)},
		{"kinds", 30, FilterOf("clip_ended"), 0, []uint16{32, 34, 36, 38, 40}},
		{"kinds, lost counts every kind", 4, FilterOf("touch"), 4, []uint16{9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37, 39}},
		{"unknown kind matches nothing", 0, FilterOf("nosuch"), 8, span(1, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq, lost, evs := h.Since(tt.after, tt.kinds)
			if seq != 40 || lost != tt.wantLost {
				t.Errorf("seq, lost = %d, %d; want 40, %d", seq, lost, tt.wantLost)
			}
			if diff := cmp.Diff(seqs(evs), tt.want); diff != "" {
				t.Errorf("events (-got +want)\n%s", diff)
			}
			for _, e := range evs {
				if !tt.kinds.Match(e.Kind) {
					t.Errorf("event %d of kind %q not selected", e.Seq, e.Kind)
				}
			}
		})
	}
}

func TestSinceAcrossWrap(t *testing.T) {
	h, _ := newHub(t, Options{})
	const total = MaxSeq + 10 // kept: counts 65514..65545, seqs 65514..65535, 1..10
	for range total {
		h.Emit("touch", nil)
	}
	tests := []struct {
		name     string
		after    uint16
		wantLost int
		want     []uint16
	}{
		{"before the wrap", 65530, 0, span(65531, total)},
		{"after the wrap: the most recent 5", 5, 0, span(65541, total)},
		{"last of the first lap", MaxSeq, 0, span(MaxSeq+1, total)},
		{"long ago", 65000, 65514 - 65001, span(65514, total)},
		{"0 is the start", 0, 65513, span(65514, total)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq, lost, evs := h.Since(tt.after, Filter{})
			if seq != 10 || lost != tt.wantLost {
				t.Errorf("seq, lost = %d, %d; want 10, %d", seq, lost, tt.wantLost)
			}
			if diff := cmp.Diff(seqs(evs), tt.want); diff != "" {
				t.Errorf("events (-got +want)\n%s", diff)
			}
		})
	}
}

func TestCoalescing(t *testing.T) {
	h, _ := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	for i := range 100 {
		h.SetState("leds", map[string]int{"brightness": i})
	}
	if diff := cmp.Diff(asMsg(next(t, s)), msg{"leds", `{"event":"leds","state":{"brightness":99}}`, 0, false}); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	nothingQueued(t, s)

	// A pending state keeps its place and carries the latest value.
	h.SetState("screen", 1)
	h.Emit("touch", nil)
	h.SetState("screen", 2)
	h.SetState("leds", 7)
	want := []msg{
		{"screen", `{"event":"screen","state":2}`, 0, false},
		{"touch", `{"event":"touch","seq":1,"t_ms":0}`, 1, true},
		{"leds", `{"event":"leds","state":7}`, 0, false},
	}
	var got []msg
	for range want {
		got = append(got, asMsg(next(t, s)))
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	nothingQueued(t, s)
}

func TestStateFilter(t *testing.T) {
	h, _ := newHub(t, Options{})
	s := h.Subscribe(FilterOf("leds", "touch"), nil)
	h.SetState("screen", 1)
	h.Emit("clip_ended", nil)
	h.SetState("leds", 2)
	h.Emit("touch", nil)
	var got []string
	for range 2 {
		got = append(got, next(t, s).Kind)
	}
	if diff := cmp.Diff(got, []string{"leds", "touch"}); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	nothingQueued(t, s)
}

func TestHoloThrottle(t *testing.T) {
	h, clk := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	state := func(v int) string { return `{"event":"holo","state":` + string(rune('0'+v)) + `}` }

	h.SetState("holo", 1) // leading edge: at once
	if got := string(next(t, s).Data); got != state(1) {
		t.Fatalf("leading edge = %s", got)
	}
	clk.Advance(100 * time.Millisecond)
	h.SetState("holo", 2)
	h.SetState("holo", 3)
	nothingQueued(t, s)
	h.SetState("leds", 0) // other kinds are not held
	if got := next(t, s).Kind; got != "leds" {
		t.Fatalf("got %q; want leds", got)
	}
	clk.Advance(149 * time.Millisecond)
	nothingQueued(t, s)
	clk.Advance(1 * time.Millisecond) // 250 ms after the leading edge
	if got := string(next(t, s).Data); got != state(3) {
		t.Fatalf("trailing edge = %s; want the latest", got)
	}
	// Within 250 ms of the trailing send: held again.
	clk.Advance(10 * time.Millisecond)
	h.SetState("holo", 4)
	nothingQueued(t, s)
	clk.Advance(240 * time.Millisecond)
	if got := string(next(t, s).Data); got != state(4) {
		t.Fatalf("second trailing edge = %s", got)
	}
	// Quiet for a while: at once again.
	clk.Advance(time.Second)
	h.SetState("holo", 5)
	if got := string(next(t, s).Data); got != state(5) {
		t.Fatalf("after a quiet second = %s", got)
	}
	nothingQueued(t, s)
}

func TestNoThrottle(t *testing.T) {
	h, _ := newHub(t, Options{Throttle: map[string]time.Duration{}})
	s := h.Subscribe(Filter{}, nil)
	for i := range 3 {
		h.SetState("holo", i)
		next(t, s)
	}
}

func TestOverflowClosesOnlyThatSubscriber(t *testing.T) {
	h, _ := newHub(t, Options{Keep: 4, QueueLimit: 4})
	slow := h.Subscribe(Filter{}, nil)
	fast := h.Subscribe(Filter{}, nil)
	for n := 1; n <= 5; n++ {
		h.Emit("touch", nil)
		if m := next(t, fast); m.ID != uint16(n) {
			t.Fatalf("fast got %d; want %d", m.ID, n)
		}
	}
	if _, err := slow.Next(context.Background()); !errors.Is(err, ErrOverflow) {
		t.Fatalf("slow Next err = %v; want ErrOverflow", err)
	}
	h.Emit("touch", nil)
	if m := next(t, fast); m.ID != 6 {
		t.Fatalf("fast got %d; want 6", m.ID)
	}
	h.mu.Lock()
	n := len(h.subs)
	h.mu.Unlock()
	if n != 1 {
		t.Errorf("%d subscribers; want 1", n)
	}
	// The slow one reconnects from the last seq it saw (0).
	var zero uint16
	again := h.Subscribe(Filter{}, &zero)
	if again.Lost() != 2 {
		t.Errorf("Lost = %d; want 2", again.Lost())
	}
	var got []uint16
	for range 4 {
		got = append(got, next(t, again).ID)
	}
	if diff := cmp.Diff(got, []uint16{3, 4, 5, 6}); diff != "" {
		t.Errorf("replay (-got +want)\n%s", diff)
	}
}

func TestStatesDoNotOverflow(t *testing.T) {
	h, _ := newHub(t, Options{QueueLimit: 32})
	s := h.Subscribe(Filter{}, nil)
	for i := range 10000 {
		h.SetState("holo", i)
		h.SetState("leds", i)
	}
	var got []string
	for range 2 {
		got = append(got, string(next(t, s).Data))
	}
	want := []string{`{"event":"holo","state":0}`, `{"event":"leds","state":9999}`}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
}

func TestQueueStaysBounded(t *testing.T) {
	h, _ := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	h.Emit("touch", nil) // one always pending: the queue never drains
	for range 10000 {
		h.Emit("touch", nil)
		next(t, s)
	}
	s.mu.Lock()
	c := cap(s.queue)
	s.mu.Unlock()
	if c > 16 {
		t.Errorf("queue capacity %d after 10000 rounds; want it bounded", c)
	}
}

func TestReplayAfter(t *testing.T) {
	h, _ := newHub(t, Options{})
	for n := 1; n <= 10; n++ {
		if n%2 == 0 {
			h.Emit("clip_ended", map[string]bool{"finished": true})
		} else {
			h.Emit("touch", nil)
		}
	}
	after := uint16(5)
	s := h.Subscribe(FilterOf("touch"), &after)
	live := h.Subscribe(Filter{}, nil)
	h.Emit("touch", nil)
	var got []uint16
	for range 3 {
		got = append(got, next(t, s).ID)
	}
	if diff := cmp.Diff(got, []uint16{7, 9, 11}); diff != "" {
		t.Errorf("replay then live (-got +want)\n%s", diff)
	}
	if s.Lost() != 0 {
		t.Errorf("Lost = %d", s.Lost())
	}
	if m := next(t, live); m.ID != 11 {
		t.Errorf("live-only subscriber got %d first; want 11", m.ID)
	}
	nothingQueued(t, live)
}

func TestClose(t *testing.T) {
	h, _ := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		done <- err
	}()
	stop := h.Every("system", time.Second, func() (any, bool) { return 1, true })
	h.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v; want ErrClosed", err)
	}
	stop() // returns: the goroutine ended with Close
	if hp := h.Emit("touch", nil); hp.Seq != 0 {
		t.Errorf("Emit after Close gave seq %d", hp.Seq)
	}
	h.SetState("leds", 1)
	if _, err := h.Subscribe(Filter{}, nil).Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close: %v; want ErrClosed", err)
	}
	h.Close()
}

func TestSubscriptionClose(t *testing.T) {
	h, _ := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	s.Close()
	h.Emit("touch", nil)
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v; want ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Subscribe(Filter{}, nil).Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with a done context: %v", err)
	}
}

func TestEvery(t *testing.T) {
	h, clk := newHub(t, Options{})
	s := h.Subscribe(Filter{}, nil)
	calls := make(chan int, 10)
	n := 0
	stop := h.Every("system", SystemPeriod, func() (any, bool) {
		n++
		calls <- n
		return map[string]int{"uptime_s": n * 15}, n != 2
	})
	wantCall := func(want int) {
		t.Helper()
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("call %d; want %d", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no call %d", want)
		}
	}
	clk.Advance(SystemPeriod - time.Millisecond)
	nothingQueued(t, s)
	clk.Advance(time.Millisecond)
	wantCall(1)
	if got := string(next(t, s).Data); got != `{"event":"system","state":{"uptime_s":15}}` {
		t.Fatalf("tick 1 = %s", got)
	}
	clk.Advance(SystemPeriod)
	wantCall(2) // says not this time
	clk.Advance(SystemPeriod)
	wantCall(3)
	if got := string(next(t, s).Data); got != `{"event":"system","state":{"uptime_s":45}}` {
		t.Fatalf("tick 3 = %s", got)
	}
	stop()
	stop()
	clk.Advance(SystemPeriod)
	select {
	case c := <-calls:
		t.Fatalf("call %d after stop", c)
	default:
	}
	if clk.Waiters() != 0 {
		t.Errorf("%d timers left after stop", clk.Waiters())
	}
}
