// Package cst816s reads touches from a CST816S capacitive touch
// controller (the one on round GC9A01 touch modules) over I2C, through
// periph.io's i2c and gpio interfaces. [Dev] implements hal.Touch.
//
// Registers, read as one 6-byte run from 0x01:
//
//	0x01  gesture id (swipes, taps; not used here)
//	0x02  fingers on the glass, 0 or 1
//	0x03  bits 7-6 event (0 down, 1 up, 2 contact), bits 3-0 X bits 11-8
//	0x04  X bits 7-0
//	0x05  bits 3-0 Y bits 11-8
//	0x06  Y bits 7-0
//	0xA7  chip id (0xB4, 0xB5 or 0xB6), read at start to find the part
//	0xFE  1 disables auto sleep (asleep, the controller does not answer
//	      on the bus until touched)
//
// The controller pulls its INT pin low on a touch; with that pin the
// driver waits for edges, without it it polls every PollEvery. A finger
// that lands gives one Down event at its first position, and one Up event
// where it was last seen when it leaves; moves in between are not events
// (the firmware's touch events are down and up only).
package cst816s

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/i2c"

	"github.com/holofleet/holofleet/firmware/hal"
)

// Registers and values.
const (
	DefaultAddress  uint16 = 0x15
	RegGesture      byte   = 0x01
	RegChipID       byte   = 0xA7
	RegDisAutoSleep byte   = 0xFE
	// PollEvery is the polling period without an interrupt pin.
	PollEvery = 20 * time.Millisecond
	// Buffer is how many events wait unread before new ones are dropped.
	Buffer = 16
)

// Errors of the driver.
var (
	// ErrNotFound: nothing answered at the address, or the chip id is not
	// a CST816's.
	ErrNotFound = errors.New("cst816s: controller not found")
)

// Dev is one touch controller.
type Dev struct {
	dev     *i2c.Dev
	irq     gpio.PinIn
	w, h    int
	events  chan hal.TouchEvent
	dropped atomic.Int64
	down    bool
	last    hal.TouchEvent
	sleep   func(time.Duration)
}

var _ hal.Touch = (*Dev)(nil)

// Options of the controller.
type Options struct {
	// Reset, when set, is pulsed low at start (the controller then needs
	// 50 ms before it answers).
	Reset gpio.PinOut
	// Interrupt, when set, is the INT pin.
	Interrupt gpio.PinIn
	// Sleep waits the start-up delays (time.Sleep when nil).
	Sleep func(time.Duration)
}

// New finds the controller at addr on bus, turns its auto sleep off and
// returns it; Run reads it.
func New(bus i2c.Bus, addr uint16, o Options) (*Dev, error) {
	if o.Sleep == nil {
		o.Sleep = time.Sleep
	}
	d := &Dev{dev: &i2c.Dev{Bus: bus, Addr: addr}, irq: o.Interrupt, w: hal.ScreenWidth, h: hal.ScreenHeight,
		events: make(chan hal.TouchEvent, Buffer), sleep: o.Sleep}
	if o.Reset != nil {
		if err := o.Reset.Out(gpio.Low); err != nil {
			return nil, fmt.Errorf("cst816s: reset pin: %w", err)
		}
		o.Sleep(10 * time.Millisecond)
		if err := o.Reset.Out(gpio.High); err != nil {
			return nil, fmt.Errorf("cst816s: reset pin: %w", err)
		}
		o.Sleep(50 * time.Millisecond)
	}
	var id [1]byte
	if err := d.dev.Tx([]byte{RegChipID}, id[:]); err != nil {
		return nil, fmt.Errorf("%w at %#02x: %w", ErrNotFound, addr, err)
	}
	if id[0] < 0xB4 || id[0] > 0xB6 {
		return nil, fmt.Errorf("%w at %#02x: chip id %#02x", ErrNotFound, addr, id[0])
	}
	if _, err := d.dev.Write([]byte{RegDisAutoSleep, 0x01}); err != nil {
		return nil, fmt.Errorf("cst816s: auto sleep off: %w", err)
	}
	if d.irq != nil {
		if err := d.irq.In(gpio.PullUp, gpio.FallingEdge); err != nil {
			return nil, fmt.Errorf("cst816s: interrupt pin: %w", err)
		}
	}
	return d, nil
}

// Events delivers touches down and up.
func (d *Dev) Events() <-chan hal.TouchEvent { return d.events }

// Dropped counts events lost because nobody read them.
func (d *Dev) Dropped() int64 { return d.dropped.Load() }

// Run reads the controller until ctx ends.
func (d *Dev) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if d.irq != nil {
			// Wake at least every PollEvery: a lift may come without an
			// edge on some modules.
			d.irq.WaitForEdge(PollEvery)
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(PollEvery):
			}
		}
		_ = d.Poll()
	}
}

// Poll reads the controller once and emits what changed.
func (d *Dev) Poll() error {
	var r [6]byte
	if err := d.dev.Tx([]byte{RegGesture}, r[:]); err != nil {
		return fmt.Errorf("cst816s: read: %w", err)
	}
	fingers := r[1]
	x := int(r[2]&0x0F)<<8 | int(r[3])
	y := int(r[4]&0x0F)<<8 | int(r[5])
	x, y = min(max(x, 0), d.w-1), min(max(y, 0), d.h-1)
	switch {
	case fingers > 0 && !d.down:
		d.down = true
		d.last = hal.TouchEvent{Down: true, X: x, Y: y}
		d.emit(d.last)
	case fingers > 0:
		d.last.X, d.last.Y = x, y
	case d.down:
		d.down = false
		d.emit(hal.TouchEvent{Down: false, X: d.last.X, Y: d.last.Y})
	}
	return nil
}

func (d *Dev) emit(ev hal.TouchEvent) {
	select {
	case d.events <- ev:
	default:
		d.dropped.Add(1)
	}
}
