package clock

import (
	"context"
	"time"
)

// Every runs fn at once and then every d on clk, until ctx ends: a
// periodic job (a refresh, a republication). The ticker is armed after
// the first run, so on a Fake the job has run once by the time a test
// sees its waiter. Ticks that come while fn runs are dropped, as a
// ticker's are.
func Every(ctx context.Context, clk Clock, d time.Duration, fn func()) {
	fn()
	t := clk.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			fn()
		}
	}
}
