// Package pca9685test is a model of a PCA9685 on a fake I2C bus: its
// register file, with the auto-increment MODE1 bit honoured as the chip
// does, so a test reads back what a driver wrote as each channel's pulse.
package pca9685test

import (
	"fmt"
	"sync"

	"periph.io/x/conn/v3/physic"
)

// Registers the model decodes.
const (
	RegMode1    = 0x00
	RegLED0     = 0x06 // LEDn_ON_L at 6+4n: ON_L, ON_H, OFF_L, OFF_H
	RegPrescale = 0xFE
	mode1AI     = 0x20
	fullBit     = 0x10 // bit 4 of ON_H (full on) and OFF_H (full off)
)

// Chip is a fake PCA9685 answering at Addr on an i2c.Bus.
type Chip struct {
	Addr uint16

	mu   sync.Mutex
	regs [256]byte
	txs  int
}

// New returns a chip at addr in its power-on state (MODE1 sleep bit set,
// all outputs full off, prescale 30).
func New(addr uint16) *Chip {
	c := &Chip{Addr: addr}
	c.regs[RegMode1] = 0x11
	c.regs[0x01] = 0x04
	for ch := range 16 {
		c.regs[RegLED0+4*ch+3] = fullBit
	}
	c.regs[0xFD] = fullBit // ALL_LED_OFF_H
	c.regs[RegPrescale] = 30
	return c
}

func (c *Chip) String() string { return fmt.Sprintf("pca9685test@%#02x", c.Addr) }

// SetSpeed implements i2c.Bus.
func (c *Chip) SetSpeed(physic.Frequency) error { return nil }

// Tx implements i2c.Bus: a write sets the register pointer, then writes
// from it; a read reads from it. The pointer advances only with MODE1's
// AI bit set.
func (c *Chip) Tx(addr uint16, w, r []byte) error {
	if addr != c.Addr {
		return fmt.Errorf("pca9685test: no device at %#02x (NACK)", addr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txs++
	if len(w) == 0 {
		return fmt.Errorf("pca9685test: a transaction without a register")
	}
	reg := int(w[0])
	for _, b := range w[1:] {
		c.write(reg, b)
		if c.regs[RegMode1]&mode1AI != 0 {
			reg = (reg + 1) & 0xFF
		}
	}
	for i := range r {
		r[i] = c.regs[reg]
		if c.regs[RegMode1]&mode1AI != 0 {
			reg = (reg + 1) & 0xFF
		}
	}
	return nil
}

func (c *Chip) write(reg int, b byte) {
	switch {
	case reg == RegMode1:
		c.regs[reg] = b &^ 0x80 // RESTART reads back clear once done
	case reg >= 0xFA && reg <= 0xFD: // ALL_LED: every channel at once
		for ch := range 16 {
			c.regs[RegLED0+4*ch+reg-0xFA] = b
		}
		c.regs[reg] = b
	default:
		c.regs[reg] = b
	}
}

// Pulse is what channel ch outputs: on tells whether it sends pulses, and
// ticks their width in 1/4096 of the period (full on reads as 4096).
func (c *Chip) Pulse(ch int) (ticks int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.regs[RegLED0+4*ch : RegLED0+4*ch+4]
	onT := int(r[1]&0x0F)<<8 | int(r[0])
	offT := int(r[3]&0x0F)<<8 | int(r[2])
	switch {
	case r[3]&fullBit != 0:
		return 0, false
	case r[1]&fullBit != 0:
		return 4096, true
	case onT == offT:
		return 0, false
	}
	return (offT - onT + 4096) % 4096, true
}

// Micros is channel ch's pulse in microseconds at the chip's prescale,
// rounded, and whether it pulses.
func (c *Chip) Micros(ch int) (us int, on bool) {
	ticks, on := c.Pulse(ch)
	c.mu.Lock()
	p := int(c.regs[RegPrescale])
	c.mu.Unlock()
	return (ticks*(p+1)*1_000_000 + 12_500_000) / 25_000_000, on
}

// Prescale is the PRESCALE register.
func (c *Chip) Prescale() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.regs[RegPrescale])
}

// Asleep reports MODE1's SLEEP bit (the oscillator off).
func (c *Chip) Asleep() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regs[RegMode1]&0x10 != 0
}
