// Package stream is the receive side of a host link on UART or RS485: it
// takes the bytes a transport delivers, keeps them in a bounded receive
// buffer, and cuts them into native frames and JSON lines.
//
// # What arrives
//
//	0x00 COBS(addr seq type payload crc16) 0x00   a native frame
//	[@addr ][#tag ]...\n                          a JSON line
//
// A frame opens at a zero byte and closes at the next one; the bytes
// between are COBS-stuffed. Zero bytes in a row are only delimiters (an
// empty frame is not a frame). A JSON line starts with '@', '#', '!', a
// capital letter or a digit and ends at a line feed; a line feed or a
// carriage return where an item could start is an empty line and skipped.
// Any other byte where an item could start is garbage: the receiver skips
// to the next zero byte or line feed and starts again from there.
//
// In Auto mode both kinds mix: after a frame closes, the next byte decides
// what follows, so each frame carries its own opening zero, and a zero byte
// inside a JSON line abandons the line and opens a frame. FramesOnly is
// plain COBS framing (a closing zero also opens the next frame; line feeds
// are data); LinesOnly never opens a frame (zero bytes are line data or
// garbage).
//
// # What comes out
//
// [Receiver.Next] returns one [Item] at a time: a [Frame] with its bytes
// unstuffed and its CRC-16 checked and removed (addr through payload), a
// [Line] without its line feed and carriage return, or a [TooLong] line
// (over Config.MaxLine bytes counting the line feed) carrying its first
// MaxLine-1 bytes, so that the link can answer 413 with the line's address
// and tag. Frames with bad COBS, a bad CRC or a length outside 5 to
// Config.MaxFrame bytes are dropped and counted.
//
// # Receive buffer
//
// [Receiver.Write] never blocks and never fails on a full buffer: it copies
// what fits into a ring of Config.BufferSize bytes (2 KB by default, as on
// the board) and drops the rest, counting an overrun. The item the lost
// bytes belonged to is thrown away as garbage when the reader reaches the
// gap, and the receiver resynchronises at the next delimiter after it.
// Bytes leave the ring only as Next consumes them, so a slow reader sees
// the same losses a busy board would.
package stream

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/holofleet/holofleet/bus/cobs"
	"github.com/holofleet/holofleet/bus/crc16"
	"github.com/holofleet/holofleet/bus/jsonline"
)

// Defaults of Config.
const (
	// DefaultBufferSize is the receive buffer of a board's link.
	DefaultBufferSize = 2048
	// DefaultMaxLine is the longest JSON line counting its line feed.
	DefaultMaxLine = jsonline.MaxLine
	// DefaultMaxFrame is the longest unstuffed frame: three header bytes,
	// a 48-byte payload and the CRC.
	DefaultMaxFrame = 3 + 48 + 2
	// MinFrame is the shortest unstuffed frame: header and CRC.
	MinFrame = 3 + 2
)

// Errors.
var (
	// ErrClosed is returned by Write and Next once the receiver is closed
	// (by Next only after the items already complete were taken).
	ErrClosed = errors.New("stream: receiver closed")
)

// Mode selects which protocols the receiver accepts.
type Mode uint8

// Modes.
const (
	Auto       Mode = iota // frames and JSON lines mixed
	FramesOnly             // native frames only
	LinesOnly              // JSON lines only
)

// Kind is the kind of an Item.
type Kind uint8

// Item kinds.
const (
	Frame   Kind = iota + 1 // an unstuffed frame with a good CRC, CRC removed
	Line                    // a JSON line, line feed and carriage return removed
	TooLong                 // the first MaxLine-1 bytes of a line that was too long
)

func (k Kind) String() string {
	switch k {
	case Frame:
		return "frame"
	case Line:
		return "line"
	case TooLong:
		return "too-long"
	}
	return "none"
}

// Item is one frame or line. Data belongs to the receiver and stays valid
// until the next call to Next; copy it to keep it.
type Item struct {
	Kind Kind
	Data []byte
}

// Config sets up a Receiver; zero fields take the defaults.
type Config struct {
	Mode       Mode
	BufferSize int // receive buffer in bytes; default 2048
	MaxLine    int // longest line counting its line feed; default 1024
	MaxFrame   int // longest unstuffed frame including its CRC; default 53
}

// Stats is a snapshot of a receiver's counters.
type Stats struct {
	Bytes        uint64 // bytes given to Write, kept or dropped
	Frames       uint64 // frames returned
	Lines        uint64 // lines returned (not counting TooLong)
	TooLong      uint64 // lines over MaxLine, returned as TooLong
	BadCRC       uint64 // frames dropped for their CRC
	BadCOBS      uint64 // frames dropped because they do not unstuff
	BadLength    uint64 // frames dropped for being too short or too long
	GarbageBytes uint64 // bytes skipped, including parts of items cut by an overrun
	GarbageSkips uint64 // times the receiver skipped to resynchronise
	Overruns     uint64 // times bytes were dropped on a full buffer
	OverrunBytes uint64 // bytes dropped on a full buffer
}

type counters struct {
	bytes, frames, lines, tooLong, badCRC, badCOBS, badLength,
	garbageBytes, garbageSkips, overruns, overrunBytes atomic.Uint64
}

// Receiver is a link's receive buffer and item splitter. Write may be
// called from any goroutine and never blocks; Next is meant for one reader
// (calls are serialised). Create it with New.
type Receiver struct {
	size uint64
	buf  []byte
	gap  []byte // gap[i] is 1 when bytes were lost just before buf[i]

	head atomic.Uint64 // next byte to read; advanced by the reader only
	tail atomic.Uint64 // next byte to write; advanced by writers only

	wmu  sync.Mutex // serialises writers
	lost bool       // guarded by wmu: bytes were dropped after the last stored byte

	rmu sync.Mutex // serialises readers
	p   parser     // guarded by rmu

	notify    chan struct{} // capacity 1: bytes arrived
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	closed    atomic.Bool

	c counters
}

// New returns a receiver set up by cfg.
func New(cfg Config) *Receiver {
	if cfg.BufferSize <= 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	if cfg.MaxLine <= 1 {
		cfg.MaxLine = DefaultMaxLine
	}
	if cfg.MaxFrame < MinFrame {
		cfg.MaxFrame = DefaultMaxFrame
	}
	r := &Receiver{
		size:   uint64(cfg.BufferSize),
		buf:    make([]byte, cfg.BufferSize),
		gap:    make([]byte, cfg.BufferSize),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	r.p.init(cfg, &r.c)
	return r
}

// Write copies p into the receive buffer, dropping what does not fit. It
// never blocks on the reader and reports len(p) written unless the
// receiver is closed.
func (r *Receiver) Write(p []byte) (int, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	r.c.bytes.Add(uint64(len(p)))
	r.wmu.Lock()
	tail := r.tail.Load()
	free := r.size - (tail - r.head.Load())
	n := uint64(len(p))
	if n > free {
		n = free
	}
	if n > 0 {
		i := tail % r.size
		if r.lost {
			r.gap[i] = 1
			r.lost = false
		}
		c := copy(r.buf[i:], p[:n])
		copy(r.buf, p[c:n])
		r.tail.Store(tail + n)
	}
	if dropped := uint64(len(p)) - n; dropped > 0 {
		r.c.overrunBytes.Add(dropped)
		if !r.lost {
			r.c.overruns.Add(1)
			r.lost = true
		}
	}
	r.wmu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Buffered returns the number of bytes waiting in the receive buffer.
func (r *Receiver) Buffered() int {
	return int(r.tail.Load() - r.head.Load())
}

// Next returns the next complete item, waiting for one until ctx is done
// or the receiver is closed. After Close it still returns the items that
// were complete, then ErrClosed.
func (r *Receiver) Next(ctx context.Context) (Item, error) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	for {
		if it, ok := r.pull(); ok {
			return it, nil
		}
		select {
		case <-r.notify:
		case <-ctx.Done():
			return Item{}, ctx.Err()
		case <-r.done:
			if it, ok := r.pull(); ok {
				return it, nil
			}
			return Item{}, ErrClosed
		}
	}
}

// pull feeds buffered bytes to the parser until it completes an item.
// The caller holds rmu.
func (r *Receiver) pull() (Item, bool) {
	head := r.head.Load()
	tail := r.tail.Load()
	for head < tail {
		i := head % r.size
		n := tail - head
		if n > r.size-i {
			n = r.size - i
		}
		seg, gaps := r.buf[i:i+n], r.gap[i:i+n]
		used, ok := r.p.feed(seg, gaps)
		head += uint64(used)
		r.head.Store(head)
		if ok {
			return Item{Kind: r.p.kind, Data: r.p.out}, true
		}
	}
	return Item{}, false
}

// Close stops the receiver: Write fails from now on and Next fails once
// the complete items are taken. It is safe to call more than once.
func (r *Receiver) Close() error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		close(r.done)
	})
	return nil
}

// Stats returns a snapshot of the counters.
func (r *Receiver) Stats() Stats {
	c := &r.c
	return Stats{
		Bytes:        c.bytes.Load(),
		Frames:       c.frames.Load(),
		Lines:        c.lines.Load(),
		TooLong:      c.tooLong.Load(),
		BadCRC:       c.badCRC.Load(),
		BadCOBS:      c.badCOBS.Load(),
		BadLength:    c.badLength.Load(),
		GarbageBytes: c.garbageBytes.Load(),
		GarbageSkips: c.garbageSkips.Load(),
		Overruns:     c.overruns.Load(),
		OverrunBytes: c.overrunBytes.Load(),
	}
}

// Pump copies src into the receiver until src fails, the receiver is
// closed or ctx is done. It returns nil at io.EOF. ctx is checked between
// reads: to stop a Read that blocks, close the transport.
func (r *Receiver) Pump(ctx context.Context, src io.Reader) error {
	buf := make([]byte, 512)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := r.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Parser states.
type state uint8

const (
	stIdle  state = iota // between items
	stFrame              // after an opening zero
	stLine               // inside a line
	stLong               // inside a line that is already too long
	stSkip               // skipping garbage to the next delimiter
)

// parser cuts bytes into items. It is owned by the reader.
type parser struct {
	mode     Mode
	st       state
	acc      []byte // stuffed frame or line so far
	long     uint64 // bytes of a too-long line so far
	dec      []byte // unstuffed frame
	maxLine  int    // longest line content, line feed excluded
	maxEnc   int    // longest stuffed frame
	maxFrame int
	c        *counters

	kind Kind   // of the last item completed
	out  []byte // its data
}

func (p *parser) init(cfg Config, c *counters) {
	p.mode = cfg.Mode
	p.maxLine = cfg.MaxLine - 1
	p.maxFrame = cfg.MaxFrame
	p.maxEnc = cobs.MaxEncodedLen(cfg.MaxFrame)
	p.acc = make([]byte, 0, max(p.maxLine, p.maxEnc))
	p.dec = make([]byte, 0, p.maxEnc)
	p.c = c
}

func lineStart(b byte) bool {
	return b == '@' || b == '#' || b == '!' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// feed consumes bytes of seg until an item completes, and returns how many
// it used. gaps marks bytes that follow lost ones.
func (p *parser) feed(seg, gaps []byte) (int, bool) {
	for i, b := range seg {
		if gaps[i] != 0 {
			gaps[i] = 0
			p.cut()
		}
		if p.step(b) {
			return i + 1, true
		}
	}
	return len(seg), false
}

// cut throws away the item in progress because bytes of it were lost, and
// skips to the next delimiter.
func (p *parser) cut() {
	switch p.st {
	case stFrame, stLine:
		p.c.garbageBytes.Add(uint64(len(p.acc)))
	case stLong:
		p.c.garbageBytes.Add(p.long)
	case stSkip:
		return
	}
	p.acc = p.acc[:0]
	p.st = stSkip
	p.c.garbageSkips.Add(1)
}

// skip starts skipping at garbage byte b.
func (p *parser) skip() {
	p.st = stSkip
	p.c.garbageSkips.Add(1)
	p.c.garbageBytes.Add(1)
}

func (p *parser) openFrame() {
	p.st = stFrame
	p.acc = p.acc[:0]
}

// step consumes one byte and reports whether an item is complete.
func (p *parser) step(b byte) bool {
	switch p.st {
	case stIdle:
		switch {
		case b == 0 && p.mode != LinesOnly:
			p.openFrame()
		case (b == '\n' || b == '\r') && p.mode != FramesOnly:
			// an empty line
		case lineStart(b) && p.mode != FramesOnly:
			p.st = stLine
			p.acc = append(p.acc[:0], b)
		default:
			p.skip()
		}
	case stFrame:
		if b == 0 {
			if len(p.acc) == 0 {
				return false // zeros in a row are one delimiter
			}
			ok := p.frame()
			if p.mode == FramesOnly {
				p.openFrame()
			} else {
				p.st = stIdle
			}
			return ok
		}
		if len(p.acc) == p.maxEnc {
			p.c.badLength.Add(1)
			p.c.garbageBytes.Add(uint64(len(p.acc)))
			p.acc = p.acc[:0]
			p.skip()
			return false
		}
		p.acc = append(p.acc, b)
	case stLine:
		switch {
		case b == '\n':
			p.st = stIdle
			line := p.acc
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			p.kind, p.out = Line, line
			p.c.lines.Add(1)
			return true
		case b == 0 && p.mode == Auto:
			p.c.garbageBytes.Add(uint64(len(p.acc)))
			p.c.garbageSkips.Add(1)
			p.openFrame()
		case len(p.acc) == p.maxLine:
			p.st = stLong
			p.long = uint64(len(p.acc)) + 1
		default:
			p.acc = append(p.acc, b)
		}
	case stLong:
		switch {
		case b == '\n':
			p.st = stIdle
			p.kind, p.out = TooLong, p.acc
			p.c.tooLong.Add(1)
			return true
		case b == 0 && p.mode == Auto:
			p.c.garbageBytes.Add(p.long)
			p.c.garbageSkips.Add(1)
			p.openFrame()
		default:
			p.long++
		}
	case stSkip:
		switch {
		case b == 0 && p.mode != LinesOnly:
			p.openFrame()
		case b == '\n' && p.mode != FramesOnly:
			p.st = stIdle
		default:
			p.c.garbageBytes.Add(1)
		}
	}
	return false
}

// frame unstuffs and checks the frame in acc.
func (p *parser) frame() bool {
	dec, err := cobs.AppendDecode(p.dec[:0], p.acc)
	p.acc = p.acc[:0]
	switch {
	case err != nil:
		p.c.badCOBS.Add(1)
		return false
	case len(dec) < MinFrame || len(dec) > p.maxFrame:
		p.c.badLength.Add(1)
		return false
	case !crc16.Valid(dec):
		p.c.badCRC.Add(1)
		return false
	}
	p.dec = dec
	p.kind, p.out = Frame, dec[:len(dec)-2]
	p.c.frames.Add(1)
	return true
}
