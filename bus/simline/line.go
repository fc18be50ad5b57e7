// Package simline simulates a multi-drop, half-duplex RS485 line shared by
// a bus master and many boards, in one process or across processes.
//
// # The wire
//
// A [Line] has one baud rate. Every byte takes 10 bit times on the wire (a
// start bit, 8 data bits, a stop bit), so byte i of a Write (counting from
// 0) finishes at start + (i+1)*10/baud seconds, and receivers get it at
// that moment. The pacing is deadline-based against the injected
// [clock.Clock]: each wake-up delivers every byte whose deadline has
// passed, so a long Write takes N*10/baud however late the individual
// wake-ups are, and never accumulates sleep drift.
//
// Every byte a node sends reaches every other attached node. A node does
// not hear itself by default (its transceiver's receiver is off while it
// drives the line); with [NodeOptions.Echo] it does, like a transceiver
// with RE tied low, and can then compare what it sent with what the line
// carried.
//
// # Writes block for the wire time
//
// [Node.Write] returns when the last byte has left the wire, as a UART
// write followed by tcdrain would. That is what lets a master time its
// turn-around and a board's reply appear a realistic time after the
// request. Writes of one node are sent one after the other; writes of
// different nodes overlap freely, as real transmitters do.
//
// # Collisions
//
// A byte is corrupted when its wire interval overlaps any part of a
// transmission by another (non-silent) node. Receivers then get a garbage
// byte in its place (the byte XOR a random non-zero value), so both
// colliding senders corrupt each other for the overlap, and a sender that
// listens with Echo sees bytes that differ from what it wrote. [Stats]
// counts corrupted bytes in Collisions, and each node's [NodeStats]
// counts its own.
//
// # Faults
//
// A [Faults] value, drawn from one RNG seeded by [Config.Seed] so a test is
// reproducible, applies to each byte that reaches the wire without a
// collision: it is dropped with probability DropRate, otherwise one of its
// bits is inverted with probability FlipRate; after it, a noise burst of 1
// to NoiseMaxBurst random bytes follows with probability NoiseRate. Every
// receiver sees the same faults. [Line.InjectNoise] puts a chosen burst on
// the line at once. A silent node ([NodeOptions.Silent],
// [Node.SetSilent], [Config.Silent]) has its transmitter disconnected: its
// writes take their wire time but nothing reaches the line, and it
// collides with nobody; it still receives.
//
// # Counters
//
// [Stats] counts bytes put on the wire, frames and lines, collisions and
// each fault. Frames and lines are counted per sender from the bytes it
// sent, before faults: a native frame is a non-empty run between two 0x00
// delimiters (0x00 ... 0x00), a line is a non-empty run ended by 0x0A that
// did not start after a 0x00. Receive buffers that overflow count
// Overruns.
//
// # Across processes
//
// [ServeHub] exposes a line on a listener (a Unix socket); [Dial] joins it
// and returns a [Remote] that behaves like a local [Node]. The hub's
// framed protocol is described next to its constants in proto.go.
package simline

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// Errors returned by this package.
var (
	// ErrClosed is returned by a node's Read and Write once the node or
	// its line is closed, or its hub connection is gone.
	ErrClosed = errors.New("simline: closed")
	// ErrConfig means a Config, Faults or NodeOptions field is out of range.
	ErrConfig = errors.New("simline: bad configuration")
	// ErrProtocol means a hub peer sent a malformed or unexpected message.
	ErrProtocol = errors.New("simline: hub protocol error")
	// ErrShort means a hub message is cut short: more bytes are needed.
	ErrShort = errors.New("simline: hub message incomplete")
)

// Wire constants.
const (
	// BitsPerByte is the wire time of one byte in bit times: start bit,
	// 8 data bits, stop bit.
	BitsPerByte = 10
	// DefaultBaud is the line's baud rate when Config.Baud is 0.
	DefaultBaud = 115200
	// DefaultRxBuffer is a node's receive buffer size when
	// NodeOptions.RxBuffer is 0.
	DefaultRxBuffer = 64 << 10
	// DefaultNoiseMaxBurst is the longest noise burst when
	// Faults.NoiseMaxBurst is 0.
	DefaultNoiseMaxBurst = 8
	// historyKeep is how long a finished transmission is remembered for
	// collision checks of bytes delivered late.
	historyKeep = time.Second
)

// Faults are the injected line faults; each rate is a probability per byte
// in [0, 1].
type Faults struct {
	FlipRate      float64 // one bit of the byte inverted
	DropRate      float64 // the byte lost for every receiver
	NoiseRate     float64 // a burst of random bytes follows the byte
	NoiseMaxBurst int     // longest burst; 0 means DefaultNoiseMaxBurst
}

func (f Faults) validate() error {
	for _, r := range []float64{f.FlipRate, f.DropRate, f.NoiseRate} {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("%w: fault rate %v outside [0, 1]", ErrConfig, r)
		}
	}
	if f.NoiseMaxBurst < 0 {
		return fmt.Errorf("%w: noise burst %d", ErrConfig, f.NoiseMaxBurst)
	}
	return nil
}

// Config configures a Line.
type Config struct {
	Baud   int         // 0 means DefaultBaud
	Clock  clock.Clock // nil means clock.Real
	Seed   uint64      // seeds the fault RNG
	Faults Faults
	// Silent names nodes whose transmitter is disconnected from the start
	// (matched against NodeOptions.Name when they attach).
	Silent []string
}

// Stats are the line's counters.
type Stats struct {
	Nodes       int   // nodes attached now
	Bytes       int64 // bytes put on the wire by nodes (silent ones excluded)
	Frames      int64 // native frames sent (0x00 ... 0x00 runs)
	Lines       int64 // JSON lines sent (runs ended by 0x0A)
	Collisions  int64 // bytes corrupted by overlapping senders
	BitFlips    int64 // bytes with an injected bit flip
	Dropped     int64 // bytes lost to injected drops
	NoiseBursts int64 // injected noise bursts
	NoiseBytes  int64 // bytes of injected noise
	Silenced    int64 // bytes written by silent nodes, never on the wire
	Overruns    int64 // bytes lost because a receive buffer was full
}

// Faults returns the sum of every injected fault event: flips, drops and
// noise bursts.
func (s Stats) Faults() int64 { return s.BitFlips + s.Dropped + s.NoiseBursts }

// transmission is one Write's occupation of the wire.
type transmission struct {
	node       *Node
	start, end time.Time
	active     bool
}

// Line is one simulated RS485 line. Its methods are safe for concurrent use.
type Line struct {
	baud int
	clk  clock.Clock
	// realtime is true on the wall clock: Write then spins through the
	// last SpinWindow of a transmission, because the OS may wake a
	// sleeping goroutine a millisecond late, far longer than a byte.
	realtime bool

	mu       sync.Mutex
	rng      *rand.Rand
	faults   Faults
	silent   map[string]bool
	nodes    []*Node
	txs      []*transmission
	stats    Stats
	closed   bool
	done     chan struct{}
	scratch  []byte
	nodeSeen int64
}

// Timing on the wall clock. Operating systems wake sleepers late (a
// millisecond is common on virtual machines), which is longer than a byte
// takes at 115200 baud; so a transmission sleeps in batches of BatchWait
// and spins (yielding) through its last SpinWindow, so that its last byte
// arrives, and Write returns, on time.
const (
	SpinWindow = 2 * time.Millisecond
	BatchWait  = 2 * time.Millisecond
)

// New makes a line.
func New(cfg Config) (*Line, error) {
	if cfg.Baud == 0 {
		cfg.Baud = DefaultBaud
	}
	if cfg.Baud < 0 {
		return nil, fmt.Errorf("%w: baud %d", ErrConfig, cfg.Baud)
	}
	if err := cfg.Faults.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	l := &Line{
		baud:     cfg.Baud,
		clk:      cfg.Clock,
		realtime: cfg.Clock == clock.Real,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		faults:   cfg.Faults,
		silent:   map[string]bool{},
		done:     make(chan struct{}),
	}
	for _, n := range cfg.Silent {
		l.silent[n] = true
	}
	return l, nil
}

// Baud is the line's baud rate.
func (l *Line) Baud() int { return l.baud }

// Clock is the line's clock.
func (l *Line) Clock() clock.Clock { return l.clk }

// WireTime is how long n bytes take on this line.
func (l *Line) WireTime(n int) time.Duration { return wireTime(n, l.baud) }

func wireTime(n, baud int) time.Duration {
	return time.Duration(int64(n) * BitsPerByte * int64(time.Second) / int64(baud))
}

// SetFaults replaces the fault settings.
func (l *Line) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	l.mu.Lock()
	l.faults = f
	l.mu.Unlock()
	return nil
}

// Stats returns a snapshot of the counters.
func (l *Line) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats // Overruns so far holds those of detached nodes
	st.Nodes = len(l.nodes)
	for _, n := range l.nodes {
		_, o := n.rx.counts()
		st.Overruns += o
	}
	return st
}

// NodeOptions configure one node.
type NodeOptions struct {
	Name     string // for logs, stats and Config.Silent; defaults to node-N
	Echo     bool   // hear its own bytes as the line carried them
	Silent   bool   // transmitter disconnected
	RxBuffer int    // receive buffer size; 0 means DefaultRxBuffer
	// Tap, when set, is called with every run of bytes the node receives
	// from another node and the moment the run's last byte arrived by
	// the wire's schedule (the sender's start plus the bytes' wire time),
	// not when a reader took it: a probe's view of the wire that no
	// goroutine's wake-up delays. It is called with the line's lock
	// held: it must be quick and must not use the line. Local nodes only
	// (a hub's remote nodes ignore it).
	Tap func(b []byte, at time.Time)
}

// NodeStats are one node's counters.
type NodeStats struct {
	Sent       int64 // bytes written (including while silent)
	Received   int64 // bytes taken into the receive buffer
	Collisions int64 // of its own bytes, how many were corrupted
	Overruns   int64 // received bytes lost to a full buffer
}

// Port is what a node is, in-process or through a hub.
type Port interface {
	io.ReadWriteCloser
	Name() string
	Stats() NodeStats
}

// Node is one transceiver on the line, an io.ReadWriteCloser.
type Node struct {
	line   *Line
	name   string
	echo   bool
	silent atomic.Bool
	rx     *rxQueue
	tap    func([]byte, time.Time)

	txMu sync.Mutex // one Write on the wire at a time

	// under line.mu
	sent, collisions int64
	frame            frameState

	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ Port = (*Node)(nil)
	_ Port = (*Remote)(nil)
)

// Attach adds a node to the line.
func (l *Line) Attach(opts NodeOptions) (*Node, error) {
	if opts.RxBuffer == 0 {
		opts.RxBuffer = DefaultRxBuffer
	}
	if opts.RxBuffer < 0 {
		return nil, fmt.Errorf("%w: receive buffer %d", ErrConfig, opts.RxBuffer)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	l.nodeSeen++
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("node-%d", l.nodeSeen)
	}
	n := &Node{line: l, name: opts.Name, echo: opts.Echo, rx: newRxQueue(opts.RxBuffer), closed: make(chan struct{}), tap: opts.Tap}
	n.silent.Store(opts.Silent || l.silent[opts.Name])
	l.nodes = append(l.nodes, n)
	return n, nil
}

// InjectNoise puts the bytes b on the line at once, as a noise burst every
// attached node receives.
func (l *Line) InjectNoise(b []byte) {
	if len(b) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.NoiseBursts++
	l.stats.NoiseBytes += int64(len(b))
	for _, n := range l.nodes {
		n.rx.push(b)
	}
}

// Close detaches and closes every node; later Attach calls fail.
func (l *Line) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	nodes := slices.Clone(l.nodes)
	l.mu.Unlock()
	for _, n := range nodes {
		n.Close()
	}
	return nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.name }

// SetSilent disconnects (true) or reconnects the node's transmitter.
func (n *Node) SetSilent(silent bool) { n.silent.Store(silent) }

// Stats returns the node's counters.
func (n *Node) Stats() NodeStats {
	rcv, ovr := n.rx.counts()
	n.line.mu.Lock()
	defer n.line.mu.Unlock()
	return NodeStats{Sent: n.sent, Received: rcv, Collisions: n.collisions, Overruns: ovr}
}

// Buffered is how many received bytes wait to be read.
func (n *Node) Buffered() int { return n.rx.buffered() }

// Read returns received bytes, blocking until there are some or the node
// closes.
func (n *Node) Read(p []byte) (int, error) {
	select {
	case <-n.closed:
		return 0, ErrClosed
	default:
	}
	if len(p) == 0 {
		return 0, nil
	}
	k, ok := n.rx.read(p)
	if !ok {
		return 0, ErrClosed
	}
	return k, nil
}

// Write puts p on the line and returns once its last byte has left the
// wire (len(p)*10/baud after the call). Closing the node or the line
// during a Write stops it; the bytes already sent count in n.
func (n *Node) Write(p []byte) (int, error) {
	select {
	case <-n.closed:
		return 0, ErrClosed
	default:
	}
	if len(p) == 0 {
		return 0, nil
	}
	n.txMu.Lock()
	defer n.txMu.Unlock()
	l := n.line

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	start := l.clk.Now()
	tx := &transmission{node: n, start: start, end: start.Add(wireTime(len(p), l.baud)), active: true}
	l.pruneLocked(start)
	l.txs = append(l.txs, tx)
	l.mu.Unlock()

	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	sent := 0
	for sent < len(p) {
		now := l.clk.Now()
		due := bytesDue(now.Sub(start), len(p), l.baud)
		if due > sent {
			l.transmit(tx, p[sent:due], sent)
			sent = due
			continue
		}
		wait := wireTime(sent+1, l.baud) - now.Sub(start)
		if l.realtime {
			left := tx.end.Sub(now)
			if left <= SpinWindow {
				// Yield rather than sleep: the next byte is due within
				// a timer's granularity.
				select {
				case <-n.closed:
					l.finish(tx, l.clk.Now())
					return sent, ErrClosed
				case <-l.done:
					l.finish(tx, l.clk.Now())
					return sent, ErrClosed
				default:
				}
				runtime.Gosched()
				continue
			}
			// Sleep in batches of bytes, waking before the spin window.
			wait = min(left-SpinWindow, max(wait, BatchWait))
		}
		if timer == nil {
			timer = l.clk.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C():
		case <-n.closed:
			l.finish(tx, l.clk.Now())
			return sent, ErrClosed
		case <-l.done:
			l.finish(tx, l.clk.Now())
			return sent, ErrClosed
		}
	}
	l.finish(tx, tx.end)
	return sent, nil
}

// bytesDue is how many of n bytes have fully left the wire after elapsed.
func bytesDue(elapsed time.Duration, n, baud int) int {
	if elapsed <= 0 {
		return 0
	}
	if elapsed >= wireTime(n, baud) {
		return n
	}
	k := int(int64(elapsed) * int64(baud) / (BitsPerByte * int64(time.Second)))
	for k < n && wireTime(k+1, baud) <= elapsed {
		k++
	}
	return min(k, n)
}

// finish marks tx as over at end (earlier than planned when cut short).
func (l *Line) finish(tx *transmission, end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tx.active = false
	if end.Before(tx.end) {
		tx.end = end
	}
}

// pruneLocked forgets transmissions that ended long enough ago.
func (l *Line) pruneLocked(now time.Time) {
	l.txs = slices.DeleteFunc(l.txs, func(t *transmission) bool {
		return !t.active && now.Sub(t.end) > historyKeep
	})
}

// transmit delivers bytes b, which are bytes offset.. of tx, now that
// their wire time has passed.
func (l *Line) transmit(tx *transmission, b []byte, offset int) {
	n := tx.node
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	n.sent += int64(len(b))
	if n.silent.Load() {
		l.stats.Silenced += int64(len(b))
		return
	}
	out := l.scratch[:0]
	f := l.faults
	for i, c := range b {
		idx := offset + i
		l.stats.Bytes++
		l.countFrameLocked(n, c)
		s := tx.start.Add(wireTime(idx, l.baud))
		e := tx.start.Add(wireTime(idx+1, l.baud))
		switch {
		case l.collidesLocked(tx, s, e):
			l.stats.Collisions++
			n.collisions++
			out = append(out, c^byte(1+l.rng.IntN(255)))
		case f.DropRate > 0 && l.rng.Float64() < f.DropRate:
			l.stats.Dropped++
		case f.FlipRate > 0 && l.rng.Float64() < f.FlipRate:
			l.stats.BitFlips++
			out = append(out, c^byte(1<<l.rng.IntN(8)))
		default:
			out = append(out, c)
		}
		if f.NoiseRate > 0 && l.rng.Float64() < f.NoiseRate {
			maxBurst := f.NoiseMaxBurst
			if maxBurst == 0 {
				maxBurst = DefaultNoiseMaxBurst
			}
			k := 1 + l.rng.IntN(maxBurst)
			for range k {
				out = append(out, byte(l.rng.Uint32()))
			}
			l.stats.NoiseBursts++
			l.stats.NoiseBytes += int64(k)
		}
	}
	arrived := tx.start.Add(wireTime(offset+len(b), l.baud))
	for _, r := range l.nodes {
		if r != n || n.echo {
			r.rx.push(out)
			if r.tap != nil && len(out) > 0 {
				r.tap(out, arrived)
			}
		}
	}
	l.scratch = out[:0]
}

// collidesLocked reports whether [s, e) overlaps another node's
// transmission.
func (l *Line) collidesLocked(tx *transmission, s, e time.Time) bool {
	for _, o := range l.txs {
		if o.node == tx.node || o.node.silent.Load() {
			continue
		}
		if s.Before(o.end) && o.start.Before(e) {
			return true
		}
	}
	return false
}

// Close detaches the node, ending a Read or Write in progress.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.closed)
		n.rx.close()
		l := n.line
		l.mu.Lock()
		l.nodes = slices.DeleteFunc(l.nodes, func(x *Node) bool { return x == n })
		_, o := n.rx.counts()
		l.stats.Overruns += o
		l.mu.Unlock()
	})
	return nil
}

// frameState follows one sender's bytes to count frames and lines.
type frameState struct {
	state int // idle, in a native frame, in a line
	run   int
}

const (
	fsIdle = iota
	fsFrame
	fsLine
)

func (l *Line) countFrameLocked(n *Node, c byte) {
	f := &n.frame
	switch f.state {
	case fsIdle:
		switch c {
		case 0x00:
			f.state, f.run = fsFrame, 0
		case '\n':
		default:
			f.state, f.run = fsLine, 1
		}
	case fsFrame:
		if c == 0x00 {
			if f.run > 0 {
				l.stats.Frames++
				f.state = fsIdle
			}
			f.run = 0
			return
		}
		f.run++
	case fsLine:
		switch c {
		case '\n':
			l.stats.Lines++
			f.state, f.run = fsIdle, 0
		case 0x00:
			f.state, f.run = fsFrame, 0
		default:
			f.run++
		}
	}
}
