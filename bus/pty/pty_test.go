package pty_test

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/pty"
)

func open(t *testing.T) *pty.Pty {
	t.Helper()
	p, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestRawBothWays(t *testing.T) {
	p := open(t)
	if p.PathName() != p.SlavePath() || p.SlavePath() == "" {
		t.Fatalf("paths %q %q", p.PathName(), p.SlavePath())
	}
	host, err := os.OpenFile(p.SlavePath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	// Bytes a cooked terminal would translate, echo or act on.
	want := []byte{0x00, 0x0D, 0x0A, 0x03, 0x04, 0x11, 0x13, 0x7F, 0xFF, 0x1A, '\r', '\n'}
	if _, err := host.Write(want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	p.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(p, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("host->master (-got +want)\n%s", diff)
	}
	if _, err := p.Write(want); err != nil {
		t.Fatal(err)
	}
	host.SetReadDeadline(time.Now().Add(5 * time.Second))
	got2 := make([]byte, len(want))
	if _, err := io.ReadFull(host, got2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got2, want); diff != "" {
		t.Errorf("master->host (-got +want)\n%s", diff)
	}
}

// With no host attached (or after it leaves) the master's Read waits
// instead of failing, so a board survives a host reconnecting.
func TestNoHostReadBlocks(t *testing.T) {
	p := open(t)
	host, err := os.OpenFile(p.SlavePath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	host.Close()
	p.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err = p.Read(make([]byte, 4))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with no host: %v, want deadline exceeded", err)
	}
	host, err = os.OpenFile(p.SlavePath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	host.Write([]byte("hi"))
	p.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 2)
	if _, err := io.ReadFull(p, got); err != nil || string(got) != "hi" {
		t.Fatalf("after reconnect: %q %v", got, err)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	p := open(t)
	done := make(chan error, 1)
	go func() {
		_, err := p.Read(make([]byte, 4))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, pty.ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
