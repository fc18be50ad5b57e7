// Package tcplink carries the host link over TCP, the way ser2net exposes a
// serial port on the network.
//
// There are two sides. The board side, [Listen], returns a [Server] that
// the board keeps for its whole life as if it were its UART: it accepts one
// client at a time, and that client is the wire. While no client is
// connected, Read waits and Write discards (bytes sent into an unplugged
// cable are lost, and the board must not stall because of it). When the
// client disconnects, the board does not see an error or end of file; its
// Read simply waits for the next client. A client that connects while
// another is attached takes over the wire: the old connection is closed
// (as unplugging one cable to plug in another), and [Server.Stats] counts
// it. A tool run twice in a row therefore never finds the wire "busy"
// because the server has not yet noticed the first run hang up.
//
// The host side, [Dial], is a plain TCP connection.
//
// No framing is added: the TCP stream carries exactly the link's bytes.
package tcplink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// Errors returned by this package.
var (
	// ErrClosed is returned by Read and Write after Close.
	ErrClosed = errors.New("tcplink: closed")
	// ErrListen means the listening socket could not be made.
	ErrListen = errors.New("tcplink: cannot listen")
	// ErrDial means the connection to the board could not be made.
	ErrDial = errors.New("tcplink: cannot dial")
)

// Stats counts what happened on a Server.
type Stats struct {
	Accepted  int64 // clients that became the wire
	Replaced  int64 // clients dropped because a new one connected
	Discarded int64 // bytes written while no client was attached
	Connected bool  // a client is attached now
}

// chunkSize is how much the per-client pump reads at a time, and
// chunkQueue how many such reads may wait for the board's Read.
const (
	chunkSize  = 4096
	chunkQueue = 16
)

type client struct {
	conn net.Conn
	gone chan struct{} // closed when the pump ends
}

// Server is the board side: a listener whose single client is the wire.
type Server struct {
	ln   net.Listener
	data chan []byte   // chunks read from the client, in order
	done chan struct{} // closed by Close

	readMu  sync.Mutex
	pending []byte // the rest of the chunk last handed to Read

	mu     sync.Mutex
	cur    *client
	stats  Stats
	closed bool

	wg sync.WaitGroup
}

// Listen starts listening on addr (host:port; port 0 picks one) and
// returns the board side. The context bounds only setting up the socket.
func Listen(ctx context.Context, addr string) (*Server, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrListen, addr, err)
	}
	return Serve(ln), nil
}

// Serve is Listen on a listener the caller made; the Server owns it.
func Serve(ln net.Listener) *Server {
	s := &Server{ln: ln, data: make(chan []byte, chunkQueue), done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// PathName is the listening address as host:port, for bus/transport.
func (s *Server) PathName() string { return s.ln.Addr().String() }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Connected = s.cur != nil
	return st
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // listener closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			continue
		}
		if old := s.cur; old != nil {
			s.stats.Replaced++
			old.conn.Close() // its pump ends; drop leaves the new client
		}
		c := &client{conn: conn, gone: make(chan struct{})}
		s.cur = c
		s.stats.Accepted++
		s.wg.Add(1)
		s.mu.Unlock()
		go s.pump(c)
	}
}

// pump moves the client's bytes to the data queue until the client leaves
// or the server closes.
func (s *Server) pump(c *client) {
	defer s.wg.Done()
	defer close(c.gone)
	defer s.drop(c)
	for {
		buf := make([]byte, chunkSize)
		n, err := c.conn.Read(buf)
		if n > 0 {
			select {
			case s.data <- buf[:n]:
			case <-s.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// drop detaches c if it is still the current client.
func (s *Server) drop(c *client) {
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
	}
	s.mu.Unlock()
	c.conn.Close()
}

// Read returns bytes sent by the current client, waiting (across client
// disconnects and reconnects) until there are some or the server closes.
func (s *Server) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if len(s.pending) == 0 {
		select {
		case b := <-s.data:
			s.pending = b
		case <-s.done:
			return 0, ErrClosed
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// Write sends p to the current client. With no client attached, or when
// the client fails mid-write, the bytes are discarded and counted, and
// Write still reports success, as a UART would.
func (s *Server) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	c := s.cur
	if c == nil {
		s.stats.Discarded += int64(len(p))
		s.mu.Unlock()
		return len(p), nil
	}
	s.mu.Unlock()
	n, err := c.conn.Write(p)
	if err != nil {
		s.mu.Lock()
		s.stats.Discarded += int64(len(p) - n)
		s.mu.Unlock()
		s.drop(c)
	}
	return len(p), nil
}

// Close stops listening, disconnects the client and ends the server's
// goroutines; Read and Write then return ErrClosed. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	c := s.cur
	s.mu.Unlock()
	close(s.done)
	err := s.ln.Close()
	if c != nil {
		c.conn.Close()
	}
	s.wg.Wait()
	return err
}

// Dial connects the host side to a board served by Listen (or to ser2net
// in raw mode). The connection is the link's byte stream.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrDial, addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return c, nil
}
