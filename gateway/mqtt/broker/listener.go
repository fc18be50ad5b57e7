package broker

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The listener guards the broker before mochi reads a byte.
//
// Every MQTT packet starts with a fixed header: one byte of type and
// flags, then the length of the rest as a variable-length integer of one
// to four bytes, seven bits each, least significant first, the high bit
// saying another byte follows:
//
//	byte 0      type<<4 | flags          (CONNECT = 1)
//	bytes 1..4  remaining length         (0 .. 268 435 455)
//	...         remaining length bytes
//
// A guard follows that framing on the bytes of one connection as they
// are read and ends the connection as soon as a length is too large,
// before anything allocates room for it:
//
//   - the first packet must be CONNECT of at most MaxConnect bytes, and
//     must come within ConnectTimeout;
//   - after it, a packet may have at most MaxPacket bytes, or
//     GatewayMaxPacket on the connection that logged in with the bridge's
//     credentials (its retained lists grow with the fleet).
//
// The listener also bounds the open connections: MaxClients, the bridge,
// and PendingLogins connections still logging in.

// Sizes and times of the guard.
const (
	// MaxConnect bounds the CONNECT packet (client id, credentials, will).
	MaxConnect = 64 << 10
	// GatewayMaxPacket bounds the bridge's packets.
	GatewayMaxPacket = 64 << 20
	// ConnectTimeout is how long a new connection has to send CONNECT.
	ConnectTimeout = 10 * time.Second
	// WriteTimeout bounds one write to a client: a client that reads
	// nothing for this long is cut (it would otherwise hold the
	// broker's writes to it, and a subscription's lock, for ever).
	WriteTimeout = 10 * time.Second
	// PendingLogins is how many connections beyond the clients may be
	// open while logging in.
	PendingLogins = 64
)

// errFrame: a connection's framing broke the guard's bounds.
var errFrame = errors.New("broker: packet refused")

// guardConfig is what the guards of one listener share.
type guardConfig struct {
	maxPacket int
	gateway   Credentials
}

// listener is the broker's mochi listener over a TCP listener.
type listener struct {
	id       string
	ln       net.Listener
	cfg      guardConfig
	maxConns int64
	log      *slog.Logger
	// connectTimeout is ConnectTimeout (shorter in tests).
	connectTimeout time.Duration

	open   atomic.Int64
	closed atomic.Bool
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open connections, closed by shutdown
}

var _ listeners.Listener = (*listener)(nil)

func (l *listener) ID() string       { return l.id }
func (l *listener) Address() string  { return l.ln.Addr().String() }
func (l *listener) Protocol() string { return "tcp" }

func (l *listener) Init(log *slog.Logger) error {
	if log != nil {
		l.log = log
	}
	return nil
}

// Serve accepts connections until Close.
func (l *listener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		if l.closed.Load() {
			conn.Close()
			return
		}
		if l.open.Add(1) > l.maxConns {
			l.open.Add(-1)
			l.log.Warn("mqtt broker: connection refused: too many open", "remote", conn.RemoteAddr(), "max", l.maxConns)
			conn.Close()
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(l.connectTimeout))
		if !l.track(conn) {
			l.open.Add(-1)
			conn.Close()
			return
		}
		l.wg.Go(func() {
			defer l.open.Add(-1)
			defer l.untrack(conn)
			if err := establish(l.id, &guard{Conn: conn, cfg: &l.cfg, first: true}); err != nil {
				l.log.Debug("mqtt broker: connection ended", "remote", conn.RemoteAddr(), "err", err)
			}
		})
	}
}

// track records an open connection; false once the listener is shut.
func (l *listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	if l.conns == nil {
		l.conns = map[net.Conn]struct{}{}
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// shutdown stops accepting, closes every connection (logged in or not)
// and waits, at most wait, for mochi to be done with them, so that
// mochi's server is never closed while it still sets up a client (its
// Close and EstablishConnection race otherwise).
func (l *listener) shutdown(wait time.Duration) {
	l.mu.Lock()
	first := l.closed.CompareAndSwap(false, true)
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	if first {
		_ = l.ln.Close()
	}
	for _, c := range conns {
		_ = c.Close()
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		l.log.Warn("mqtt broker: connections still closing at shutdown", "open", l.open.Load())
	}
}

// Close stops accepting and closes the clients.
func (l *listener) Close(closeClients listeners.CloseFn) {
	l.shutdown(5 * time.Second)
	closeClients(l.id)
}

// guard states.
const (
	gType = iota // expecting a packet's first byte
	gLen         // in the remaining length
	gBody        // in the rest
)

// guard is one connection's framing check (see above).
type guard struct {
	net.Conn
	cfg   *guardConfig
	first bool   // in the CONNECT packet
	limit int    // bound of the packets after CONNECT
	body  []byte // the CONNECT packet's rest, to read the login

	state, lenBytes int
	rem, mul        int
	err             error
}

// Write writes to the connection within WriteTimeout.
func (g *guard) Write(p []byte) (int, error) {
	_ = g.Conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	return g.Conn.Write(p)
}

// Read reads from the connection and checks what came; a breach closes
// the connection and returns no bytes.
func (g *guard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		if e := g.scan(p[:n]); e != nil {
			g.err = e
			_ = g.Conn.Close()
			return 0, e
		}
	}
	return n, err
}

// scan follows the framing over b.
func (g *guard) scan(b []byte) error {
	for len(b) > 0 {
		switch g.state {
		case gType:
			if g.first && b[0]>>4 != packets.Connect {
				return fmt.Errorf("%w: the first packet is not CONNECT", errFrame)
			}
			g.state, g.rem, g.mul, g.lenBytes = gLen, 0, 1, 0
			b = b[1:]
		case gLen:
			c := b[0]
			b = b[1:]
			g.rem += int(c&0x7f) * g.mul
			g.mul <<= 7
			g.lenBytes++
			if c&0x80 != 0 {
				if g.lenBytes == 4 {
					return fmt.Errorf("%w: malformed length", errFrame)
				}
				continue
			}
			limit := g.limit
			if g.first {
				limit = MaxConnect
			}
			if g.rem > limit {
				return fmt.Errorf("%w: %d bytes (at most %d)", errFrame, g.rem, limit)
			}
			g.state = gBody
			if g.rem == 0 {
				g.end()
			}
		case gBody:
			n := min(len(b), g.rem)
			if g.first {
				g.body = append(g.body, b[:n]...)
			}
			b = b[n:]
			g.rem -= n
			if g.rem == 0 {
				g.end()
			}
		}
	}
	return nil
}

// end closes a packet; after CONNECT the packet bound is set by who
// logged in.
func (g *guard) end() {
	g.state = gType
	if !g.first {
		return
	}
	g.first = false
	g.limit = g.cfg.maxPacket
	if g.bridge() {
		g.limit = GatewayMaxPacket
	}
	g.body = nil
}

// bridge reports whether the CONNECT carried the bridge's credentials.
func (g *guard) bridge() bool {
	gw := g.cfg.gateway
	if gw.Username == "" {
		return false
	}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect, Remaining: len(g.body)}}
	if pk.ConnectDecode(g.body) != nil {
		return false
	}
	return string(pk.Connect.Username) == gw.Username &&
		subtle.ConstantTimeCompare(pk.Connect.Password, []byte(gw.Password)) == 1
}
