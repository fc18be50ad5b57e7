package defaults_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
)

func TestClock(t *testing.T) {
	if got := defaults.Clock(nil); got != clock.Real {
		t.Errorf("Clock(nil) = %v, want clock.Real", got)
	}
	fake := clock.NewFake(time.Unix(0, 0))
	if got := defaults.Clock(fake); got != fake {
		t.Errorf("Clock(fake) = %v, want the fake", got)
	}
}

func TestLog(t *testing.T) {
	l := defaults.Log(nil)
	if l == nil {
		t.Fatal("Log(nil) = nil, want a logger")
	}
	if l.Enabled(t.Context(), slog.LevelError) {
		t.Error("Log(nil) logs errors, want a logger that discards every record")
	}
	l.Error("dropped") // must not panic
	given := slog.New(slog.DiscardHandler)
	if got := defaults.Log(given); got != given {
		t.Error("Log(l) is not l")
	}
}

func TestPositive(t *testing.T) {
	for _, tc := range []struct {
		v, def, want time.Duration
	}{
		{0, time.Second, time.Second},
		{-1, time.Second, time.Second},
		{time.Millisecond, time.Second, time.Millisecond},
	} {
		if got := defaults.Positive(tc.v, tc.def); got != tc.want {
			t.Errorf("Positive(%v, %v) = %v, want %v", tc.v, tc.def, got, tc.want)
		}
	}
	if got := defaults.Positive(0.0, 2.5); got != 2.5 {
		t.Errorf("Positive(0.0, 2.5) = %v, want 2.5", got)
	}
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		v, def, want int
	}{
		{0, 20, 20},  // unset: the default
		{-1, 20, 0},  // negative: none
		{-50, 20, 0}, // any negative
		{7, 20, 7},   // as given
	} {
		if got := defaults.Limit(tc.v, tc.def); got != tc.want {
			t.Errorf("Limit(%d, %d) = %d, want %d", tc.v, tc.def, got, tc.want)
		}
	}
	if got := defaults.Limit(-0.5, 20.0); got != 0 {
		t.Errorf("Limit(-0.5, 20) = %v, want 0", got)
	}
}

func TestPositives(t *testing.T) {
	a, b, c := 0, -3, 7
	defaults.Positives(map[*int]int{&a: 1, &b: 2, &c: 3})
	if a != 1 || b != 2 || c != 7 {
		t.Errorf("Positives: a, b, c = %d, %d, %d, want 1, 2, 7", a, b, c)
	}
}
