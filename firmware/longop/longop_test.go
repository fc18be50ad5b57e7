package longop

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

func TestOneAtATime(t *testing.T) {
	var l Lock
	rel, err := l.TryAcquire("file upload")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire("sha256"); !errors.Is(err, api.ErrBusy) {
		t.Fatalf("second acquire: %v, want busy", err)
	}
	if l.Holder() != "file upload" {
		t.Fatalf("holder %q", l.Holder())
	}
	rel()
	rel()
	rel2, err := l.TryAcquire("sha256")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	rel2()
	if l.Holder() != "" {
		t.Fatal("holder after release")
	}
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// TestWatchCutsAStalledReader: a read that waits Idle is aborted and
// fails with ErrStalled, as does every later one; the cut is reported
// with the bytes that came before. Time between reads does not count.
func TestWatchCutsAStalledReader(t *testing.T) {
	clk := clock.NewFake(t0)
	cuts := make(chan Cut, 1)
	l := &Lock{Idle: 5 * time.Second, Clock: clk, OnCut: func(c Cut) { cuts <- c }}
	pr, pw := io.Pipe()
	r := l.Watch(pr, "uploading /a.mov", func() { pr.CloseWithError(errors.New("aborted")) })
	go func() { _, _ = pw.Write([]byte("0123456789")) }()
	buf := make([]byte, 64)
	if n, err := r.Read(buf); n != 10 || err != nil {
		t.Fatalf("first read: %d %v", n, err)
	}
	clk.Advance(time.Hour) // the board busy between reads: not a stall
	got := make(chan error, 1)
	go func() {
		_, err := r.Read(buf)
		got <- err
	}()
	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the read never armed its watchdog")
	}
	clk.Advance(5*time.Second - time.Nanosecond)
	select {
	case err := <-got:
		t.Fatalf("cut early: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Nanosecond)
	select {
	case err := <-got:
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("stalled read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled read was not cut")
	}
	c := <-cuts
	want := Cut{What: "uploading /a.mov", Bytes: 10, Idle: 5 * time.Second, Reason: ReasonStalled, At: t0.Add(time.Hour + 5*time.Second)}
	if c != want || *l.LastCut() != want {
		t.Errorf("cut %+v, last %+v, want %+v", c, l.LastCut(), want)
	}
	if _, err := r.Read(buf); !errors.Is(err, ErrStalled) {
		t.Errorf("read after the cut: %v", err)
	}
	if clk.Waiters() != 0 {
		t.Errorf("%d timers left", clk.Waiters())
	}
}

// TestWatchWriter cuts a write to a client that stopped taking bytes.
func TestWatchWriter(t *testing.T) {
	clk := clock.NewFake(t0)
	var l Lock
	l.Clock = clk
	pr, pw := io.Pipe()
	w := l.WatchWriter(pw, "downloading /a.mov", func() { pw.CloseWithError(errors.New("aborted")) })
	go func() { _, _ = io.ReadFull(pr, make([]byte, 3)) }()
	if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := w.Write([]byte("def"))
		got <- err
	}()
	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the write never armed its watchdog")
	}
	clk.Advance(DefaultIdle)
	if err := <-got; !errors.Is(err, ErrStalled) {
		t.Fatalf("stalled write: %v", err)
	}
	if c := l.LastCut(); c == nil || c.Bytes != 3 || c.Idle != DefaultIdle {
		t.Errorf("cut %+v", c)
	}
}

// TestWatchNilLock: a nil lock watches with the defaults and real time.
func TestWatchNilLock(t *testing.T) {
	var l *Lock
	r := l.Watch(strings.NewReader("abc"), "x", nil)
	if b, err := io.ReadAll(r); string(b) != "abc" || err != nil {
		t.Fatalf("%q %v", b, err)
	}
}
