package lan

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// A gateway holds one event stream per LAN board for as long as the board
// is online, so a stream is kept lean. It does not go through an
// http.Transport, whose connections each cost two goroutines (a read loop
// and a write loop) besides the caller's, a read and a write buffer, and
// the request and its bookkeeping kept alive for the stream's life: the
// watcher's own goroutine dials, writes the request, reads the reply's
// head with http.ReadResponse and then reads the body straight from the
// connection through one small buffer. Closing the stream closes the
// connection, which ends a read in progress (the watcher's context ending
// or the stream going silent do that). Streams go straight to the board:
// a proxy from the environment is not used for them (boards are on the
// gateway's LAN).
const (
	// streamReadBuffer is the buffer the reply is read through: SSE
	// messages are short lines; a longer line takes more reads.
	streamReadBuffer = 512
	// scanBuffer is the initial line buffer of a stream; it grows up to
	// MaxReply for long messages.
	scanBuffer = 512
)

// openStream sends req (a GET of the event stream) on a connection of its
// own and returns the reply once its head has arrived, within StreamIdle
// (on the injected clock).
// The reply's Body closes the connection; nothing else holds it.
func (l *LAN) openStream(ctx context.Context, req *http.Request) (*http.Response, error) {
	u := req.URL
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil, err
	}
	if u.Scheme == "https" {
		tc := tls.Client(conn, l.tlsConfig(u.Hostname()))
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	s := &streamConn{conn: conn}
	s.stop = context.AfterFunc(ctx, s.close)
	var late atomic.Bool
	t := l.o.Clock.AfterFunc(l.o.StreamIdle, func() { late.Store(true); s.close() })
	defer t.Stop()
	fail := func(err error) (*http.Response, error) {
		s.Close()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case late.Load():
			return nil, fmt.Errorf("no reply in %v", l.o.StreamIdle)
		}
		return nil, err
	}
	var head bytes.Buffer
	if err := req.Write(&head); err != nil {
		return fail(err)
	}
	if _, err := conn.Write(head.Bytes()); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, streamReadBuffer), req)
	if err != nil {
		return fail(err)
	}
	if !t.Stop() {
		return fail(errors.New("late"))
	}
	s.body = resp.Body
	resp.Body, resp.Request = s, nil
	return resp, nil
}

// tlsConfig is the client's TLS settings (those of Options.Client's
// transport when it has some) for a board named host.
func (l *LAN) tlsConfig(host string) *tls.Config {
	var cfg *tls.Config
	if t, ok := l.o.Client.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	} else {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg
}

// streamConn is a stream's body over its connection. Close closes the
// connection rather than the body (which would read an endless stream to
// its end).
type streamConn struct {
	conn net.Conn
	body io.ReadCloser
	stop func() bool
	once sync.Once
}

func (s *streamConn) Read(p []byte) (int, error) { return s.body.Read(p) }

func (s *streamConn) Close() error {
	s.stop()
	s.close()
	return nil
}

func (s *streamConn) close() { s.once.Do(func() { s.conn.Close() }) }
