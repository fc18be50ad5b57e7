package simline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// handshakeTimeout bounds how long a hub waits for HELLO.
const handshakeTimeout = 5 * time.Second

// ServeHub attaches one node to line for every connection accepted on ln
// and carries its traffic with the hub protocol (see proto.go). It returns
// nil once ctx is done, or the listener's error if accepting fails first;
// either way it has closed ln and every connection and their goroutines
// have ended. It does not close the line.
func ServeHub(ctx context.Context, line *Line, ln net.Listener) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var err error
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("simline: hub accept: %w", aerr)
			}
			break
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(line, c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	}
	ln.Close()
	mu.Lock()
	for c := range conns {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	return err
}

// msgWriter serialises whole messages onto a connection.
type msgWriter struct {
	mu  sync.Mutex
	c   net.Conn
	buf []byte
}

func (w *msgWriter) send(m Msg) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = AppendMsg(w.buf[:0], m)
	_, err := w.c.Write(w.buf)
	return err
}

func serveConn(line *Line, c net.Conn) {
	defer c.Close()
	w := &msgWriter{c: c}
	mr := &msgReader{r: bufio.NewReader(c)}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	hello, err := mr.next()
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			w.send(Msg{Type: MsgError, Text: "bad hello"})
		}
		return
	}
	if hello.Type != MsgHello || hello.Version != ProtocolVersion {
		w.send(Msg{Type: MsgError, Text: fmt.Sprintf("expected hello version %d", ProtocolVersion)})
		return
	}
	node, err := line.Attach(NodeOptions{
		Name:   hello.Name,
		Echo:   hello.Flags&FlagEcho != 0,
		Silent: hello.Flags&FlagSilent != 0,
	})
	if err != nil {
		w.send(Msg{Type: MsgError, Text: "line closed"})
		return
	}
	defer node.Close()
	c.SetDeadline(time.Time{})
	if err := w.send(Msg{Type: MsgWelcome, Version: ProtocolVersion, Baud: uint32(line.Baud())}); err != nil {
		return
	}

	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		buf := make([]byte, 4096)
		for {
			n, err := node.Read(buf)
			if err != nil {
				return
			}
			if err := w.send(Msg{Type: MsgRecv, Time: line.Clock().Now().UnixNano(), Data: buf[:n]}); err != nil {
				c.Close()
				return
			}
		}
	}()
	defer func() {
		node.Close()
		c.Close()
		<-pumpDone
	}()
	for {
		m, err := mr.next()
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				w.send(Msg{Type: MsgError, Text: "malformed message"})
			}
			return
		}
		if m.Type != MsgSend {
			w.send(Msg{Type: MsgError, Text: fmt.Sprintf("unexpected message type 0x%02x", m.Type)})
			return
		}
		n, err := node.Write(m.Data)
		if err != nil {
			return
		}
		if err := w.send(Msg{Type: MsgSent, Count: uint32(n), Time: line.Clock().Now().UnixNano()}); err != nil {
			return
		}
	}
}

// Remote is a node on a line served by a hub in another process (or
// goroutine). It behaves like a Node: Write blocks for the wire time, Read
// returns what the line delivered. Its Stats have no Collisions (the hub
// does not report them); listen with Echo to detect collisions.
type Remote struct {
	conn net.Conn
	name string
	baud int
	w    *msgWriter
	rx   *rxQueue

	txMu sync.Mutex
	sent chan uint32   // SENT counts
	done chan struct{} // the reader goroutine has ended

	nsent    atomic.Int64
	hubError atomic.Pointer[string]

	closeOnce sync.Once
	closed    chan struct{}
}

// Dial joins the line served by a hub listening on the Unix socket at
// path. ctx bounds connecting and the handshake only.
func Dial(ctx context.Context, path string, opts NodeOptions) (*Remote, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("simline: dial hub %s: %w", path, err)
	}
	return handshake(ctx, c, opts)
}

func handshake(ctx context.Context, c net.Conn, opts NodeOptions) (*Remote, error) {
	if len(opts.Name) > MaxName {
		c.Close()
		return nil, fmt.Errorf("%w: name longer than %d bytes", ErrConfig, MaxName)
	}
	if opts.RxBuffer == 0 {
		opts.RxBuffer = DefaultRxBuffer
	}
	if opts.RxBuffer < 0 {
		c.Close()
		return nil, fmt.Errorf("%w: receive buffer %d", ErrConfig, opts.RxBuffer)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	fail := func(err error) (*Remote, error) {
		stop()
		c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("simline: hub handshake: %w", ctx.Err())
		}
		return nil, fmt.Errorf("simline: hub handshake: %w", err)
	}
	var flags byte
	if opts.Echo {
		flags |= FlagEcho
	}
	if opts.Silent {
		flags |= FlagSilent
	}
	w := &msgWriter{c: c}
	if err := w.send(Msg{Type: MsgHello, Version: ProtocolVersion, Flags: flags, Name: opts.Name}); err != nil {
		return fail(err)
	}
	mr := &msgReader{r: bufio.NewReader(c)}
	m, err := mr.next()
	if err != nil {
		return fail(err)
	}
	switch {
	case m.Type == MsgError:
		return fail(fmt.Errorf("%w: hub refused: %s", ErrProtocol, m.Text))
	case m.Type != MsgWelcome || m.Version != ProtocolVersion || m.Baud == 0:
		return fail(fmt.Errorf("%w: expected welcome, got type 0x%02x", ErrProtocol, m.Type))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	c.SetDeadline(time.Time{})
	r := &Remote{
		conn:   c,
		name:   opts.Name,
		baud:   int(m.Baud),
		w:      w,
		rx:     newRxQueue(opts.RxBuffer),
		sent:   make(chan uint32, 1),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	go r.readLoop(mr)
	return r, nil
}

func (r *Remote) readLoop(mr *msgReader) {
	defer close(r.done)
	defer r.rx.close()
	defer r.conn.Close()
	for {
		m, err := mr.next()
		if err != nil {
			return
		}
		switch m.Type {
		case MsgRecv:
			r.rx.push(m.Data)
		case MsgSent:
			select {
			case r.sent <- m.Count:
			default: // a SENT nobody asked for: ignore
			}
		case MsgError:
			r.hubError.Store(&m.Text)
			return
		default:
			return
		}
	}
}

// Name is the name the node asked for.
func (r *Remote) Name() string { return r.name }

// Baud is the line's baud rate as the hub reported it.
func (r *Remote) Baud() int { return r.baud }

// Stats returns the node's counters as seen from this side.
func (r *Remote) Stats() NodeStats {
	rcv, ovr := r.rx.counts()
	return NodeStats{Sent: r.nsent.Load(), Received: rcv, Overruns: ovr}
}

func (r *Remote) errClosed() error {
	if msg := r.hubError.Load(); msg != nil {
		return fmt.Errorf("%w: hub said: %s", ErrClosed, *msg)
	}
	return ErrClosed
}

// Read returns bytes the line delivered, blocking until there are some
// or the node closes or loses its hub.
func (r *Remote) Read(p []byte) (int, error) {
	select {
	case <-r.closed:
		return 0, ErrClosed
	default:
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, ok := r.rx.read(p)
	if !ok {
		return 0, r.errClosed()
	}
	return n, nil
}

// Write puts p on the line through the hub and returns once the hub says
// the last byte has left the wire.
func (r *Remote) Write(p []byte) (int, error) {
	r.txMu.Lock()
	defer r.txMu.Unlock()
	total := 0
	for len(p) > 0 {
		select {
		case <-r.closed:
			return total, ErrClosed
		case <-r.done:
			return total, r.errClosed()
		default:
		}
		chunk := p[:min(len(p), MaxData)]
		p = p[len(chunk):]
		if err := r.w.send(Msg{Type: MsgSend, Data: chunk}); err != nil {
			return total, fmt.Errorf("%w: %w", r.errClosed(), err)
		}
		select {
		case n := <-r.sent:
			total += int(n)
			r.nsent.Add(int64(n))
		case <-r.done:
			return total, r.errClosed()
		}
	}
	return total, nil
}

// Close leaves the line and ends the node's goroutine.
func (r *Remote) Close() error {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.conn.Close()
		<-r.done
	})
	return nil
}
