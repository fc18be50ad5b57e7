package lan

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// TestClockAligned: a real board on loopback; the driver's estimate of
// its clock lands within the reported uncertainty of the truth. The
// board's clock counts from its boot's start, so the truth is minus the
// gateway's time at that start.
func TestClockAligned(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	l, sink := startLAN(t, Options{ClockEvery: 50 * time.Millisecond, ClockMaxEvery: 100 * time.Millisecond, ClockSamples: 4})
	if err := l.Add(tb.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "three clock estimates", func(s *recSink) bool { return s.ClockN[tb.URL] >= 3 })
	sink.Mu.Lock()
	c := sink.Clocks[tb.URL]
	sink.Mu.Unlock()
	started := tb.Board.Current().Started
	truth := -gatewayMicros(l.stamp, started)
	if c.Via != "lan" || c.UncertaintyUS <= 0 || c.SyncedAt.IsZero() {
		t.Fatalf("clock %+v", c)
	}
	if d := c.OffsetUS - truth; d < -c.UncertaintyUS || d > c.UncertaintyUS {
		t.Fatalf("offset %d ± %d µs, truth %d: off by %d µs", c.OffsetUS, c.UncertaintyUS, truth, d)
	}
	t.Logf("offset %d ± %d µs, error %d µs", c.OffsetUS, c.UncertaintyUS, c.OffsetUS-truth)
}

// gatewayMicros is t on the stamper's clock (µs), from the monotonic
// readings of both.
func gatewayMicros(s *timesync.Stamper, t time.Time) int64 {
	return s.Now() - time.Since(t).Microseconds()
}

// TestClockPaced: a board is measured quickly while its estimate settles,
// then at the slow pace its estimate allows, and quickly again once it
// restarted. The two paces are far apart (50 ms against a minute), so what
// the test reads is the schedule, not how fast this machine is.
func TestClockPaced(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	// The restart shows as the uptime (whole seconds) going backwards: the
	// board is up a second before it is first read.
	waitUptime(t, tb.URL)
	// A target of ten seconds leaves the longest period, a minute, once
	// the estimate settled.
	l, sink := startLAN(t, Options{ClockEvery: 50 * time.Millisecond, ClockMaxEvery: time.Minute,
		ClockTarget: 10 * time.Second, ClockSamples: 2})
	if err := l.Add(tb.URL, ""); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		sink.Mu.Lock()
		defer sink.Mu.Unlock()
		return sink.ClockN[tb.URL]
	}
	sink.Wait(t, 30*time.Second, "two settling rounds", func(s *recSink) bool { return s.ClockN[tb.URL] >= clockSettle })
	// The round after the settling ones is queued at the slow pace: at
	// least 54 s (a minute less a tenth) after it was queued.
	var next time.Time
	waitFor(t, 30*time.Second, "the next round queued", func() bool {
		var ok bool
		next, ok = queuedRound(l, tb.URL)
		return ok && count() == clockSettle
	})
	if d := next.Sub(time.Now()); d < 30*time.Second {
		t.Fatalf("after %d settling rounds the next is due in %v; want the slow pace (54-60 s)", clockSettle, d)
	}
	n := count()
	tb.Board.Restart(0)
	sink.Wait(t, 30*time.Second, "restarted", func(s *recSink) bool { return s.RestartedN[tb.URL] == 1 })
	// At the slow pace the next two rounds would take two minutes.
	sink.Wait(t, 30*time.Second, "two quick rounds after the restart", func(s *recSink) bool { return s.ClockN[tb.URL] >= n+2 })
}

// queuedRound is when the board at url is next due to be measured (ok
// false: it is not queued).
func queuedRound(l *LAN, url string) (next time.Time, ok bool) {
	l.mu.Lock()
	b := l.boards[url]
	l.mu.Unlock()
	if b == nil {
		return time.Time{}, false
	}
	l.clockQ.mu.Lock()
	defer l.clockQ.mu.Unlock()
	if b.clock.index < 0 {
		return time.Time{}, false
	}
	return b.clock.next, true
}

// TestClockPeriod: the next round is due as late as keeps the aged
// uncertainty within the target, between ClockEvery and ClockMaxEvery,
// less up to a tenth at random.
func TestClockPeriod(t *testing.T) {
	l := New(Options{ClockEvery: 5 * time.Second, ClockMaxEvery: 30 * time.Second, ClockTarget: 2 * time.Millisecond})
	for _, tc := range []struct {
		name   string
		uncUS  int64
		got    bool
		rounds int
		want   time.Duration
	}{
		{"no estimate", 100, false, 5, 5 * time.Second},
		{"settling", 100, true, 1, 5 * time.Second},
		{"sharp: the longest", 100, true, 2, 30 * time.Second},
		{"room for 10 s", 1500, true, 3, 10 * time.Second},
		{"room for 2 s: the shortest", 1900, true, 3, 5 * time.Second},
		{"beyond the target", 3000, true, 3, 5 * time.Second},
	} {
		for range 20 {
			p := l.clockPeriod(timesync.Estimate{Uncertainty: tc.uncUS}, tc.got, tc.rounds)
			if p > tc.want || p < tc.want-tc.want/10 {
				t.Fatalf("%s: period %v, want %v less up to a tenth", tc.name, p, tc.want)
			}
		}
	}
}

// TestClockQueue: boards come off the schedule in the order they are due,
// an earlier time replaces a later one, and nothing is queued while the
// driver does not measure.
func TestClockQueue(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(Options{Clock: clk})
	for _, u := range []string{"http://a", "http://b", "http://c"} {
		if err := l.Add(u, ""); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := l.boards["http://a"], l.boards["http://b"], l.boards["http://c"]
	now := clk.Now()
	l.clockAt(a, now)
	if x, wait := l.due(); x != nil || wait >= 0 {
		t.Fatalf("queued while not measuring: %v %v", x, wait)
	}
	l.clockQ.on = true
	l.clockAt(a, now.Add(3*time.Second))
	l.clockAt(b, now.Add(time.Second))
	l.clockAt(c, now.Add(2*time.Second))
	l.clockAt(a, now.Add(5*time.Second)) // later: stays at 3 s
	l.clockAt(c, now.Add(500*time.Millisecond))
	if x, wait := l.due(); x != nil || wait != 500*time.Millisecond {
		t.Fatalf("due %v, wait %v; want nothing for 500ms", x, wait)
	}
	clk.Advance(3 * time.Second)
	for i, want := range []*lanBoard{c, b, a} {
		if x, _ := l.due(); x != want {
			t.Fatalf("#%d: %v, want %s", i, x, want.url)
		}
	}
	if x, wait := l.due(); x != nil || wait >= 0 {
		t.Fatalf("empty queue gave %v %v", x, wait)
	}
}

// TestClockOff: with alignment off a board is watched and never measured.
func TestClockOff(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	l, sink := startLAN(t, Options{ClockEvery: -1})
	if err := l.Add(tb.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "seen with states", func(s *recSink) bool { return s.SeenN[tb.URL] == 1 && len(s.States[tb.URL]) >= 6 })
	time.Sleep(100 * time.Millisecond)
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if n := sink.ClockN[tb.URL]; n != 0 {
		t.Fatalf("%d clock estimates with alignment off", n)
	}
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// markedClock is a sink that keeps every clock estimate, with what mark
// said when it came.
type markedClock struct {
	*recSink
	mark  func() int64
	mu    sync.Mutex
	got   []fleet.BoardClock
	marks []int64
}

func (s *markedClock) Clock(ref fleet.Ref, c fleet.BoardClock) {
	s.mu.Lock()
	s.got, s.marks = append(s.got, c), append(s.marks, s.mark())
	s.mu.Unlock()
	s.recSink.Clock(ref, c)
}

// heldTime is a real board behind a proxy that holds the GET /time
// requests hold() says before passing them on (it is given their count,
// from 1), and counts them; with a driver measuring it with o, whose
// estimates go to a markedClock marked with that count.
func heldTime(t *testing.T, o Options, hold func(n int64) time.Duration) *markedClock {
	t.Helper()
	tb := startBoard(t, "", "127.0.0.1:0")
	target, err := url.Parse(tb.URL)
	if err != nil {
		t.Fatal(err)
	}
	var times atomic.Int64 // GET /time requests passed on
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // event streams as they come
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/time" {
			time.Sleep(hold(times.Add(1)))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	o.MinBackoff, o.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	l := New(o)
	sink := &markedClock{recSink: newRecSink(), mark: times.Load}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, sink) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := l.Add(front.URL, ""); err != nil {
		t.Fatal(err)
	}
	return sink
}

// estimates waits for n estimates and returns the first n with their
// marks.
func (s *markedClock) estimates(t *testing.T, n int) ([]fleet.BoardClock, []int64) {
	t.Helper()
	s.Wait(t, 20*time.Second, "clock estimates", func(r *recSink) bool {
		for _, k := range r.ClockN {
			return k >= n
		}
		return false
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[:n], s.marks[:n]
}

// TestClockBlurredRoundRetakes: a round whose exchanges all wait (here a
// proxy holds the board's first three GET /time 100 ms before passing
// them on) takes more, and its estimate comes from those that did not
// wait: the board is aligned within the target at once, rather than
// fired by the gateway (a round trip late) until its next round.
// Without the extra exchanges the estimate of that round is at least
// half the wait blurred (50 ms).
func TestClockBlurredRoundRetakes(t *testing.T) {
	const hold = 100 * time.Millisecond
	sink := heldTime(t, Options{ClockEvery: time.Second, ClockSamples: 3}, func(n int64) time.Duration {
		if n <= 3 {
			return hold
		}
		return 0
	})
	got, marks := sink.estimates(t, 1)
	if n := marks[0]; n <= 3 || n > 6 {
		t.Fatalf("the first round took %d exchanges; want 4-6 (3, and up to 3 more as it was blurred)", n)
	}
	if u := got[0].UncertaintyUS; u >= (hold / 2).Microseconds() {
		t.Fatalf("first estimate ± %d µs: as blurred as the held exchanges", u)
	}
	t.Logf("first round: %d exchanges, ± %d µs", marks[0], got[0].UncertaintyUS)
}

// TestClockBlurredNetworkNoExtra: where every exchange waits (a network
// that never gives a sharp sample), a round takes its extra exchanges
// once, and the rounds after take none: they would double the traffic
// for nothing.
func TestClockBlurredNetworkNoExtra(t *testing.T) {
	sink := heldTime(t, Options{ClockEvery: 100 * time.Millisecond, ClockSamples: 2}, func(int64) time.Duration { return 20 * time.Millisecond })
	got, marks := sink.estimates(t, 3)
	if got[0].UncertaintyUS <= (2 * time.Millisecond).Microseconds() {
		t.Fatalf("the held exchanges gave ± %d µs: not blurred", got[0].UncertaintyUS)
	}
	if want := []int64{4, 6, 8}; !slices.Equal(marks, want) {
		t.Fatalf("exchanges after each round: %v; want %v (2 and 2 more, then 2 a round)", marks, want)
	}
}

// TestClockFirstRoundSoon: a board coming online is measured within a
// second, however long the period between rounds: until its first round
// a timed fire calls it at the moment, a round trip late, instead of
// telling it the moment ahead, so a show started with the gateway would
// have it late for up to a period (ClockEvery, 5 s by default). A day
// here: without the bound its first round would come within a day.
func TestClockFirstRoundSoon(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	l, sink := startLAN(t, Options{ClockEvery: 24 * time.Hour})
	if err := l.Add(tb.URL, ""); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 20*time.Second, "a clock estimate", func(s *recSink) bool { return s.ClockN[tb.URL] >= 1 })
}
