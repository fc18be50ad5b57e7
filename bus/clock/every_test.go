package clock

import (
	"context"
	"testing"
	"time"
)

// TestEvery: the job runs at once, again at each period of the fake
// clock (not between), and Every returns when ctx ends, its ticker
// stopped.
func TestEvery(t *testing.T) {
	ctx := context.Background()
	f := NewFake(time.Unix(1000, 0))
	runs := make(chan struct{}, 8)
	jctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(jctx, f, time.Second, func() { runs <- struct{}{} })
	}()
	<-runs // at once
	for range 3 {
		if err := f.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.Advance(time.Second - time.Nanosecond)
		select {
		case <-runs:
			t.Fatal("the job ran before its period passed")
		default:
		}
		f.Advance(time.Nanosecond)
		<-runs
	}
	cancel()
	<-done
	if n := f.Waiters(); n != 0 {
		t.Fatalf("%d tickers left armed", n)
	}
}
