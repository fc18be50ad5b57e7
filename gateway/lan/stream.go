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
	"net/url"
	"sync"
	"sync/atomic"
)

// A gateway holds one event stream per LAN board for as long as the board
// is online, and measures every board's clock over and over, so both run
// on connections of the driver's own (boardConn) rather than through
// Options.Client's http.Transport, whose connections each cost two
// goroutines (a read loop and a write loop) besides the caller's, a read
// and a write buffer, and for a stream the request and its bookkeeping
// kept alive for the stream's life. The caller's goroutine dials, writes
// the request, reads the reply's head with http.ReadResponse and then the
// body, straight from the connection through one small buffer. Closing
// the connection (the caller's context ending, a stream going silent, a
// clock round done) ends a read in progress. These connections go straight
// to the board: a proxy from the environment is not used for them (boards
// are on the gateway's LAN).
const (
	// connReadBuffer is the buffer a reply is read through: SSE messages
	// and clock replies are short; a longer line takes more reads.
	connReadBuffer = 512
	// scanBuffer is the initial line buffer of a stream; it grows up to
	// MaxReply for long messages.
	scanBuffer = 512
)

// boardConn is a connection to a board for requests one after another.
type boardConn struct {
	conn net.Conn
	br   *bufio.Reader
	stop func() bool // ends the watch on the caller's context
	once sync.Once
}

// dial connects to the board at u until ctx ends.
func (l *LAN) dial(ctx context.Context, u *url.URL) (*boardConn, error) {
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
	c := &boardConn{conn: conn, br: bufio.NewReaderSize(conn, connReadBuffer)}
	c.stop = context.AfterFunc(ctx, c.close)
	return c, nil
}

// send writes req and reads the reply's head; the caller reads the body
// (to its end before the next send) or closes the connection.
func (c *boardConn) send(req *http.Request) (*http.Response, error) {
	var head bytes.Buffer
	if err := req.Write(&head); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(head.Bytes()); err != nil {
		return nil, err
	}
	return http.ReadResponse(c.br, req)
}

// Close closes the connection.
func (c *boardConn) Close() error {
	c.stop()
	c.close()
	return nil
}

func (c *boardConn) close() { c.once.Do(func() { c.conn.Close() }) }

// openStream sends req (a GET of the event stream) on a connection of its
// own and returns the reply once its head has arrived, within StreamIdle
// (on the injected clock). The reply's Body closes the connection; nothing
// else holds it.
func (l *LAN) openStream(ctx context.Context, req *http.Request) (*http.Response, error) {
	c, err := l.dial(ctx, req.URL)
	if err != nil {
		return nil, err
	}
	var late atomic.Bool
	t := l.o.Clock.AfterFunc(l.o.StreamIdle, func() { late.Store(true); c.close() })
	defer t.Stop()
	fail := func(err error) (*http.Response, error) {
		c.Close()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case late.Load():
			return nil, fmt.Errorf("no reply in %v", l.o.StreamIdle)
		}
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return fail(err)
	}
	if !t.Stop() {
		return fail(errors.New("late"))
	}
	resp.Body, resp.Request = &streamBody{body: resp.Body, c: c}, nil
	return resp, nil
}

// streamBody is a stream's body. Close closes the connection rather than
// the body (which would read an endless stream to its end).
type streamBody struct {
	body io.Reader
	c    *boardConn
}

func (s *streamBody) Read(p []byte) (int, error) { return s.body.Read(p) }
func (s *streamBody) Close() error               { return s.c.Close() }

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
