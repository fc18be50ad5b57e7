package clock

import (
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
