package board

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// startBoard runs a bare board (no features) on loopback.
func startBoard(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.DataDir = t.TempDir()
	ready := make(chan struct{})
	cfg.OnReady = func(net.Addr) { close(ready) }
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("board stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("board did not start")
	}
	return ln.Addr().String()
}

// closedByServer waits (bounded) for the server to close conn.
func closedByServer(t *testing.T, conn net.Conn, r io.Reader, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the board kept the connection open", what)
	}
}

// TestHTTPTimeouts: the board's HTTP server drops a client that sends its
// headers too slowly and a keep-alive connection left idle (issue 25 row
// 12: sockets are scarce on a board). Short timeouts here; the defaults
// are HTTPHeaderTimeout and HTTPIdleTimeout.
func TestHTTPTimeouts(t *testing.T) {
	addr := startBoard(t, Config{HeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "GET /api/v1/info HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	closedByServer(t, slow, slow, "headers never ending")

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /api/v1/info HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the board closed after one request; nothing to test")
	}
	closedByServer(t, idle, br, "idle keep-alive")
}

func TestHTTPServerDefaults(t *testing.T) {
	srv := NewHTTPServer(http.NotFoundHandler(), 0, 0)
	if srv.ReadHeaderTimeout != HTTPHeaderTimeout || srv.IdleTimeout != HTTPIdleTimeout || srv.ReadTimeout != 0 {
		t.Errorf("server timeouts: header %s idle %s read %s", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.ReadTimeout)
	}
}
