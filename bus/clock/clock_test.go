package clock

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestFakeTimerFiresOnAdvance(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	tm := f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case got := <-tm.C():
		if !got.Equal(start.Add(time.Second)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("timer did not fire")
	}
	if tm.Stop() {
		t.Fatal("Stop on a fired timer reported active")
	}
}

func TestFakeTickerAndAfterFunc(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tk := f.NewTicker(100 * time.Millisecond)
	var calls atomic.Int32
	done := make(chan struct{})
	f.AfterFunc(250*time.Millisecond, func() { calls.Add(1); close(done) })
	ticks := 0
	for i := 0; i < 3; i++ {
		f.Advance(100 * time.Millisecond)
		select {
		case <-tk.C():
			ticks++
		default:
		}
	}
	<-done
	if ticks != 3 || calls.Load() != 1 {
		t.Fatalf("ticks=%d calls=%d", ticks, calls.Load())
	}
	tk.Stop()
	if n := f.Waiters(); n != 0 {
		t.Fatalf("waiters left: %d", n)
	}
}

func TestWaitForWaiters(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	go func() { <-f.NewTimer(time.Minute).C() }()
	if !f.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("timer never armed")
	}
	f.Advance(time.Minute)
}

// TestBlockUntil: a goroutine that records each tick and then arms its
// next timer; after each Advance, BlockUntil(1) returns once it has
// re-armed, so what it recorded is settled without a sleep.
func TestBlockUntil(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ticks atomic.Int32
	go func() {
		for {
			<-f.NewTimer(time.Second).C()
			ticks.Add(1)
		}
	}()
	for i := int32(1); i <= 5; i++ {
		if err := f.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.Advance(time.Second)
		if err := f.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := ticks.Load(); got != i {
			t.Fatalf("after %d advances: %d ticks", i, got)
		}
	}
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if err := f.BlockUntil(short, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("BlockUntil(2) with one timer: %v", err)
	}
}

// TestBlockUntilStop: stopping a timer counts as a change.
func TestBlockUntilStop(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Minute)
	done := make(chan error, 1)
	go func() { done <- f.BlockUntil(context.Background(), 0) }()
	tm.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWaitCallbacks: WaitCallbacks returns once every AfterFunc callback
// Advance started has returned, and not before.
func TestWaitCallbacks(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx := context.Background()
	if err := f.WaitCallbacks(ctx); err != nil {
		t.Fatalf("nothing running: %v", err)
	}
	release := make(chan struct{})
	var done atomic.Int32
	f.AfterFunc(time.Second, func() { <-release; done.Add(1) })
	f.AfterFunc(2*time.Second, func() { done.Add(1) })
	f.AfterFunc(time.Hour, func() { done.Add(1) })
	f.Advance(2 * time.Second)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := f.WaitCallbacks(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a callback still blocked, WaitCallbacks: %v", err)
	}
	close(release)
	if err := f.WaitCallbacks(ctx); err != nil {
		t.Fatal(err)
	}
	if got := done.Load(); got != 2 {
		t.Fatalf("%d callbacks done, want 2", got)
	}
	// AdvanceWait: the callback has run when it returns; one not due has not.
	f.AfterFunc(time.Minute, func() { done.Add(10) })
	if err := f.AdvanceWait(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := done.Load(); got != 12 {
		t.Fatalf("after AdvanceWait: %d, want 12", got)
	}
}

// TestFakeRun: Run makes the fake time flow until stop, which returns
// once it no longer moves.
func TestFakeRun(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	timer := f.NewTimer(3 * time.Second)
	stop := f.Run(time.Second)
	select {
	case <-timer.C():
	case <-time.After(10 * time.Second): // a generous bound: the time did not flow
		t.Fatal("a 3 s timer did not fire while the fake time ran")
	}
	stop()
	at := f.Now()
	if at.Before(start.Add(3 * time.Second)) {
		t.Fatalf("the time is %v after the timer fired", at.Sub(start))
	}
	for range 3 {
		runtime.Gosched()
	}
	if !f.Now().Equal(at) {
		t.Fatalf("the time moved after stop: %v then %v", at, f.Now())
	}
}
