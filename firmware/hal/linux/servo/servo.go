// Package servo drives hobby servos from a PCA9685 16-channel PWM chip on
// a Linux I2C bus, through periph.io's pca9685 driver. [Servo] implements
// hal.Servo.
//
// The chip runs at 50 Hz (periph's pca9685 sets it at start): a period of
// (PRESCALE+1) x 4096 ticks of its 25 MHz oscillator, PRESCALE being 122,
// so one tick is (PRESCALE+1)/25 µs, about 4.9 µs. A pulse of us
// microseconds is an output that turns on at tick 0 and off at tick
// round(us x 25 / (PRESCALE+1)). Release sets the channel's full-off bit:
// no pulses at all, and a hobby servo goes limp.
//
// Calibration (the holo's min_us and max_us) and the drive policy (keep
// driving once settled, or let go) are the firmware's: the holo turns
// them into Drive and Release calls, so this package only turns pulse
// widths into registers. A servo has no feedback wire, so Position is
// estimated with the same model of a hobby servo's travel the simulator
// uses (sim.ServoSpeed), from the last pulse sent.
package servo

import (
	"errors"
	"fmt"
	"sync"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/i2c"
	"periph.io/x/devices/v3/pca9685"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/hal/sim"
)

// Errors of the servo driver.
var (
	// ErrRange: a pulse outside MinPulse-MaxPulse, or a channel outside
	// 0-15.
	ErrRange = errors.New("servo: out of range")
	// ErrBus: the chip did not answer, or a write failed.
	ErrBus = errors.New("servo: bus error")
)

// Pulse limits, the same as the simulator's.
const (
	MinPulse = sim.MinPulse
	MaxPulse = sim.MaxPulse
	// Channels on one chip.
	Channels = 16
	// DefaultAddress is the chip's address with no address pins tied.
	DefaultAddress = pca9685.I2CAddr
	// OscillatorHz is the chip's internal clock.
	OscillatorHz = 25_000_000
)

// Prescale is the PRESCALE value periph's pca9685 writes for 50 Hz.
const Prescale = 122

// Ticks is the OFF count for a pulse of us microseconds.
func Ticks(us int) int {
	return (us*OscillatorHz/1_000_000 + (Prescale+1)/2) / (Prescale + 1)
}

// Micros is the pulse width of an OFF count, rounded to a microsecond.
func Micros(ticks int) int {
	return (ticks*(Prescale+1)*1_000_000 + OscillatorHz/2) / OscillatorHz
}

// Chip is one PCA9685 shared by its servos.
type Chip struct {
	mu  sync.Mutex
	dev *pca9685.Dev
}

// NewChip wakes the PCA9685 at addr on bus and sets 50 Hz; every output
// starts off. It takes about 200 ms (the chip's oscillator start-up, as
// periph's driver waits for it).
func NewChip(bus i2c.Bus, addr uint16) (*Chip, error) {
	dev, err := pca9685.NewI2C(bus, addr)
	if err != nil {
		return nil, fmt.Errorf("pca9685 at %#02x: %w: %w", addr, ErrBus, err)
	}
	return &Chip{dev: dev}, nil
}

// Servo is one servo on a channel of a chip. It implements hal.Servo.
type Servo struct {
	chip    *Chip
	channel int
	model   *sim.Servo
	lo, hi  int
}

var _ hal.Servo = (*Servo)(nil)

// Servo returns the servo on channel (0-15); clk times the position
// model.
func (c *Chip) Servo(channel int, clk clock.Clock) (*Servo, error) {
	if channel < 0 || channel >= Channels {
		return nil, fmt.Errorf("servo channel %d: want 0-%d: %w", channel, Channels-1, ErrRange)
	}
	return &Servo{chip: c, channel: channel, model: sim.NewServo(clk), lo: MinPulse, hi: MaxPulse}, nil
}

// SetLimits narrows the pulses the servo accepts to lo-hi µs (within
// MinPulse-MaxPulse), for servos that strain outside a smaller range.
func (s *Servo) SetLimits(lo, hi int) error {
	if lo < MinPulse || hi > MaxPulse || lo >= hi {
		return fmt.Errorf("servo limits %d-%d µs: %w", lo, hi, ErrRange)
	}
	s.lo, s.hi = lo, hi
	return nil
}

// Drive sends pulses of us microseconds until told otherwise.
func (s *Servo) Drive(us int) error {
	if us < s.lo || us > s.hi {
		return fmt.Errorf("servo pulse %d µs outside %d-%d: %w", us, s.lo, s.hi, ErrRange)
	}
	s.chip.mu.Lock()
	err := s.chip.dev.SetPwm(s.channel, 0, gpio.Duty(Ticks(us)))
	s.chip.mu.Unlock()
	if err != nil {
		return fmt.Errorf("servo channel %d: %w: %w", s.channel, ErrBus, err)
	}
	return s.model.Drive(us)
}

// Release stops the pulses (the channel's full-off bit): limp.
func (s *Servo) Release() error {
	s.chip.mu.Lock()
	err := s.chip.dev.SetFullOff(s.channel)
	s.chip.mu.Unlock()
	if err != nil {
		return fmt.Errorf("servo channel %d: %w: %w", s.channel, ErrBus, err)
	}
	return s.model.Release()
}

// Position estimates where the horn is (see the package doc) and tells
// whether the servo is driven.
func (s *Servo) Position() (us int, driven bool) { return s.model.Position() }

// Channel is the servo's channel on the chip.
func (s *Servo) Channel() int { return s.channel }
