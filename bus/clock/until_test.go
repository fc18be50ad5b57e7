package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestUntilReal: on the real clock Until returns at the moment, not a
// scheduler's wake-up later. A shared machine may preempt any single wait,
// so the median of many is held to a bound far under a millisecond.
func TestUntilReal(t *testing.T) {
	ctx := context.Background()
	var lates []time.Duration
	for i := range 40 {
		lead := []time.Duration{0, 300 * time.Microsecond, 3 * time.Millisecond, 5 * time.Millisecond}[i%4]
		at := time.Now().Add(lead)
		if err := Until(ctx, Real, at); err != nil {
			t.Fatal(err)
		}
		late := time.Since(at)
		if late < 0 {
			t.Fatalf("lead %v: returned %v early", lead, -late)
		}
		lates = append(lates, late)
	}
	slices.Sort(lates)
	if med := lates[len(lates)/2]; med > 200*time.Microsecond {
		t.Errorf("Until returned a median %v after its moment (all: %v)", med, lates)
	}
}

func TestUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	start := time.Now()
	if err := Until(ctx, Real, start.Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want canceled", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("cancel did not end the wait")
	}
}

func TestUntilFake(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	done := make(chan error, 1)
	go func() { done <- Until(context.Background(), f, time.Unix(101, 0)) }()
	if !f.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("Until armed no timer")
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("returned early")
	case <-time.After(10 * time.Millisecond):
	}
	f.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A moment already past returns at once, without a timer.
	if err := Until(context.Background(), f, time.Unix(50, 0)); err != nil {
		t.Fatal(err)
	}
}
