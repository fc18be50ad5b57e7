package clock

import (
	"context"
	"time"
)

// Sleep waits d on clk, or until ctx ends (it then returns ctx.Err()):
// the pause of a backoff, a retry or a rate limit. It always arms a timer
// of clk, so on a Fake it is one waiter until the fake time passes d,
// even for d <= 0 (a test's BlockUntil counts it). Unlike Until it never
// spins: a pause is not a moment to meet to the microsecond.
func Sleep(ctx context.Context, clk Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
