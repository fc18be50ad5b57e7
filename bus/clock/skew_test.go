package clock

import (
	"context"
	"testing"
	"time"
)

// TestSkewed: a clock 50 ppm fast reads 50 µs more per second of its base,
// and its timers last their duration on it, not on the base.
func TestSkewed(t *testing.T) {
	for _, ppm := range []float64{50, -50, 0.5, -1000} {
		base := NewFake(time.Unix(1_700_000_000, 0))
		c := Skewed(base, ppm)
		t0 := c.Now()
		if !t0.Equal(base.Now()) {
			t.Fatalf("%v ppm: starts at %v, base %v", ppm, t0, base.Now())
		}
		base.Advance(10 * time.Second)
		want := 10*time.Second + time.Duration(ppm*10*1e3)
		if got := c.Since(t0); got != want {
			t.Errorf("%v ppm: after 10 s of base read %v, want %v", ppm, got, want)
		}
		// A timer of 1 s on the skewed clock fires when the skewed clock has
		// run 1 s.
		tm := c.NewTimer(time.Second)
		start := c.Now()
		onBase := time.Duration(float64(time.Second) / (1 + ppm/1e6))
		base.Advance(onBase - time.Microsecond)
		select {
		case <-tm.C():
			t.Fatalf("%v ppm: timer fired early at %v", ppm, c.Since(start))
		default:
		}
		base.Advance(2 * time.Microsecond)
		select {
		case <-tm.C():
		default:
			t.Fatalf("%v ppm: timer did not fire at %v", ppm, c.Since(start))
		}
		if d := c.Since(start) - time.Second; d < -2*time.Microsecond || d > 2*time.Microsecond {
			t.Errorf("%v ppm: fired %v off", ppm, d)
		}
	}
	if Skewed(Real, 0) != Real {
		t.Error("0 ppm is not the base clock")
	}
}

func TestSkewedBounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("1001 ppm did not panic")
		}
	}()
	Skewed(Real, 1001)
}

// TestSkewedUntil: Until on a skewed real clock returns at the skewed
// moment, precisely (it spins on the base).
func TestSkewedUntil(t *testing.T) {
	c := Skewed(Real, 500)
	at := c.Now().Add(20 * time.Millisecond)
	if err := Until(context.Background(), c, at); err != nil {
		t.Fatal(err)
	}
	if d := c.Now().Sub(at); d < 0 || d > time.Second {
		t.Errorf("returned %v after the moment", d)
	}
}
