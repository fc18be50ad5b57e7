package linux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"periph.io/x/conn/v3/physic"

	"github.com/holofleet/holofleet/bus/transport"
	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01"
	"github.com/holofleet/holofleet/firmware/hal/linux/servo"
	"github.com/holofleet/holofleet/firmware/hal/linux/strip"
)

// Errors of the description and of opening the parts.
var (
	// ErrDescription: the description file is malformed or a value is
	// out of range; the message names the field.
	ErrDescription = errors.New("hardware description")
	// ErrMissing: a described part could not be opened (no such device,
	// no such pin, no answer on the bus); the message names the part and
	// the device.
	ErrMissing = errors.New("hardware missing")
)

// Description says which parts are wired where. Pins are periph.io pin
// names ("GPIO25"); buses are device paths ("/dev/spidev0.0",
// "/dev/i2c-1") or periph's names ("SPI0.0", "I2C1").
type Description struct {
	Display *DisplayDesc `json:"display,omitempty"`
	LEDs    *LEDDesc     `json:"leds,omitempty"`
	Servos  *ServoDesc   `json:"servos,omitempty"`
	Touch   *TouchDesc   `json:"touch,omitempty"`
	// BootButton is the BOOT button's pin (active low, pulled up).
	BootButton string `json:"boot_button,omitempty"`
	// Attn is the host link's ATTN output (open drain, low while events
	// are pending).
	Attn string `json:"attn,omitempty"`
	// Link is the host link's transport when holo-board's --uart is not
	// given: serial:///dev/ttyAMA0?rs485=1 and the like.
	Link string `json:"link,omitempty"`
}

// DisplayDesc is the panel.
type DisplayDesc struct {
	// Controller is gc9a01 (default) or st7789.
	Controller string `json:"controller,omitempty"`
	SPI        string `json:"spi"`
	// Hz is the SPI clock (default 40 MHz).
	Hz        int64  `json:"hz,omitempty"`
	DC        string `json:"dc"`
	Reset     string `json:"reset,omitempty"`
	Backlight string `json:"backlight,omitempty"`
	// Round masks the corners (default: true for the GC9A01, false for
	// the ST7789).
	Round   *bool `json:"round,omitempty"`
	XOffset int   `json:"x_offset,omitempty"`
	YOffset int   `json:"y_offset,omitempty"`
}

// LEDDesc is the LED strip. Its count and brightness are the board's
// settings (PATCH /settings), not the wiring's.
type LEDDesc struct {
	// Chip is ws2812 (default) or apa102.
	Chip string `json:"chip,omitempty"`
	SPI  string `json:"spi"`
	// GPIO is the data pin's number as GET /leds reports it (the SPI
	// bus's MOSI: 10 for SPI0, 20 for SPI1 on a Raspberry Pi).
	GPIO int `json:"gpio"`
}

// ServoDesc is the PCA9685 and the servos on it.
type ServoDesc struct {
	I2C string `json:"i2c"`
	// Address of the chip (default 0x40).
	Address int `json:"address,omitempty"`
	// Pan and Tilt are the channels, 0-15.
	Pan  int `json:"pan"`
	Tilt int `json:"tilt"`
	// MinUS and MaxUS bound every pulse sent (default 500-2500); the
	// holo's calibration lies within them.
	MinUS int `json:"min_us,omitempty"`
	MaxUS int `json:"max_us,omitempty"`
}

// TouchDesc is the touch controller.
type TouchDesc struct {
	// Controller is cst816s, the controller of round GC9A01 touch modules.
	Controller string `json:"controller,omitempty"`
	I2C        string `json:"i2c"`
	// Address (default 0x15).
	Address int `json:"address,omitempty"`
	// Interrupt is the controller's INT pin (falling edge on touch);
	// without it the controller is polled.
	Interrupt string `json:"interrupt,omitempty"`
	Reset     string `json:"reset,omitempty"`
}

// MaxDescription bounds the description file.
const MaxDescription = 64 << 10

// Load reads and checks a description file.
func Load(path string) (Description, error) {
	f, err := os.Open(path)
	if err != nil {
		return Description{}, fmt.Errorf("%w: %w", ErrDescription, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxDescription+1))
	if err != nil {
		return Description{}, fmt.Errorf("%w: %s: %w", ErrDescription, path, err)
	}
	d, err := Parse(b)
	if err != nil {
		return Description{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Parse reads a description (JSON, unknown fields refused) and checks it.
func Parse(b []byte) (Description, error) {
	if len(b) > MaxDescription {
		return Description{}, fmt.Errorf("%w: over %d bytes", ErrDescription, MaxDescription)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d Description
	if err := dec.Decode(&d); err != nil {
		return Description{}, fmt.Errorf("%w: %w", ErrDescription, err)
	}
	if dec.More() {
		return Description{}, fmt.Errorf("%w: more than one JSON value", ErrDescription)
	}
	return d, d.Check()
}

// Check validates the description without touching hardware, naming every
// field that is wrong.
func (d Description) Check() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrDescription}, a...)...))
	}
	pins := map[string]string{}
	pin := func(field, name string, required bool) {
		switch {
		case name == "" && required:
			bad("%s: a pin is required", field)
		case name == "":
		case pins[name] != "":
			bad("%s: pin %s is %s already", field, name, pins[name])
		default:
			pins[name] = field
		}
	}
	if p := d.Display; p != nil {
		if _, ok := gc9a01.ParseVariant(orDefault(p.Controller, "gc9a01")); !ok {
			bad("display.controller %q: want gc9a01 or st7789", p.Controller)
		}
		if p.SPI == "" {
			bad("display.spi: an SPI port is required")
		}
		if p.Hz < 0 || p.Hz > int64(gc9a01.MaxHz/physic.Hertz) {
			bad("display.hz %d: want 1-%d", p.Hz, int64(gc9a01.MaxHz/physic.Hertz))
		}
		if p.XOffset < 0 || p.YOffset < 0 || p.XOffset > 80 || p.YOffset > 80 {
			bad("display offsets (%d,%d): want 0-80", p.XOffset, p.YOffset)
		}
		pin("display.dc", p.DC, true)
		pin("display.reset", p.Reset, false)
		pin("display.backlight", p.Backlight, false)
	}
	if l := d.LEDs; l != nil {
		if _, ok := strip.ParseKind(orDefault(l.Chip, "ws2812")); !ok {
			bad("leds.chip %q: want ws2812 or apa102", l.Chip)
		}
		if l.SPI == "" {
			bad("leds.spi: an SPI port is required")
		}
		if d.Display != nil && l.SPI == d.Display.SPI {
			bad("leds.spi %s is the display's too: a strip needs its own SPI port", l.SPI)
		}
		if l.GPIO < 0 || l.GPIO > 63 {
			bad("leds.gpio %d: want 0-63", l.GPIO)
		}
	}
	if s := d.Servos; s != nil {
		if s.I2C == "" {
			bad("servos.i2c: an I2C bus is required")
		}
		if s.Address != 0 && (s.Address < 0x03 || s.Address > 0x77) {
			bad("servos.address %#x: want 0x03-0x77", s.Address)
		}
		for _, c := range []struct {
			name string
			ch   int
		}{{"pan", s.Pan}, {"tilt", s.Tilt}} {
			if c.ch < 0 || c.ch >= servo.Channels {
				bad("servos.%s channel %d: want 0-%d", c.name, c.ch, servo.Channels-1)
			}
		}
		if s.Pan == s.Tilt {
			bad("servos: pan and tilt are both channel %d", s.Pan)
		}
		lo, hi := s.pulseRange()
		if lo < servo.MinPulse || hi > servo.MaxPulse || lo >= hi {
			bad("servos pulse range %d-%d µs: want within %d-%d, min below max", lo, hi, servo.MinPulse, servo.MaxPulse)
		}
	}
	if t := d.Touch; t != nil {
		if orDefault(t.Controller, "cst816s") != "cst816s" {
			bad("touch.controller %q: only cst816s is supported", t.Controller)
		}
		if t.I2C == "" {
			bad("touch.i2c: an I2C bus is required")
		}
		if t.Address != 0 && (t.Address < 0x03 || t.Address > 0x77) {
			bad("touch.address %#x: want 0x03-0x77", t.Address)
		}
		if s := d.Servos; s != nil && s.I2C == t.I2C && s.addr() == t.addr() {
			bad("touch.address %#x is the servo chip's on %s", t.addr(), t.I2C)
		}
		pin("touch.interrupt", t.Interrupt, false)
		pin("touch.reset", t.Reset, false)
	}
	pin("boot_button", d.BootButton, false)
	pin("attn", d.Attn, false)
	if d.Link != "" {
		if err := transport.Check(d.Link); err != nil {
			bad("link %q: %v", d.Link, err)
		}
	}
	return errors.Join(errs...)
}

func (s *ServoDesc) pulseRange() (int, int) {
	lo, hi := s.MinUS, s.MaxUS
	if lo == 0 {
		lo = servo.MinPulse
	}
	if hi == 0 {
		hi = servo.MaxPulse
	}
	return lo, hi
}

func (s *ServoDesc) addr() int {
	if s.Address == 0 {
		return int(servo.DefaultAddress)
	}
	return s.Address
}

func (t *TouchDesc) addr() int {
	if t.Address == 0 {
		return 0x15
	}
	return t.Address
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
