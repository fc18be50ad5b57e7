// Package gc9a01test is a model of a GC9A01/ST7789 panel on the far side
// of a fake SPI bus, for tests without hardware. [Panel] is an spi.Port
// whose transfers a controller would see: it reads the DC pin at each
// transfer (a gpiotest.Pin the driver drives), decodes the DCS commands the
// driver sends (CASET, RASET, RAMWR, sleep and display on/off) into a
// 16-bit frame memory, and can log every transfer with its DC level, so a
// test checks a driver both byte for byte (the log against a golden file)
// and by what the glass would show (the frame memory).
package gc9a01test

import (
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"strings"
	"sync"
	"time"

	"periph.io/x/conn/v3"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"
)

// Op is one SPI transfer as the panel saw it.
type Op struct {
	Data bool // DC high: parameters or pixels; low: a command
	W    []byte
}

// Panel is a fake panel. Set DC before the driver connects. The zero
// value of the other fields is a 320x320-RAM controller that logs nothing.
type Panel struct {
	// DC is the data/command pin as the panel reads it.
	DC gpio.PinIn
	// Limit is what MaxTxSize reports (0: no limit told).
	Limit int
	// Log keeps every transfer in Ops when true.
	Log bool

	mu        sync.Mutex
	Hz        physic.Frequency // clock asked by Connect
	Mode      spi.Mode
	ops       []Op
	ram       [320 * 320]uint16
	cmd       byte
	params    []byte
	x0, x1    int
	y0, y1    int
	px, py    int
	writing   bool
	half      int // a pixel's high byte waiting for its low byte, or -1
	asleep    bool
	displayOn bool
	bytes     int64
	txs       int64
	cmds      map[byte]int
}

// Connect implements spi.Port.
func (p *Panel) Connect(f physic.Frequency, mode spi.Mode, bits int) (spi.Conn, error) {
	if bits != 8 {
		return nil, fmt.Errorf("gc9a01test: %d-bit words; the panel takes 8", bits)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Hz, p.Mode = f, mode
	p.half = -1
	return &panelConn{p}, nil
}

func (p *Panel) String() string { return "gc9a01test.Panel" }

// Close implements spi.PortCloser; it does nothing.
func (p *Panel) Close() error { return nil }

// LimitSpeed implements spi.PortCloser; it does nothing.
func (p *Panel) LimitSpeed(physic.Frequency) error { return nil }

// MaxTxSize implements conn.Limits.
func (p *Panel) MaxTxSize() int { return p.Limit }

type panelConn struct{ p *Panel }

func (c *panelConn) String() string       { return c.p.String() }
func (c *panelConn) Duplex() conn.Duplex  { return conn.Half }
func (c *panelConn) MaxTxSize() int       { return c.p.Limit }
func (c *panelConn) Tx(w, r []byte) error { return c.p.tx(w, r) }
func (c *panelConn) TxPackets([]spi.Packet) error {
	return fmt.Errorf("gc9a01test: TxPackets not supported")
}

var (
	_ spi.PortCloser = (*Panel)(nil)
	_ conn.Limits    = (*Panel)(nil)
)

func (p *Panel) tx(w, r []byte) error {
	if len(r) != 0 {
		return fmt.Errorf("gc9a01test: the panel has no MISO")
	}
	if p.Limit > 0 && len(w) > p.Limit {
		return fmt.Errorf("gc9a01test: transfer of %d bytes over the %d-byte limit", len(w), p.Limit)
	}
	data := p.DC != nil && p.DC.Read() == gpio.High
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes += int64(len(w))
	p.txs++
	if p.Log {
		p.ops = append(p.ops, Op{Data: data, W: append([]byte(nil), w...)})
	}
	if !data {
		for _, b := range w {
			p.command(b)
		}
		return nil
	}
	p.data(w)
	return nil
}

func (p *Panel) command(b byte) {
	if p.cmds == nil {
		p.cmds = map[byte]int{}
	}
	p.cmds[b]++
	p.cmd, p.params, p.writing, p.half = b, p.params[:0], false, -1
	switch b {
	case 0x01: // SWRESET
		p.asleep, p.displayOn = true, false
	case 0x10:
		p.asleep = true
	case 0x11:
		p.asleep = false
	case 0x28:
		p.displayOn = false
	case 0x29:
		p.displayOn = true
	case 0x2C:
		p.writing, p.px, p.py = true, p.x0, p.y0
	}
}

func (p *Panel) data(w []byte) {
	if !p.writing {
		p.params = append(p.params, w...)
		if len(p.params) == 4 {
			a, b := int(p.params[0])<<8|int(p.params[1]), int(p.params[2])<<8|int(p.params[3])
			switch p.cmd {
			case 0x2A:
				p.x0, p.x1 = a, b
			case 0x2B:
				p.y0, p.y1 = a, b
			}
		}
		return
	}
	for _, b := range w {
		if p.half < 0 {
			p.half = int(b)
			continue
		}
		v := uint16(p.half)<<8 | uint16(b)
		p.half = -1
		if p.px < 320 && p.py < 320 && p.py <= p.y1 {
			p.ram[p.py*320+p.px] = v
		}
		p.px++
		if p.px > p.x1 {
			p.px = p.x0
			p.py++
		}
	}
}

// Ops returns the transfers logged so far and forgets them.
func (p *Panel) Ops() []Op {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.ops
	p.ops = nil
	return out
}

// Bytes and Txs count the bytes and transfers since the panel was made.
func (p *Panel) Bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// Commands counts how often command b was sent.
func (p *Panel) Commands(b byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmds[b]
}

// On reports whether the panel shows its memory: awake and display on.
func (p *Panel) On() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.asleep && p.displayOn
}

// Frame returns w x h pixels of the frame memory from (x, y), widened to
// 8 bits a channel the same way as the driver's Expand.
func (p *Panel) Frame(x, y, w, h int) *image.RGBA {
	p.mu.Lock()
	defer p.mu.Unlock()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for j := range h {
		for i := range w {
			v := p.ram[(y+j)*320+x+i]
			r, g, b := uint8(v>>11), uint8(v>>5)&0x3F, uint8(v)&0x1F
			img.SetRGBA(i, j, color.RGBA{r<<3 | r>>2, g<<2 | g>>4, b<<3 | b>>2, 0xFF})
		}
	}
	return img
}

// WireTime is how long n bytes take on the wire at clock f (8 clocks a
// byte; the gaps between transfers are not counted).
func WireTime(n int64, f physic.Frequency) time.Duration {
	return time.Duration(float64(n*8) / float64(f) * float64(physic.Hertz) * float64(time.Second))
}

// Transcript writes ops one a line: "C 2a" for a command, "D 00 00 00 ef"
// for data; data longer than 64 bytes is written as its length and a
// FNV-1a hash, which keeps a golden file of a whole frame small.
func Transcript(ops []Op) string {
	var sb strings.Builder
	for _, op := range ops {
		tag := "C"
		if op.Data {
			tag = "D"
		}
		if len(op.W) > 64 {
			fmt.Fprintf(&sb, "%s len=%d fnv=%016x\n", tag, len(op.W), fnv(op.W))
			continue
		}
		fmt.Fprintf(&sb, "%s %s\n", tag, spaced(op.W))
	}
	return sb.String()
}

func spaced(b []byte) string {
	h := hex.EncodeToString(b)
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}

func fnv(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// ParseTranscript reads a transcript whose data lines are all written out
// in full (as an init sequence's are) back into ops.
func ParseTranscript(s string) ([]Op, error) {
	var ops []Op
	for n, line := range strings.Split(strings.TrimSpace(s), "\n") {
		tag, rest, _ := strings.Cut(line, " ")
		if tag != "C" && tag != "D" {
			return nil, fmt.Errorf("line %d: %q is neither C nor D", n+1, line)
		}
		b, err := hex.DecodeString(strings.ReplaceAll(rest, " ", ""))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		ops = append(ops, Op{Data: tag == "D", W: b})
	}
	return ops, nil
}
