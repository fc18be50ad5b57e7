// Package clock is the time source every holofleet component takes as a
// dependency instead of calling the time package directly.
//
// Production code receives [Real]; tests receive a [*Fake] and move time
// forward with [Fake.Advance], so no test sleeps to wait for a timer. The
// package sits under bus/ because bus is the lowest layer of the module:
// the simulated line, the firmware and the gateway all import it.
package clock

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the subset of *time.Timer the project uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is the subset of *time.Ticker the project uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(d)}
}
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Fake is a manual clock for tests. Time only moves when Advance or Set is
// called; timers, tickers and AfterFunc callbacks due by then fire in order
// of their deadlines. Channels are buffered by one, as time's are.
//
// A test never sleeps to let the code under test react; it waits for a
// condition the fake clock can see:
//
//   - [Fake.BlockUntil] (or [Fake.WaitForWaiters]): until a goroutine has
//     armed its timer or ticker, i.e. it is waiting for time to pass and
//     has done everything it does before that. Call it before Advance, so
//     the timer exists when time moves, and after Advance to know a
//     goroutine woken by a timer's channel has finished its work and is
//     waiting again.
//   - [Fake.WaitCallbacks] (or [Fake.AdvanceWait]): until every AfterFunc
//     callback that Advance or Set started has returned, so the test can
//     assert what they did, or that they did nothing.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{}
	// running counts AfterFunc callbacks started and not returned; idle
	// is closed when it drops to zero.
	running int
	idle    chan struct{}
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t, changed: make(chan struct{})}
}

type fakeWaiter struct {
	clock    *Fake
	deadline time.Time
	period   time.Duration // >0 for tickers
	ch       chan time.Time
	fn       func()
	active   bool
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the fake time elapsed since t.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires once the fake time passes d from now.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(&fakeWaiter{ch: make(chan time.Time, 1)}, d)
}

// NewTicker returns a ticker with period d.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker period")
	}
	return tickerAdapter{f.add(&fakeWaiter{ch: make(chan time.Time, 1), period: d}, d)}
}

// AfterFunc calls fn in its own goroutine once the fake time passes d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.add(&fakeWaiter{fn: fn}, d)
}

func (f *Fake) add(w *fakeWaiter, d time.Duration) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.clock = f
	w.deadline = f.now.Add(d)
	w.active = true
	f.waiters = append(f.waiters, w)
	close(f.changed)
	f.changed = make(chan struct{})
	return w
}

// Waiters returns how many timers and tickers are pending. Tests use it
// with WaitForWaiters to know a goroutine has armed its timer.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.waiters {
		if w.active {
			n++
		}
	}
	return n
}

// WaitForWaiters blocks until at least n timers are pending or the
// timeout (in real time) passes; it reports whether n was reached.
func (f *Fake) WaitForWaiters(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		cnt := 0
		for _, w := range f.waiters {
			if w.active {
				cnt++
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if cnt >= n {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-ch:
		case <-time.After(left):
		}
	}
}

// BlockUntil waits until exactly n timers and tickers are pending
// (armed, not fired or stopped), or until ctx ends (it then returns
// ctx.Err()). Exactly, not at least: after an Advance that fired a timer
// whose goroutine arms the next one, the count drops and comes back, and
// BlockUntil(n) returns once the goroutine has re-armed, that is once it
// has done its work for the tick.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		cnt := f.pending()
		ch := f.changed
		f.mu.Unlock()
		if cnt == n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("clock: %d timers pending, waited for %d: %w", cnt, n, ctx.Err())
		}
	}
}

// WaitCallbacks waits until every AfterFunc callback that Advance or Set
// started has returned, including callbacks started meanwhile, or until
// ctx ends (it then returns ctx.Err()). With none running it returns at
// once.
func (f *Fake) WaitCallbacks(ctx context.Context) error {
	for {
		f.mu.Lock()
		if f.running == 0 {
			f.mu.Unlock()
			return nil
		}
		idle := f.idle
		n := f.running
		f.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("clock: %d AfterFunc callbacks still running: %w", n, ctx.Err())
		}
	}
}

// AdvanceWait is Advance followed by WaitCallbacks: when it returns, the
// AfterFunc callbacks that fell due have run to their end.
func (f *Fake) AdvanceWait(ctx context.Context, d time.Duration) error {
	f.Advance(d)
	return f.WaitCallbacks(ctx)
}

// Run makes the fake time flow: it moves forward by step every 5 ms of
// real time until stop is called (stop returns once it has). For tests
// whose subject must see time pass across a span (a window opening, a
// board's retries) rather than jump over it.
func (f *Fake) Run(step time.Duration) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				f.Advance(step)
			}
		}
	}()
	return func() { close(done); <-ended }
}

// Advance moves the fake time forward by d, firing what falls due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the fake time to t (never backwards), firing what falls due.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		var due []*fakeWaiter
		for _, w := range f.waiters {
			if w.active && !w.deadline.After(t) {
				due = append(due, w)
			}
		}
		if len(due) == 0 {
			if t.After(f.now) {
				f.now = t
			}
			f.prune()
			f.mu.Unlock()
			return
		}
		sort.SliceStable(due, func(i, j int) bool { return due[i].deadline.Before(due[j].deadline) })
		w := due[0]
		if w.deadline.After(f.now) {
			f.now = w.deadline
		}
		now := f.now
		if w.period > 0 {
			w.deadline = w.deadline.Add(w.period)
		} else {
			w.active = false
		}
		if w.fn != nil {
			if f.running == 0 {
				f.idle = make(chan struct{})
			}
			f.running++
		}
		// Waiters changed (one fired): BlockUntil looks again.
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		if w.fn != nil {
			go f.call(w.fn)
		} else {
			select {
			case w.ch <- now:
			default:
			}
		}
	}
}

// call runs an AfterFunc callback and counts it out for WaitCallbacks.
func (f *Fake) call(fn func()) {
	defer func() {
		f.mu.Lock()
		f.running--
		if f.running == 0 {
			close(f.idle)
		}
		f.mu.Unlock()
	}()
	fn()
}

// pending counts the armed waiters; f.mu is held.
func (f *Fake) pending() int {
	n := 0
	for _, w := range f.waiters {
		if w.active {
			n++
		}
	}
	return n
}

func (f *Fake) prune() {
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.active {
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(f.waiters); i++ {
		f.waiters[i] = nil
	}
	f.waiters = kept
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }

func (w *fakeWaiter) Stop() bool {
	f := w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := w.active
	w.active = false
	if was {
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return was
}

func (w *fakeWaiter) Reset(d time.Duration) bool {
	f := w.clock
	f.mu.Lock()
	was := w.active
	w.active = true
	w.deadline = f.now.Add(d)
	if w.period > 0 {
		w.period = d
	}
	found := false
	for _, x := range f.waiters {
		if x == w {
			found = true
			break
		}
	}
	if !found {
		f.waiters = append(f.waiters, w)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return was
}

// tickerAdapter gives a fake waiter the Ticker method set.
type tickerAdapter struct{ w *fakeWaiter }

func (t tickerAdapter) C() <-chan time.Time   { return t.w.ch }
func (t tickerAdapter) Stop()                 { t.w.Stop() }
func (t tickerAdapter) Reset(d time.Duration) { t.w.Reset(d) }
