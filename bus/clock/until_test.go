package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestUntilReal: on the real clock Until never returns before its
// moment, and not late by a broken path. How close to the moment it
// returns (a few µs on a quiet machine) is BenchmarkUntilReal's figure,
// in make bench: a machine shared with CPU hogs preempts the spinning
// thread for whole time slices, so the test bounds only the median, at
// untilBound.
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
	if med := lates[len(lates)/2]; med > untilBound {
		t.Errorf("Until returned a median %v after its moment (all: %v)", med, lates)
	}
}

// untilBound is ten times what a loaded two-core machine shows on the
// median (a time slice or two, a few ms; single waits 140 ms beside
// stress-ng): it catches an Until that waits out a wrong duration (the
// lead again, a spin that never ends), not a missing spin, which only
// BenchmarkUntilReal's median shows.
const untilBound = 50 * time.Millisecond

// BenchmarkUntilReal measures how late Until returns on the real clock
// for moments 0 to 5 ms ahead: the median and the worst, in µs.
func BenchmarkUntilReal(b *testing.B) {
	ctx := context.Background()
	lates := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		at := time.Now().Add(time.Duration(i%6) * time.Millisecond)
		if err := Until(ctx, Real, at); err != nil {
			b.Fatal(err)
		}
		lates = append(lates, time.Since(at))
	}
	slices.Sort(lates)
	b.ReportMetric(float64(lates[len(lates)/2])/float64(time.Microsecond), "median-late-µs")
	b.ReportMetric(float64(lates[len(lates)-1])/float64(time.Microsecond), "max-late-µs")
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
