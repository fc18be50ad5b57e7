package lan

import (
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/timesync"
)

// TestClockAligned: a real board on loopback; the driver's estimate of
// its clock lands within the reported uncertainty of the truth. The
// board's clock counts from its boot's start, so the truth is minus the
// gateway's time at that start.
func TestClockAligned(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	l, sink := startLAN(t, Options{ClockEvery: 50 * time.Millisecond, ClockSamples: 4})
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
