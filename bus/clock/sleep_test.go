package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSleep: Sleep returns nil once the fake time passes d (not before),
// and ctx.Err() when ctx ends first, leaving no timer armed.
func TestSleep(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		d      time.Duration
		cancel bool
		want   error
	}{
		{"elapsed", 3 * time.Second, false, nil},
		{"zero waits for the clock to move", 0, false, nil},
		{"cancelled", time.Hour, true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(time.Unix(1000, 0))
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Sleep(sctx, f, tc.d) }()
			if err := f.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if tc.cancel {
				cancel()
			} else {
				if tc.d > 0 {
					f.Advance(tc.d - time.Nanosecond)
					select {
					case err := <-done:
						t.Fatalf("Sleep returned %v before d passed", err)
					default:
					}
				}
				f.Advance(time.Nanosecond)
			}
			if err := <-done; !errors.Is(err, tc.want) && err != tc.want {
				t.Fatalf("Sleep = %v, want %v", err, tc.want)
			}
			if n := f.Waiters(); n != 0 {
				t.Fatalf("%d timers left armed", n)
			}
		})
	}
}
