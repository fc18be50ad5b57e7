package gc9a01

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"sync"
	"time"

	"periph.io/x/conn/v3"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"

	"github.com/holofleet/holofleet/firmware/hal"
)

// Errors of the driver.
var (
	// ErrSize: a picture that is not the panel's size.
	ErrSize = errors.New("gc9a01: wrong picture size")
	// ErrRange: a backlight percent outside 0-100, or an option out of
	// range (a clock above MaxHz, a window outside the controller's RAM).
	ErrRange = errors.New("gc9a01: out of range")
	// ErrBus: the SPI transfer or a pin failed; the panel may show a
	// partial frame, and the next frame is sent whole.
	ErrBus = errors.New("gc9a01: bus error")
)

// Defaults and limits.
const (
	// DefaultHz is the SPI clock when Options.Hz is 0: what the GC9A01
	// takes for writes on short wires (its datasheet's write cycle is
	// 100 ns, yet 40 MHz runs on modules with leads under 10 cm).
	DefaultHz = 40 * physic.MegaHertz
	// MaxHz is the highest clock accepted (the ST7789's write cycle is
	// 16 ns; beyond 62.5 MHz no wiring holds).
	MaxHz = 62500 * physic.KiloHertz
	// DefaultMaxTx is the transfer size used when the SPI port does not
	// tell its own (spidev's default bufsiz).
	DefaultMaxTx = 4096
	// MergeGap joins two runs of changed rows fewer than this many rows
	// apart into one window: a window costs three commands and their
	// parameters (about 20 bytes and six transfers), which a gap of a few
	// short rows costs too.
	MergeGap = 4
	// BacklightHz is the backlight's PWM frequency: above what the eye
	// sees flicker, low enough for any PWM a pin offers.
	BacklightHz = 1 * physic.KiloHertz
	// ResetPulse and ResetWait: RST held low, then the wait after it.
	ResetPulse = 10 * time.Millisecond
	ResetWait  = 120 * time.Millisecond
)

// Options configure the panel.
type Options struct {
	Variant Variant
	// Width and Height of the glass in pixels (240x240 when 0).
	Width, Height int
	// XOffset and YOffset place the glass in the controller's RAM (an
	// ST7789 has 240x320 of RAM; a 240x240 glass turned 180 degrees sits
	// at y 80).
	XOffset, YOffset int
	// Round masks the pixels outside the inscribed circle (the GC9A01's
	// glass; set it for round ST7789 modules too).
	Round bool
	// Hz is the SPI clock (DefaultHz when 0).
	Hz physic.Frequency
	// Mode is the SPI mode (mode 0 when 0; some ST7789 modules without a
	// chip-select pin want mode 3).
	Mode spi.Mode
	// MaxTx bounds one SPI transfer; 0 asks the port (conn.Limits) and
	// falls back to DefaultMaxTx.
	MaxTx int
	// Sleep waits the controller's delays (time.Sleep when nil; tests
	// pass a function that returns at once).
	Sleep func(time.Duration)
}

// Dev is one panel. It implements hal.Display. Its methods are safe for
// concurrent use.
type Dev struct {
	o     Options
	c     spi.Conn
	dc    gpio.PinOut
	rst   gpio.PinOut
	bl    gpio.PinOut
	maxTx int
	// spans[y] is the visible column range [lo, hi) of row y.
	spans [][2]int

	mu        sync.Mutex
	cur, next []byte // RGB565 big-endian frames: last sent, being built
	valid     bool   // cur is what the panel's RAM holds
	powered   bool
	backlight int
	pwm       bool // the backlight pin took PWM
	tx        []byte
	stats     Stats
}

// Stats count what went over the bus since start.
type Stats struct {
	Frames  int   // Show and Fill calls that reached the bus
	Windows int   // address windows written
	Pixels  int64 // pixels written
	Bytes   int64 // bytes clocked (commands, parameters, pixels)
	Txs     int64 // SPI transfers
}

var _ hal.Display = (*Dev)(nil)

// New connects to the panel on port, resets it (with rst, or a software
// reset when rst is nil), runs the variant's init sequence, clears the
// glass to black and turns the backlight full on. dc is required; bl may
// be nil (a backlight wired to the supply).
func New(port spi.Port, dc, rst, bl gpio.PinOut, o Options) (*Dev, error) {
	if o.Width == 0 {
		o.Width = hal.ScreenWidth
	}
	if o.Height == 0 {
		o.Height = hal.ScreenHeight
	}
	if o.Hz == 0 {
		o.Hz = DefaultHz
	}
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	switch {
	case port == nil || dc == nil:
		return nil, fmt.Errorf("gc9a01: an SPI port and a DC pin are required: %w", ErrRange)
	case o.Hz < 0 || o.Hz > MaxHz:
		return nil, fmt.Errorf("gc9a01: clock %s above %s: %w", o.Hz, MaxHz, ErrRange)
	case o.Width <= 0 || o.Height <= 0 || o.XOffset < 0 || o.YOffset < 0 || o.XOffset+o.Width > 320 || o.YOffset+o.Height > 320:
		return nil, fmt.Errorf("gc9a01: window %dx%d at (%d,%d) outside the controller's RAM: %w", o.Width, o.Height, o.XOffset, o.YOffset, ErrRange)
	}
	c, err := port.Connect(o.Hz, o.Mode, 8)
	if err != nil {
		return nil, fmt.Errorf("gc9a01: connect: %w: %w", ErrBus, err)
	}
	d := &Dev{o: o, c: c, dc: dc, rst: rst, bl: bl, maxTx: o.MaxTx, powered: true, backlight: 100}
	if d.maxTx <= 0 {
		d.maxTx = DefaultMaxTx
		for _, v := range []any{c, port} {
			if l, ok := v.(conn.Limits); ok && l.MaxTxSize() > 0 {
				d.maxTx = l.MaxTxSize()
				break
			}
		}
	}
	d.spans = masks(o.Width, o.Height, o.Round)
	n := o.Width * o.Height * 2
	d.cur, d.next = make([]byte, n), make([]byte, n)
	d.tx = make([]byte, 0, d.maxTx)
	if err := d.reset(); err != nil {
		return nil, err
	}
	if err := d.sendLocked(true); err != nil { // black, whole
		return nil, err
	}
	if err := d.applyBacklight(); err != nil {
		return nil, err
	}
	return d, nil
}

// masks returns each row's visible column range: all of it on a square
// glass; on a round one, the pixels whose centre lies inside the circle
// inscribed in the panel (the same test as the simulator's, in half
// pixels so it is exact in integers).
func masks(w, h int, round bool) [][2]int {
	spans := make([][2]int, h)
	for y := range h {
		spans[y] = [2]int{0, w}
		if !round {
			continue
		}
		r := min(w, h)
		dy := 2*y + 1 - h
		lo, hi := w, 0
		for x := range w {
			dx := 2*x + 1 - w
			if dx*dx+dy*dy <= r*r {
				lo, hi = min(lo, x), max(hi, x+1)
			}
		}
		if lo >= hi {
			lo, hi = 0, 0
		}
		spans[y] = [2]int{lo, hi}
	}
	return spans
}

// Visible reports whether pixel (x, y) is on the glass.
func (d *Dev) Visible(x, y int) bool {
	if y < 0 || y >= d.o.Height {
		return false
	}
	s := d.spans[y]
	return x >= s[0] && x < s[1]
}

// reset pulses RST (or sends a software reset) and runs the init
// sequence.
func (d *Dev) reset() error {
	if d.rst != nil {
		if err := d.rst.Out(gpio.High); err != nil {
			return fmt.Errorf("gc9a01: reset pin: %w: %w", ErrBus, err)
		}
		if err := d.rst.Out(gpio.Low); err != nil {
			return fmt.Errorf("gc9a01: reset pin: %w: %w", ErrBus, err)
		}
		d.o.Sleep(ResetPulse)
		if err := d.rst.Out(gpio.High); err != nil {
			return fmt.Errorf("gc9a01: reset pin: %w: %w", ErrBus, err)
		}
		d.o.Sleep(ResetWait)
	} else if d.o.Variant == GC9A01 {
		// The ST7789's sequence begins with its own software reset.
		if err := d.command(CmdSWReset); err != nil {
			return err
		}
		d.o.Sleep(ResetWait)
	}
	for _, s := range initSequence(d.o.Variant) {
		if err := d.command(s.cmd, s.data...); err != nil {
			return err
		}
		if s.delay > 0 {
			d.o.Sleep(s.delay)
		}
	}
	d.valid = false
	return nil
}

// command sends one command byte (DC low), then its parameters (DC high).
func (d *Dev) command(cmd byte, params ...byte) error {
	if err := d.dc.Out(gpio.Low); err != nil {
		return fmt.Errorf("gc9a01: DC pin: %w: %w", ErrBus, err)
	}
	if err := d.txOne([]byte{cmd}); err != nil {
		return err
	}
	if len(params) == 0 {
		return nil
	}
	return d.data(params)
}

// data sends bytes with DC high, cut to the largest transfer.
func (d *Dev) data(b []byte) error {
	if err := d.dc.Out(gpio.High); err != nil {
		return fmt.Errorf("gc9a01: DC pin: %w: %w", ErrBus, err)
	}
	for len(b) > 0 {
		n := min(len(b), d.maxTx)
		if err := d.txOne(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (d *Dev) txOne(b []byte) error {
	if err := d.c.Tx(b, nil); err != nil {
		d.valid = false
		return fmt.Errorf("gc9a01: spi: %w: %w", ErrBus, err)
	}
	d.stats.Bytes += int64(len(b))
	d.stats.Txs++
	return nil
}

// Show sends the picture; only the rows and columns that changed since
// the last frame go over the bus.
func (d *Dev) Show(img *image.RGBA) error {
	if img == nil || img.Rect.Dx() != d.o.Width || img.Rect.Dy() != d.o.Height {
		return fmt.Errorf("show: want a %dx%d image: %w", d.o.Width, d.o.Height, ErrSize)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.convert(img)
	return d.sendLocked(false)
}

// Fill shows one colour over the whole glass.
func (d *Dev) Fill(c color.RGBA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	hi, lo := rgb565(c.R, c.G, c.B)
	w := d.o.Width
	for y, s := range d.spans {
		row := d.next[2*y*w : 2*(y+1)*w]
		clear(row)
		for x := s[0]; x < s[1]; x++ {
			row[2*x], row[2*x+1] = hi, lo
		}
	}
	return d.sendLocked(false)
}

// rgb565 packs 8-bit channels into the panel's two bytes, high first.
func rgb565(r, g, b uint8) (hi, lo byte) {
	v := uint16(r>>3)<<11 | uint16(g>>2)<<5 | uint16(b>>3)
	return byte(v >> 8), byte(v)
}

// Expand widens an RGB565 pixel to 8 bits a channel, repeating the top
// bits into the bottom ones so full scale stays full scale.
func Expand(hi, lo byte) color.RGBA {
	v := uint16(hi)<<8 | uint16(lo)
	r, g, b := uint8(v>>11), uint8(v>>5)&0x3F, uint8(v)&0x1F
	return color.RGBA{r<<3 | r>>2, g<<2 | g>>4, b<<3 | b>>2, 0xFF}
}

// convert writes img into d.next as RGB565, black outside the glass.
func (d *Dev) convert(img *image.RGBA) {
	w := d.o.Width
	for y, s := range d.spans {
		row := d.next[2*y*w : 2*(y+1)*w]
		clear(row[:2*s[0]])
		clear(row[2*s[1]:])
		src := img.Pix[img.PixOffset(img.Rect.Min.X+s[0], img.Rect.Min.Y+y):]
		for x := s[0]; x < s[1]; x++ {
			i := 4 * (x - s[0])
			v := uint16(src[i]>>3)<<11 | uint16(src[i+1]>>2)<<5 | uint16(src[i+2]>>3)
			row[2*x], row[2*x+1] = byte(v>>8), byte(v)
		}
	}
}

// sendLocked sends the windows of d.next that differ from d.cur (all of
// it when whole, or when the panel's RAM is unknown), then makes d.next
// the current frame. d.mu is held.
func (d *Dev) sendLocked(whole bool) error {
	windows := d.windows(whole || !d.valid)
	for _, r := range windows {
		if err := d.sendWindow(r); err != nil {
			d.valid = false
			return err
		}
	}
	d.cur, d.next = d.next, d.cur
	copy(d.next, d.cur)
	d.valid = true
	if len(windows) > 0 {
		d.stats.Frames++
	}
	return nil
}

// windows lists the rectangles to send: each run of changed rows (runs
// fewer than MergeGap rows apart joined) as wide as its changed columns.
func (d *Dev) windows(whole bool) []image.Rectangle {
	w, h := d.o.Width, d.o.Height
	if whole {
		return []image.Rectangle{image.Rect(0, 0, w, h)}
	}
	var out []image.Rectangle
	var cur image.Rectangle
	open := false
	lastChanged := -MergeGap - 1
	for y := range h {
		a, b := d.cur[2*y*w:2*(y+1)*w], d.next[2*y*w:2*(y+1)*w]
		if bytes.Equal(a, b) {
			continue
		}
		lo, hi := 0, w
		for lo < w && a[2*lo] == b[2*lo] && a[2*lo+1] == b[2*lo+1] {
			lo++
		}
		for hi > lo && a[2*hi-2] == b[2*hi-2] && a[2*hi-1] == b[2*hi-1] {
			hi--
		}
		row := image.Rect(lo, y, hi, y+1)
		switch {
		case open && y-lastChanged <= MergeGap:
			cur = cur.Union(row)
		default:
			if open {
				out = append(out, cur)
			}
			cur, open = row, true
		}
		lastChanged = y
	}
	if open {
		out = append(out, cur)
	}
	return out
}

// sendWindow writes one rectangle of d.next: the address window, then its
// pixels row by row, gathered into transfers of at most maxTx bytes.
func (d *Dev) sendWindow(r image.Rectangle) error {
	x0, x1 := r.Min.X+d.o.XOffset, r.Max.X-1+d.o.XOffset
	y0, y1 := r.Min.Y+d.o.YOffset, r.Max.Y-1+d.o.YOffset
	if err := d.command(CmdCASet, byte(x0>>8), byte(x0), byte(x1>>8), byte(x1)); err != nil {
		return err
	}
	if err := d.command(CmdRASet, byte(y0>>8), byte(y0), byte(y1>>8), byte(y1)); err != nil {
		return err
	}
	if err := d.command(CmdRAMWr); err != nil {
		return err
	}
	d.stats.Windows++
	d.stats.Pixels += int64(r.Dx() * r.Dy())
	w := d.o.Width
	if r.Min.X == 0 && r.Max.X == w {
		// Whole rows are one run of memory: no copy.
		return d.data(d.next[2*r.Min.Y*w : 2*r.Max.Y*w])
	}
	if err := d.dc.Out(gpio.High); err != nil {
		return fmt.Errorf("gc9a01: DC pin: %w: %w", ErrBus, err)
	}
	buf := d.tx[:0]
	for y := r.Min.Y; y < r.Max.Y; y++ {
		row := d.next[2*(y*w+r.Min.X) : 2*(y*w+r.Max.X)]
		for len(row) > 0 {
			n := min(len(row), d.maxTx-len(buf))
			buf = append(buf, row[:n]...)
			row = row[n:]
			if len(buf) == d.maxTx {
				if err := d.txOne(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	if len(buf) > 0 {
		return d.txOne(buf)
	}
	return nil
}

// SetPower wakes (SLPOUT, DISPON) or sleeps (DISPOFF, SLPIN) the panel;
// the backlight follows. The panel keeps its RAM while asleep.
func (d *Dev) SetPower(on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on == d.powered {
		return nil
	}
	d.powered = on
	if on {
		if err := d.command(CmdSleepOut); err != nil {
			return err
		}
		d.o.Sleep(120 * time.Millisecond)
		if err := d.command(CmdDispOn); err != nil {
			return err
		}
	} else {
		if err := d.command(CmdDispOff); err != nil {
			return err
		}
		if err := d.command(CmdSleepIn); err != nil {
			return err
		}
		d.o.Sleep(5 * time.Millisecond)
	}
	return d.applyBacklight()
}

// SetBacklight sets the backlight in percent, 0-100.
func (d *Dev) SetBacklight(percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("backlight %d%%: %w", percent, ErrRange)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.backlight = percent
	return d.applyBacklight()
}

// applyBacklight drives the pin for the backlight level and power. d.mu
// is held (or d is not shared yet).
func (d *Dev) applyBacklight() error {
	if d.bl == nil {
		return nil
	}
	level := d.backlight
	if !d.powered {
		level = 0
	}
	var err error
	switch level {
	case 0:
		err = d.bl.Out(gpio.Low)
	case 100:
		err = d.bl.Out(gpio.High)
	default:
		duty := gpio.Duty(int64(gpio.DutyMax) * int64(level) / 100)
		if err = d.bl.PWM(duty, BacklightHz); err == nil {
			d.pwm = true
		} else {
			// No PWM on this pin: anything above 0 is full on.
			err = d.bl.Out(gpio.High)
		}
	}
	if err != nil {
		return fmt.Errorf("gc9a01: backlight pin: %w: %w", ErrBus, err)
	}
	return nil
}

// Snapshot returns what the glass shows: the frame last sent, widened to
// 8 bits a channel, scaled by the backlight, black outside the glass and
// all black while asleep.
func (d *Dev) Snapshot() *image.RGBA {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := image.NewRGBA(image.Rect(0, 0, d.o.Width, d.o.Height))
	level := d.backlight
	if !d.powered {
		level = 0
	}
	for y, s := range d.spans {
		for x := range d.o.Width {
			i := out.PixOffset(x, y)
			out.Pix[i+3] = 0xFF
			if level == 0 || x < s[0] || x >= s[1] {
				continue
			}
			j := 2 * (y*d.o.Width + x)
			c := Expand(d.cur[j], d.cur[j+1])
			out.Pix[i] = uint8((int(c.R)*level + 50) / 100)
			out.Pix[i+1] = uint8((int(c.G)*level + 50) / 100)
			out.Pix[i+2] = uint8((int(c.B)*level + 50) / 100)
		}
	}
	return out
}

// Stats returns the bus counters.
func (d *Dev) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// MaxTx is the largest transfer the driver makes.
func (d *Dev) MaxTx() int { return d.maxTx }

// BacklightPWM reports whether the backlight pin took PWM (false until a
// level between 0 and 100 was set, and on pins without PWM).
func (d *Dev) BacklightPWM() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pwm
}

// Reset resets the panel and sends the current frame whole again (after
// a bus error, or when the panel was powered apart from the board).
func (d *Dev) Reset() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.reset(); err != nil {
		return err
	}
	copy(d.next, d.cur)
	if err := d.sendLocked(true); err != nil {
		return err
	}
	if !d.powered { // the init sequence woke it
		if err := d.command(CmdDispOff); err != nil {
			return err
		}
		if err := d.command(CmdSleepIn); err != nil {
			return err
		}
	}
	return d.applyBacklight()
}
