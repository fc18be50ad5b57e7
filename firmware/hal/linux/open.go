package linux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/hal/linux/cst816s"
	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01"
	"github.com/holofleet/holofleet/firmware/hal/linux/servo"
	"github.com/holofleet/holofleet/firmware/hal/linux/strip"
	"github.com/holofleet/holofleet/firmware/hal/sim"
)

// Host opens buses and pins by name. [PeriphHost] is the real one;
// linuxtest.Host hands out periph's fakes.
type Host interface {
	SPI(name string) (spi.PortCloser, error)
	I2C(name string) (i2c.BusCloser, error)
	Pin(name string) (gpio.PinIO, error)
}

// Options of Open.
type Options struct {
	Clock clock.Clock
	Log   *slog.Logger
	// Sleep waits the parts' start-up delays (time.Sleep when nil).
	Sleep func(time.Duration)
}

// Devices are the opened parts.
type Devices struct {
	Display hal.Display
	// Touch is nil when no touch controller is described.
	Touch   hal.Touch
	Strip   hal.LEDStrip
	Pan     hal.Servo
	Tilt    hal.Servo
	LEDGPIO int
	// Attn is nil when no ATTN pin is described.
	Attn hal.Pin
	// Boot is nil when no BOOT button is described.
	Boot *Button
	// Link is the description's host link transport ("" when none).
	Link string
	// Absent lists the parts the description leaves out (display, leds,
	// servos, touch), which run on simulated stand-ins.
	Absent []string

	touch   *cst816s.Dev
	closers []io.Closer
}

// Run runs what the parts need in the background (the touch controller's
// reading) until ctx ends.
func (d *Devices) Run(ctx context.Context) {
	if d.touch != nil {
		d.touch.Run(ctx)
	}
}

// Close turns the LEDs off and closes the buses.
func (d *Devices) Close() error {
	var errs []error
	if s, ok := d.Strip.(*strip.Strip); ok {
		errs = append(errs, s.Close())
	}
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i].Close())
	}
	return errors.Join(errs...)
}

// Open opens every part of the description through host. When parts are
// missing it closes what it opened and returns one error listing each
// (wrapping ErrMissing).
func Open(desc Description, host Host, o Options) (*Devices, error) {
	if err := desc.Check(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	op := &opener{host: host, d: &Devices{Link: desc.Link}, i2c: map[string]i2c.BusCloser{}}
	d := op.d
	op.display(desc.Display, o)
	op.leds(desc.LEDs)
	op.servos(desc.Servos, o)
	op.touch(desc.Touch, o)
	if desc.Attn != "" {
		if p := op.pin("attn", desc.Attn); p != nil {
			d.Attn = &OpenDrain{p: p}
			op.try("attn", desc.Attn, d.Attn.Set(true))
		}
	}
	if desc.BootButton != "" {
		if p := op.pin("boot_button", desc.BootButton); p != nil {
			b, err := NewButton(p, o.Clock)
			op.try("boot_button", desc.BootButton, err)
			d.Boot = b
		}
	}
	if err := errors.Join(op.errs...); err != nil {
		_ = d.Close()
		return nil, err
	}
	// Absent parts run on the simulator's stand-ins, wrapped so that the
	// firmware does not take them for a simulated board: a real board
	// never serves the simulator's /sim endpoints (power cut, BOOT press,
	// touches), whatever it left out.
	if d.Display == nil {
		sd := sim.NewDisplay()
		d.Display = standInDisplay{sd}
		if d.Touch == nil {
			d.Touch = standInTouch{sd}
		}
		d.Absent = append(d.Absent, "display")
	}
	if d.Strip == nil {
		d.Strip, d.LEDGPIO = standInStrip{sim.NewLEDStrip()}, 0
		d.Absent = append(d.Absent, "leds")
	}
	if d.Pan == nil {
		d.Pan, d.Tilt = standInServo{sim.NewServo(o.Clock)}, standInServo{sim.NewServo(o.Clock)}
		d.Absent = append(d.Absent, "servos")
	}
	if desc.Touch == nil {
		d.Absent = append(d.Absent, "touch")
	}
	for _, a := range d.Absent {
		o.Log.Warn("hardware: part not described; its API runs on a simulated stand-in", "part", a)
	}
	return d, nil
}

type opener struct {
	host Host
	d    *Devices
	errs []error
	i2c  map[string]i2c.BusCloser
}

// try records err as the part at dev missing.
func (op *opener) try(part, dev string, err error) bool {
	if err == nil {
		return true
	}
	op.errs = append(op.errs, fmt.Errorf("%w: %s (%s): %w", ErrMissing, part, dev, err))
	return false
}

func (op *opener) pin(part, name string) gpio.PinIO {
	p, err := op.host.Pin(name)
	if !op.try(part, name, err) {
		return nil
	}
	return p
}

func (op *opener) spi(part, name string) spi.PortCloser {
	p, err := op.host.SPI(name)
	if !op.try(part, name, err) {
		return nil
	}
	op.d.closers = append(op.d.closers, p)
	return p
}

// bus opens an I2C bus once, however many parts share it.
func (op *opener) bus(part, name string) i2c.Bus {
	if b, ok := op.i2c[name]; ok {
		return b
	}
	b, err := op.host.I2C(name)
	if !op.try(part, name, err) {
		return nil
	}
	op.i2c[name] = b
	op.d.closers = append(op.d.closers, b)
	return b
}

func (op *opener) display(p *DisplayDesc, o Options) {
	if p == nil {
		return
	}
	v, _ := gc9a01.ParseVariant(orDefault(p.Controller, "gc9a01"))
	port := op.spi("display", p.SPI)
	dc := op.pin("display.dc", p.DC)
	var rst, bl gpio.PinIO
	if p.Reset != "" {
		rst = op.pin("display.reset", p.Reset)
	}
	if p.Backlight != "" {
		bl = op.pin("display.backlight", p.Backlight)
	}
	if port == nil || dc == nil || (p.Reset != "" && rst == nil) || (p.Backlight != "" && bl == nil) {
		return
	}
	round := v == gc9a01.GC9A01
	if p.Round != nil {
		round = *p.Round
	}
	opts := gc9a01.Options{Variant: v, Round: round, XOffset: p.XOffset, YOffset: p.YOffset,
		Hz: physic.Frequency(p.Hz) * physic.Hertz, Sleep: o.Sleep}
	dev, err := gc9a01.New(port, dc, pinOut(rst), pinOut(bl), opts)
	if op.try("display", p.SPI, err) {
		op.d.Display = dev
	}
}

// pinOut keeps a nil pin nil through the interface conversion.
func pinOut(p gpio.PinIO) gpio.PinOut {
	if p == nil {
		return nil
	}
	return p
}

func (op *opener) leds(l *LEDDesc) {
	if l == nil {
		return
	}
	kind, _ := strip.ParseKind(orDefault(l.Chip, "ws2812"))
	// Check the port opens now; the strip reopens it for its count.
	p, err := op.host.SPI(l.SPI)
	if !op.try("leds", l.SPI, err) {
		return
	}
	_ = p.Close()
	op.d.Strip = strip.New(kind, func() (spi.PortCloser, error) { return op.host.SPI(l.SPI) })
	op.d.LEDGPIO = l.GPIO
}

func (op *opener) servos(s *ServoDesc, o Options) {
	if s == nil {
		return
	}
	bus := op.bus("servos", s.I2C)
	if bus == nil {
		return
	}
	chip, err := servo.NewChip(bus, uint16(s.addr()))
	if !op.try("servos", fmt.Sprintf("%s at %#02x", s.I2C, s.addr()), err) {
		return
	}
	lo, hi := s.pulseRange()
	pan, err1 := chip.Servo(s.Pan, o.Clock)
	tilt, err2 := chip.Servo(s.Tilt, o.Clock)
	if err := errors.Join(err1, err2); !op.try("servos", s.I2C, err) {
		return
	}
	if err := errors.Join(pan.SetLimits(lo, hi), tilt.SetLimits(lo, hi)); !op.try("servos", s.I2C, err) {
		return
	}
	op.d.Pan, op.d.Tilt = pan, tilt
}

func (op *opener) touch(t *TouchDesc, o Options) {
	if t == nil {
		return
	}
	bus := op.bus("touch", t.I2C)
	var irq, rst gpio.PinIO
	if t.Interrupt != "" {
		irq = op.pin("touch.interrupt", t.Interrupt)
	}
	if t.Reset != "" {
		rst = op.pin("touch.reset", t.Reset)
	}
	if bus == nil || (t.Interrupt != "" && irq == nil) || (t.Reset != "" && rst == nil) {
		return
	}
	co := cst816s.Options{Sleep: o.Sleep}
	if irq != nil {
		co.Interrupt = irq
	}
	if rst != nil {
		co.Reset = rst
	}
	dev, err := cst816s.New(bus, uint16(t.addr()), co)
	if op.try("touch", fmt.Sprintf("%s at %#02x", t.I2C, t.addr()), err) {
		op.d.touch, op.d.Touch = dev, dev
	}
}

// Stand-ins for parts the description leaves out: the simulator's parts
// behind the hal interfaces only.
type (
	standInDisplay struct{ hal.Display }
	standInTouch   struct{ hal.Touch }
	standInStrip   struct{ hal.LEDStrip }
	standInServo   struct{ hal.Servo }
)
