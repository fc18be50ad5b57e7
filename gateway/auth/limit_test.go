package auth

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func TestRateLimiter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := NewRateLimiter(2, 3, func() time.Time { return now })
	for i := range 3 {
		if err := l.Allow("a"); err != nil {
			t.Fatalf("burst request %d: %v", i, err)
		}
	}
	err := l.Allow("a")
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimited) {
		t.Fatalf("past the burst: %v", err)
	}
	if le.RetryAfter != 500*time.Millisecond {
		t.Errorf("retry after %v, want 500ms (2/s)", le.RetryAfter)
	}
	if err := l.Allow("b"); err != nil {
		t.Errorf("another key is limited: %v", err)
	}
	now = now.Add(500 * time.Millisecond)
	if err := l.Allow("a"); err != nil {
		t.Errorf("after the wait: %v", err)
	}
	if err := l.Allow("a"); err == nil {
		t.Error("a second request within the wait is allowed")
	}
	now = now.Add(time.Hour)
	for i := range 3 {
		if err := l.Allow("a"); err != nil {
			t.Fatalf("refilled burst %d: %v", i, err)
		}
	}
	if err := NewRateLimiter(0, 0, nil).Allow("x"); err != nil {
		t.Errorf("rate 0 limits: %v", err)
	}
	var nilL *RateLimiter
	if err := nilL.Allow("x"); err != nil {
		t.Errorf("nil limiter limits: %v", err)
	}
}

func TestRateLimiterForgetsIdleKeys(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := NewRateLimiter(10, 1, func() time.Time { return now })
	for i := range maxBuckets {
		_ = l.Allow(string(rune('a'+i%26)) + time.Duration(i).String())
	}
	now = now.Add(time.Second)
	_ = l.Allow("late")
	if n := len(l.buckets); n > 2 {
		t.Errorf("%d buckets kept after every key refilled", n)
	}
}

func TestStreamLimiter(t *testing.T) {
	l := NewStreamLimiter(2, 3)
	r1, err := l.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := l.Acquire("a"); !errors.As(err, &le) || le.RetryAfter != StreamRetry {
		t.Fatalf("third stream of a: %v", err)
	}
	r3, err := l.Acquire("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("c"); !errors.Is(err, ErrLimited) {
		t.Fatalf("fourth stream in all: %v", err)
	}
	r1()
	r1() // twice is harmless
	if n, all := l.Open("a"); n != 1 || all != 2 {
		t.Errorf("open %d/%d after one release", n, all)
	}
	if _, err := l.Acquire("c"); err != nil {
		t.Errorf("after a release: %v", err)
	}
	r2()
	r3()
	var wg sync.WaitGroup
	big := NewStreamLimiter(0, 0)
	for range 50 {
		wg.Go(func() {
			rel, err := big.Acquire("x")
			if err != nil {
				t.Error(err)
			}
			rel()
		})
	}
	wg.Wait()
	if n, all := big.Open("x"); n != 0 || all != 0 {
		t.Errorf("open %d/%d after every release", n, all)
	}
}
