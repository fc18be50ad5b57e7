// Package linuxtest opens the Linux HAL on periph.io's fakes: a [Host]
// whose buses and pins are a GC9A01 panel model, a recording LED bus, a
// PCA9685 register model and gpiotest pins, under the names of
// [Description]. Tests (the HAL's conformance suite, the firmware's
// feature tests) read back what the parts would do: the glass, the LEDs'
// colours, the servos' pulses.
package linuxtest

import (
	"fmt"
	"image"
	"image/color"
	"sync"
	"sync/atomic"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"

	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/hal/linux"
	"github.com/holofleet/holofleet/firmware/hal/linux/gc9a01/gc9a01test"
	"github.com/holofleet/holofleet/firmware/hal/linux/servo/pca9685test"
	"github.com/holofleet/holofleet/firmware/hal/linux/strip/striptest"
)

// Names of the fake buses and pins.
const (
	DisplaySPI = "/dev/spidev0.0"
	LEDSPI     = "/dev/spidev1.0"
	I2CBus     = "/dev/i2c-1"
	PinDC      = "GPIO25"
	PinReset   = "GPIO27"
	PinBL      = "GPIO18"
	PinBoot    = "GPIO21"
	PinAttn    = "GPIO4"
	LEDGPIO    = 20
	PanCh      = 0
	TiltCh     = 1
)

// Description is the board the fakes make up: a GC9A01 on SPI0, a WS2812
// strip on SPI1, a PCA9685 at 0x40 on I2C1 (pan 0, tilt 1), BOOT and
// ATTN pins.
func Description() linux.Description {
	return linux.Description{
		Display:    &linux.DisplayDesc{Controller: "gc9a01", SPI: DisplaySPI, DC: PinDC, Reset: PinReset, Backlight: PinBL},
		LEDs:       &linux.LEDDesc{Chip: "ws2812", SPI: LEDSPI, GPIO: LEDGPIO},
		Servos:     &linux.ServoDesc{I2C: I2CBus, Address: 0x40, Pan: PanCh, Tilt: TiltCh},
		BootButton: PinBoot,
		Attn:       PinAttn,
	}
}

// Host is a linux.Host of fakes. Missing names open with an error, as a
// machine without the device.
type Host struct {
	Panel *gc9a01test.Panel
	LEDs  *striptest.Bus
	Chip  *pca9685test.Chip
	// Missing names devices and pins that do not exist.
	Missing map[string]bool

	mu   sync.Mutex
	pins map[string]*Pin
}

// Pin is a gpiotest.Pin that remembers whether PWM or a level was set
// last (gpiotest keeps both side by side).
type Pin struct {
	*gpiotest.Pin
	pwm atomic.Bool
}

// Out sets a level.
func (p *Pin) Out(l gpio.Level) error {
	p.pwm.Store(false)
	return p.Pin.Out(l)
}

// PWM sets a duty cycle.
func (p *Pin) PWM(d gpio.Duty, f physic.Frequency) error {
	p.pwm.Store(true)
	return p.Pin.PWM(d, f)
}

// Percent is the pin's output as a percentage of the time it is high.
func (p *Pin) Percent() int {
	p.Lock()
	l, d := p.L, p.D
	p.Unlock()
	switch {
	case p.pwm.Load():
		return int((int64(d)*100 + int64(gpio.DutyMax)/2) / int64(gpio.DutyMax))
	case l == gpio.High:
		return 100
	}
	return 0
}

// New returns fakes for Description's names.
func New() *Host {
	h := &Host{LEDs: &striptest.Bus{Limit: 4096}, Chip: pca9685test.New(0x40), Missing: map[string]bool{}, pins: map[string]*Pin{}}
	h.Panel = &gc9a01test.Panel{DC: h.FakePin(PinDC), Limit: 4096}
	h.FakePin(PinBoot).EdgesChan = make(chan gpio.Level, 4)
	return h
}

// FakePin returns the fake behind a pin name, made on first use.
func (h *Host) FakePin(name string) *Pin {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pins[name]
	if !ok {
		p = &Pin{Pin: &gpiotest.Pin{N: name}}
		_, _ = fmt.Sscanf(name, "GPIO%d", &p.Num)
		h.pins[name] = p
	}
	return p
}

type chipBus struct{ *pca9685test.Chip }

func (chipBus) Close() error { return nil }

// SPI implements linux.Host.
func (h *Host) SPI(name string) (spi.PortCloser, error) {
	switch {
	case h.Missing[name]:
	case name == DisplaySPI:
		return h.Panel, nil
	case name == LEDSPI:
		return h.LEDs.Open()
	}
	return nil, fmt.Errorf("open %s: no such file or directory", name)
}

// I2C implements linux.Host.
func (h *Host) I2C(name string) (i2c.BusCloser, error) {
	if name != I2CBus || h.Missing[name] {
		return nil, fmt.Errorf("open %s: no such file or directory", name)
	}
	return chipBus{h.Chip}, nil
}

// Pin implements linux.Host.
func (h *Host) Pin(name string) (gpio.PinIO, error) {
	if h.Missing[name] {
		return nil, fmt.Errorf("no pin named %q", name)
	}
	return h.FakePin(name), nil
}

// Glass is what a person would see on the panel: the panel's memory, lit
// by the backlight pin (its PWM duty, or full when high), black while the
// panel sleeps and outside the round glass.
func (h *Host) Glass() *image.RGBA {
	img := h.Panel.Frame(0, 0, hal.ScreenWidth, hal.ScreenHeight)
	pct := h.FakePin(PinBL).Percent()
	if !h.Panel.On() {
		pct = 0
	}
	for y := range hal.ScreenHeight {
		for x := range hal.ScreenWidth {
			i := img.PixOffset(x, y)
			for k := range 3 {
				v := 0
				if visible(x, y) {
					v = (int(img.Pix[i+k])*pct + 50) / 100
				}
				img.Pix[i+k] = uint8(v)
			}
		}
	}
	return img
}

func visible(x, y int) bool {
	dx, dy := 2*x+1-hal.ScreenWidth, 2*y+1-hal.ScreenHeight
	return dx*dx+dy*dy <= hal.ScreenWidth*hal.ScreenWidth
}

// LEDColours decodes the last frame on the LED bus.
func (h *Host) LEDColours() ([]color.RGBA, error) {
	b := h.LEDs.Last()
	if b == nil {
		return nil, nil
	}
	return striptest.DecodeWS2812(b)
}

// Pulse is the pulse a channel of the PCA9685 sends, in µs.
func (h *Host) Pulse(ch int) (us int, on bool) { return h.Chip.Micros(ch) }
