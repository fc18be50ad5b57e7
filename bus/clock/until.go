package clock

import (
	"context"
	"runtime"
	"time"
)

// SpinWindow is how close to its moment Until stops sleeping on the Real
// clock: operating systems wake a sleeping goroutine up to a millisecond
// late (more on a loaded virtual machine), which is far longer than one
// character takes on a 115200-baud line (87 µs).
const SpinWindow = 2 * time.Millisecond

// Until waits until the moment t on clk, or until ctx ends (it then
// returns ctx.Err()). A moment already past returns at once.
//
// On Real it sleeps until SpinWindow before t and then yields the
// processor in a loop until t, so that it returns within a few
// microseconds of t rather than whenever the scheduler wakes it; the cost
// is one busy core for at most SpinWindow. On any other clock (Fake) it
// waits on a timer of clk. A Skewed clock waits as its base does.
func Until(ctx context.Context, clk Clock, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s, ok := clk.(*skewed); ok {
		// A skewed clock waits as precisely as the clock under it.
		return Until(ctx, s.base, s.toBase(t))
	}
	d := t.Sub(clk.Now())
	if d <= 0 {
		return nil
	}
	_, real := clk.(realClock)
	if !real {
		return Sleep(ctx, clk, d)
	}
	if d > SpinWindow {
		tm := time.NewTimer(d - SpinWindow)
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-tm.C:
		}
	}
	for i := 0; time.Until(t) > 0; i++ {
		if i%64 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		runtime.Gosched()
	}
	return nil
}
