package rs485

import (
	"strconv"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// TestClockAligned: real boards on the simulated line; the master's
// estimate of each board's clock lands within the reported uncertainty
// of the truth (minus the gateway's time at the board's boot).
func TestClockAligned(t *testing.T) {
	line := newLine(t, simline.Faults{})
	boards := []*testBoard{startBoard(t, line, 3, nil), startBoard(t, line, 6, nil)}
	l, sink := startMaster(t, line, Options{Addresses: addrs(6), ClockEvery: 100 * time.Millisecond})
	sink.Wait(t, 20*time.Second, "four clock estimates of each board", func(s *recSink) bool {
		return s.ClockN["3"] >= 4 && s.ClockN["6"] >= 4
	})
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	for _, tb := range boards {
		a := strconv.Itoa(tb.addr)
		c := sink.Clocks[a]
		truth := -gatewayMicros(l.stamp, tb.Board.Current().Started)
		if c.Via != "rs485:test" || c.UncertaintyUS <= 0 || c.SyncedAt.IsZero() {
			t.Fatalf("board %s: clock %+v", a, c)
		}
		if d := c.OffsetUS - truth; d < -c.UncertaintyUS || d > c.UncertaintyUS {
			t.Fatalf("board %s: offset %d ± %d µs, truth %d: off by %d µs", a, c.OffsetUS, c.UncertaintyUS, truth, d)
		}
		// That the wire times are taken out of the uncertainty is
		// TestClockSample's, on fixed figures: here, on the real clock, a
		// loaded machine's scheduling delays (10 ms beside 50 runnable
		// processes) are in the round trip and dwarf the 4.4 ms they are.
		t.Logf("board %s: offset %d ± %d µs, error %d µs", a, c.OffsetUS, c.UncertaintyUS, c.OffsetUS-truth)
	}
}

// TestClockOff: a negative ClockEvery sends no GET /time.
func TestClockOff(t *testing.T) {
	line := newLine(t, simline.Faults{})
	startBoard(t, line, 2, nil)
	l, sink := startMaster(t, line, Options{Addresses: addrs(2), ClockEvery: -1})
	sink.Wait(t, 20*time.Second, "board 2 seen with its states", func(s *recSink) bool {
		return s.States["2"]["scenes"] != nil
	})
	afterPolls(t, l, 6) // an estimate would follow the states at once
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if n := sink.ClockN["2"]; n != 0 {
		t.Fatalf("%d clock estimates with ClockEvery < 0", n)
	}
}

// TestClockSample: the wire times of the request and the reply are taken
// out of the round trip, so an exchange whose only delay is the wire
// gives the exact offset with no delay left.
func TestClockSample(t *testing.T) {
	l := New(Options{Baud: 10000}) // a byte takes 1 ms
	const offset = 5_000_000       // board = gateway + 5 s
	t1 := int64(1_700_000_000_000_000)
	for _, tc := range []struct {
		name          string
		out, in, turn int64 // bytes each way; the board's time inside (µs)
	}{
		{"short", 40, 60, 0},
		{"long reply", 40, 500, 200},
		{"long request", 300, 60, 50},
	} {
		t2 := t1 + tc.out*1000 + offset
		t3 := t2 + tc.turn
		t4 := t3 - offset + tc.in*1000
		s := clockSample(t1, lineTimes{t4: t4, out: int(tc.out), in: int(tc.in)}, boardapi.TimeReply{T1: &t1, T2: t2, T3: t3}, l.wireTime)
		off, delay, err := s.Measure()
		if err != nil || off != offset || delay != 0 {
			t.Errorf("%s: offset %d delay %d err %v, want %d 0", tc.name, off, delay, err, offset)
		}
		// Without the correction the sample is off by the asymmetry.
		raw := timesync.Sample{T1: t1, T2: t2, T3: t3, T4: t4}
		if rawOff, _, _ := raw.Measure(); tc.out != tc.in && rawOff == offset {
			t.Errorf("%s: the uncorrected sample is exact too; the test proves nothing", tc.name)
		}
	}
}

// gatewayMicros is t on the stamper's clock (µs), from the monotonic
// readings of both.
func gatewayMicros(s *timesync.Stamper, t time.Time) int64 {
	return s.Now() - time.Since(t).Microseconds()
}

// TestClockFollowsNoisyLine: a board whose crystal runs 50 ppm fast, on a
// line of a loaded host where, after one quick exchange, every clock
// sample waits 40 ms on one leg (the request read late, or the reply
// taken off the line late, in turn), measured every 30 s for 10 minutes
// on the fake clock. The alignment the board holds (what it was last
// told) stays within 5 ms of the truth throughout (the crystal alone
// moves it 1.5 ms between samples), far within the
// half-frame (17 ms at 30 fps) that keeps its clip with the others'. An
// estimate from the newest sample alone beat the held one only once its
// aging passed the sample's 20 ms blur: the board drifted 20 ms before
// it was told again, and then an estimate off by those 20 ms.
func TestClockFollowsNoisyLine(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	stamp := timesync.NewStamper(clk)
	boot := stamp.Now() - 3_000_000                                       // the board started 3 s ago
	boardUS := func(g int64) int64 { d := g - boot; return d + d/20_000 } // +50 ppm
	truth := func(g int64) int64 { return boardUS(g) - g }                // the true offset at g
	const quick, wait, turn = 150 * time.Microsecond, 40 * time.Millisecond, 500 * time.Microsecond
	var c boardClock
	held := int64(0) // the offset the board was told (its epoch is -held)
	worst := time.Duration(0)
	for k := range 21 {
		out, in := quick, quick
		switch {
		case k == 0:
		case k%2 == 1:
			out = wait
		default:
			in = wait
		}
		t1 := stamp.Now()
		clk.Advance(out)
		t2 := boardUS(stamp.Now())
		clk.Advance(turn)
		t3 := boardUS(stamp.Now())
		clk.Advance(in)
		t4 := stamp.Now()
		e, stepped, err := c.take(timesync.Sample{T1: t1, T2: t2, T3: t3, T4: t4})
		if err != nil || stepped {
			t.Fatalf("sample %d: stepped %v, %v", k, stepped, err)
		}
		if d := e.Offset - truth(t4); abs64(d) > e.Uncertainty {
			t.Fatalf("sample %d: estimate %d ± %d µs is %d µs off the truth", k, e.Offset, e.Uncertainty, d)
		}
		if c.worthTelling(e) {
			c.toldIt()
			held = c.tell.Offset
		}
		if k == 0 {
			continue
		}
		// The error of the board's aligned clock, just after this sample
		// and just before the next one.
		for _, g := range []int64{stamp.Now(), stamp.Now() + DefaultClockEvery.Microseconds()} {
			worst = max(worst, time.Duration(abs64(truth(g)-held))*time.Microsecond)
		}
		clk.Advance(DefaultClockEvery - out - turn - in)
	}
	if worst > 5*time.Millisecond {
		t.Fatalf("the board's alignment was up to %v off the gateway's time over 10 minutes", worst)
	}
	t.Logf("the board's alignment was within %v of the gateway's time", worst)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
