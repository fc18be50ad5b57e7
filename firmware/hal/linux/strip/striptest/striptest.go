// Package striptest is a fake SPI port for LED strips and decoders that
// turn the bytes a strip driver sent back into colours, so a test checks
// a strip by what its LEDs would show.
package striptest

import (
	"errors"
	"fmt"
	"image/color"
	"sync"

	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"
	"periph.io/x/conn/v3/spi/spitest"
)

// Errors of the decoders.
var (
	// ErrEncoding: bytes that are not a valid frame of the chip.
	ErrEncoding = errors.New("striptest: not a valid LED frame")
)

// Bus opens ports that record every transfer with periph's
// spitest.Record; each Open is a new connection, as a real port reopened.
type Bus struct {
	// Limit is the largest transfer a port tells (conn.Limits); 0 is no
	// limit (told as 1 MiB: nrzled takes a told 0 for a port too small).
	Limit int
	// Fail makes Open fail.
	Fail error

	mu    sync.Mutex
	ports []*Port
}

// Port is one opened port.
type Port struct {
	*spitest.Record
	limit  int
	Hz     physic.Frequency
	Mode   spi.Mode
	closed bool
}

// Connect implements spi.Port, noting the clock and mode.
func (p *Port) Connect(f physic.Frequency, m spi.Mode, bits int) (spi.Conn, error) {
	p.Hz, p.Mode = f, m
	return p.Record.Connect(f, m, bits)
}

// MaxTxSize implements conn.Limits.
func (p *Port) MaxTxSize() int { return p.limit }

// Close implements spi.PortCloser.
func (p *Port) Close() error { p.closed = true; return nil }

// Open is a strip.Opener.
func (b *Bus) Open() (spi.PortCloser, error) {
	if b.Fail != nil {
		return nil, b.Fail
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &Port{Record: &spitest.Record{}, limit: b.Limit}
	if p.limit == 0 {
		p.limit = 1 << 20
	}
	b.ports = append(b.ports, p)
	return p, nil
}

// Current is the last port opened (nil before any).
func (b *Bus) Current() *Port {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ports) == 0 {
		return nil
	}
	return b.ports[len(b.ports)-1]
}

// Last returns the bytes of the last transfer on the current port.
func (b *Bus) Last() []byte {
	p := b.Current()
	if p == nil {
		return nil
	}
	p.Lock()
	defer p.Unlock()
	if len(p.Ops) == 0 {
		return nil
	}
	return p.Ops[len(p.Ops)-1].W
}

// DecodeWS2812 reads a frame nrzled sent over SPI: three latch bytes of
// zero, then four SPI bits per data bit (1000 for a zero, 1110 for a one),
// 24 data bits an LED in green, red, blue order, most significant first,
// then three latch bytes.
func DecodeWS2812(b []byte) ([]color.RGBA, error) {
	if len(b) < 6 || (len(b)-6)%12 != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not 6 + 12 an LED", ErrEncoding, len(b))
	}
	for _, z := range append(b[:3:3], b[len(b)-3:]...) {
		if z != 0 {
			return nil, fmt.Errorf("%w: latch bytes are not zero", ErrEncoding)
		}
	}
	body := b[3 : len(b)-3]
	out := make([]color.RGBA, len(body)/12)
	for i := range out {
		var ch [3]byte
		for c := range 3 {
			var v byte
			for k := range 4 {
				s := body[12*i+4*c+k]
				for _, nib := range []byte{s >> 4, s & 0xF} {
					switch nib {
					case 0x8:
						v <<= 1
					case 0xE:
						v = v<<1 | 1
					default:
						return nil, fmt.Errorf("%w: LED %d: symbol %04b is neither 1000 nor 1110", ErrEncoding, i, nib)
					}
				}
			}
			ch[c] = v
		}
		out[i] = color.RGBA{R: ch[1], G: ch[0], B: ch[2], A: 0xFF}
	}
	return out, nil
}

// DecodeAPA102 reads a frame apa102 sent for n LEDs: a start frame of
// four zero bytes, then per LED 0b111 and five bits of global brightness,
// blue, green, red, then end bytes of 0xFF. Colours are scaled by the
// global brightness (31 is full).
func DecodeAPA102(b []byte, n int) ([]color.RGBA, error) {
	if n < 0 || len(b) < 4+4*n {
		return nil, fmt.Errorf("%w: %d bytes for %d LEDs", ErrEncoding, len(b), n)
	}
	if b[0]|b[1]|b[2]|b[3] != 0 {
		return nil, fmt.Errorf("%w: start frame is not zero", ErrEncoding)
	}
	out := make([]color.RGBA, n)
	for i := range out {
		f := b[4+4*i : 8+4*i]
		if f[0]&0xE0 != 0xE0 {
			return nil, fmt.Errorf("%w: LED %d: header byte %#02x", ErrEncoding, i, f[0])
		}
		g := int(f[0] & 0x1F)
		scale := func(v byte) uint8 { return uint8((int(v)*g + 15) / 31) }
		out[i] = color.RGBA{R: scale(f[3]), G: scale(f[2]), B: scale(f[1]), A: 0xFF}
	}
	for _, e := range b[4+4*n:] {
		if e != 0xFF {
			return nil, fmt.Errorf("%w: end frame is not 0xFF", ErrEncoding)
		}
	}
	return out, nil
}
