package rs485

import (
	"strconv"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
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
