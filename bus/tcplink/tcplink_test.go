package tcplink_test

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/tcplink"
)

func listen(t *testing.T) *tcplink.Server {
	t.Helper()
	s, err := tcplink.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, s *tcplink.Server) net.Conn {
	t.Helper()
	c, err := tcplink.Dial(context.Background(), s.PathName())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, b); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read timed out")
	}
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestRoundTrip(t *testing.T) {
	s := listen(t)
	c := dial(t, s)
	req := []byte{0x00, 0x03, 0x01, 0x00, 0x01, 0xAA, 0x00, '@', '1', '\n'}
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readN(t, s, len(req)), req); diff != "" {
		t.Errorf("host->board (-got +want)\n%s", diff)
	}
	rep := []byte("@1 200 {}\n")
	if _, err := s.Write(rep); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(readN(t, c, len(rep)), rep); diff != "" {
		t.Errorf("board->host (-got +want)\n%s", diff)
	}
}

func TestSecondClientTakesOver(t *testing.T) {
	s := listen(t)
	first := dial(t, s)
	waitFor(t, "first client", func() bool { return s.Stats().Connected })
	second := dial(t, s)
	waitFor(t, "replace count", func() bool { return s.Stats().Replaced == 1 })
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := first.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("first client read = %d, %v; want EOF", n, err)
	}
	// The second client is the wire now.
	second.Write([]byte("ok"))
	if got := readN(t, s, 2); string(got) != "ok" {
		t.Fatalf("got %q", got)
	}
}

func TestReconnect(t *testing.T) {
	s := listen(t)
	// The board reads before any client exists: the read waits.
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 5)
		io.ReadFull(s, b)
		got <- b
	}()
	// Nobody attached: writes are discarded, not errors.
	if n, err := s.Write([]byte("lost")); n != 4 || err != nil {
		t.Fatalf("Write with no client = %d, %v", n, err)
	}
	for i := range 3 {
		c, err := tcplink.Dial(context.Background(), s.PathName())
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "client attached", func() bool { return s.Stats().Connected })
		if i == 2 {
			c.Write([]byte("hello"))
			select {
			case b := <-got:
				if string(b) != "hello" {
					t.Fatalf("got %q", b)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("read across reconnects timed out")
			}
			s.Write([]byte("back"))
			if b := readN(t, c, 4); string(b) != "back" {
				t.Fatalf("reply %q", b)
			}
		}
		c.Close()
		waitFor(t, "client detached", func() bool { return !s.Stats().Connected })
	}
	st := s.Stats()
	if st.Accepted != 3 || st.Replaced != 0 || st.Discarded < 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestCloseUnblocksAndStops(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := tcplink.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tcplink.Dial(context.Background(), s.PathName())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "client", func() bool { return s.Stats().Connected })
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		done <- err
	}()
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, tcplink.ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if _, err := s.Write([]byte{1}); !errors.Is(err, tcplink.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	// The client sees the wire go away.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client after server Close: %v", err)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestErrors(t *testing.T) {
	if _, err := tcplink.Listen(context.Background(), "256.0.0.1:0"); !errors.Is(err, tcplink.ErrListen) {
		t.Errorf("Listen bad addr: %v", err)
	}
	s := listen(t)
	addr := s.PathName()
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := tcplink.Dial(ctx, addr); !errors.Is(err, tcplink.ErrDial) {
		t.Errorf("Dial closed port: %v", err)
	}
}
