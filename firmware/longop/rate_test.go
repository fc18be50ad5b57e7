package longop

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// entered tells of every Read that reached the pipe: by then the
// watched stream has armed its watchdog.
type entered struct {
	r  io.Reader
	in chan struct{}
}

func (e entered) Read(p []byte) (int, error) {
	e.in <- struct{}{}
	return e.r.Read(p)
}

// watchPipe is a watched pipe whose reads tell when they wait.
func watchPipe(l *Lock, n int64) (io.Reader, *io.PipeWriter, chan struct{}) {
	pr, pw := io.Pipe()
	in := make(chan struct{}, 1)
	return l.WatchN(entered{pr, in}, "x", n, func() { pr.CloseWithError(errors.New("aborted")) }), pw, in
}

// trickle feeds r one chunk of size bytes every gap of the fake clock
// until the reader fails; it returns the reader's error and the bytes it
// read. Each step waits for the read to wait on the pipe first (its
// watchdog armed), so no step depends on goroutine timing.
func trickle(t *testing.T, clk *clock.Fake, pw *io.PipeWriter, in chan struct{}, r io.Reader, size int, gap time.Duration, steps int) (error, int) {
	t.Helper()
	done := make(chan error, 1)
	var total int
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := r.Read(buf)
			total += n
			if err != nil {
				done <- err
				return
			}
		}
	}()
	chunk := make([]byte, size)
	for i := 0; i < steps; i++ {
		select {
		case <-in:
		case err := <-done:
			return err, total
		case <-time.After(10 * time.Second):
			t.Fatalf("step %d: no read waits", i)
		}
		clk.Advance(gap)
		if _, err := pw.Write(chunk); err != nil {
			return <-done, total
		}
	}
	pw.CloseWithError(io.ErrUnexpectedEOF)
	return <-done, total
}

// TestTrickleIsCut is the attack of issue 25 row 12: one byte every 20 s
// never trips the 30 s idle cut, but is far below the minimum rate, so
// the stream is cut at the end of its first rate window and the lock is
// given back by its holder.
func TestTrickleIsCut(t *testing.T) {
	clk := clock.NewFake(t0)
	cuts := make(chan Cut, 1)
	l := &Lock{Clock: clk, OnCut: func(c Cut) { cuts <- c }}
	release, err := l.TryAcquire("uploading /a.bin")
	if err != nil {
		t.Fatal(err)
	}
	r, pw, in := watchPipe(l, 1<<20)
	err, n := trickle(t, clk, pw, in, r, 1, 20*time.Second, 100)
	if !errors.Is(err, ErrTooSlow) || !errors.Is(err, ErrStalled) {
		t.Fatalf("the trickle ended with %v, want ErrTooSlow", err)
	}
	if n != 2 {
		t.Errorf("cut after %d bytes, want 2 (40 s of waiting)", n)
	}
	release() // what every caller does on a failed read
	if _, err := l.TryAcquire("sha256"); err != nil {
		t.Errorf("lock after the cut: %v", err)
	}
	c := <-cuts
	if c.Reason != ReasonTooSlow || c.Bytes != 2 || c.Idle != 40*time.Second || !c.At.Equal(t0.Add(40*time.Second)) {
		t.Errorf("cut %+v", c)
	}
}

// TestRateAndDeadline is the table of cuts: which streams are cut, why,
// and which legitimate ones are not.
func TestRateAndDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lock  *Lock
		n     int64 // declared length
		size  int   // bytes a step
		gap   time.Duration
		steps int
		want  error // nil: read to the end
		why   string
	}{
		{"trickle 1 B / 20 s", &Lock{}, 1 << 20, 1, 20 * time.Second, 50, ErrTooSlow, ReasonTooSlow},
		{"trickle, unknown length", &Lock{}, -1, 1, 20 * time.Second, 50, ErrTooSlow, ReasonTooSlow},
		{"just under the rate", &Lock{MinRate: 1000, RateWindow: 10 * time.Second}, -1, 999, time.Second, 30, ErrTooSlow, ReasonTooSlow},
		{"at the rate", &Lock{MinRate: 1000, RateWindow: 10 * time.Second}, -1, 1000, time.Second, 30, nil, ""},
		{"slow Wi-Fi, 4 KiB/s", &Lock{}, 1 << 20, 4096, time.Second, 200, nil, ""},
		{"rate check off", &Lock{MinRate: -1}, -1, 1, 20 * time.Second, 10, nil, ""},
		{"stall", &Lock{Idle: 5 * time.Second}, 1 << 20, 1, 6 * time.Second, 10, ErrStalled, ReasonStalled},
		// 10 s + 2*5000/1000 s = 20 s; 1000 B/s keeps the rate, but the
		// 30 000 bytes sent are six times what was declared.
		{"past the deadline", &Lock{MinRate: 1000, DeadlineBase: 10 * time.Second}, 5000, 1000, time.Second, 30, ErrDeadline, ReasonDeadline},
		{"within the deadline", &Lock{MinRate: 1000, DeadlineBase: 10 * time.Second}, 5000, 1000, time.Second, 19, nil, ""},
		{"deadline off", &Lock{MinRate: 1000, DeadlineBase: -1}, 5000, 1000, time.Second, 30, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			l := tc.lock
			l.Clock = clk
			r, pw, in := watchPipe(l, tc.n)
			err, _ := trickle(t, clk, pw, in, r, tc.size, tc.gap, tc.steps)
			if tc.want == nil {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("cut: %v", err)
				}
				if l.LastCut() != nil {
					t.Errorf("cut recorded: %+v", l.LastCut())
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if c := l.LastCut(); c == nil || c.Reason != tc.why {
				t.Errorf("cut %+v, want reason %q", c, tc.why)
			}
		})
	}
}

// TestDeadlineCutsAPendingWrite: a download to a client that takes bytes
// just fast enough is still cut at its deadline, mid-write.
func TestDeadlineCutsAPendingWrite(t *testing.T) {
	clk := clock.NewFake(t0)
	l := &Lock{Clock: clk, Idle: time.Hour, MinRate: -1, DeadlineBase: time.Minute}
	pr, pw := io.Pipe()
	w := l.WatchWriterN(pw, "downloading /a.mov", 0, func() { pw.CloseWithError(errors.New("aborted")) })
	got := make(chan error, 1)
	go func() { _, err := w.Write([]byte("abc")); got <- err }()
	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the write never armed its watchdog")
	}
	clk.Advance(time.Minute)
	if err := <-got; !errors.Is(err, ErrDeadline) {
		t.Fatalf("write past the deadline: %v", err)
	}
	_ = pr.Close()
	if c := l.LastCut(); c == nil || c.Reason != ReasonDeadline || c.Idle != time.Minute {
		t.Errorf("cut %+v", c)
	}
}

func TestDeadlineScales(t *testing.T) {
	for _, tc := range []struct {
		lock *Lock
		n    int64
		want time.Duration
	}{
		{&Lock{}, -1, 0},
		{&Lock{}, 0, DefaultDeadlineBase},
		{&Lock{}, 2 << 20, DefaultDeadlineBase + 4096*time.Second},
		{&Lock{MinRate: 1000, DeadlineBase: time.Second}, 500, 2 * time.Second},
		{&Lock{DeadlineBase: -1}, 1 << 20, 0},
	} {
		if got := tc.lock.Deadline(tc.n); got != tc.want {
			t.Errorf("%+v.Deadline(%d) = %s, want %s", tc.lock.DeadlineBase, tc.n, got, tc.want)
		}
	}
	var nilLock *Lock
	if got := nilLock.Deadline(0); got != DefaultDeadlineBase {
		t.Errorf("nil lock: %s", got)
	}
}
