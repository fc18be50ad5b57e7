// Package strip drives an addressable LED strip from a Linux SPI port
// through periph.io's drivers: WS2812 (and other one-wire NRZ LEDs) with
// nrzled, each data bit sent as four SPI bits at 2.5 MHz on MOSI; APA102
// with apa102, clock and data on SCLK and MOSI. It implements
// hal.LEDStrip.
//
// The firmware scales colours by the strip's brightness before it writes
// them, so the drivers send colours as given: nrzled does so by nature;
// the APA102 is run with its global 5-bit brightness at full, its colour
// correction neutral and its perceptual curve off, so a colour byte goes
// on the wire unchanged.
//
// The SPI port is opened when the strip is configured (and again if the
// count changes), since a periph.io port is connected once, for one
// buffer size. A WS2812 frame is 12 bytes an LED plus 6 bytes of latch,
// in one transfer: the SPI driver's largest transfer (spidev's bufsiz,
// 4096 on Raspberry Pi OS, 340 LEDs) bounds the count, and Configure says
// so when it does not fit.
package strip

import (
	"errors"
	"fmt"
	"image/color"
	"sync"

	"periph.io/x/conn/v3"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"
	"periph.io/x/devices/v3/apa102"
	"periph.io/x/devices/v3/nrzled"

	"github.com/holofleet/holofleet/firmware/hal"
)

// Errors of the strip.
var (
	// ErrSize: a frame whose length is not the configured count.
	ErrSize = errors.New("strip: wrong frame size")
	// ErrRange: a count the strip or its SPI port cannot take.
	ErrRange = errors.New("strip: out of range")
	// ErrBus: the SPI port could not be opened or a transfer failed.
	ErrBus = errors.New("strip: bus error")
)

// Kind is the LED chip on the strip.
type Kind int

// Chips the package drives.
const (
	WS2812 Kind = iota // one data wire, NRZ at 800 kHz (WS2812B, SK6812 RGB)
	APA102             // clock and data (APA102, SK9822)
)

func (k Kind) String() string {
	if k == APA102 {
		return "apa102"
	}
	return "ws2812"
}

// ParseKind reads a chip name from a hardware description.
func ParseKind(s string) (Kind, bool) {
	switch s {
	case "ws2812", "ws2812b", "sk6812", "nrz":
		return WS2812, true
	case "apa102", "sk9822":
		return APA102, true
	}
	return 0, false
}

// MaxLEDs bounds the count whatever the port allows.
const MaxLEDs = 1024

// WS2812Bytes is the size of one WS2812 frame of n LEDs on the wire.
func WS2812Bytes(n int) int { return 12*n + 6 }

// Opener opens the strip's SPI port (a fresh one each call).
type Opener func() (spi.PortCloser, error)

// Strip is one LED strip. Its methods are safe for concurrent use.
type Strip struct {
	kind Kind
	open Opener

	mu     sync.Mutex
	port   spi.PortCloser
	nrz    *nrzled.Dev
	apa    *apa102.Dev
	count  int
	gpio   int
	raw    []byte
	px     []color.RGBA
	frames int
}

var _ hal.LEDStrip = (*Strip)(nil)

// New returns an unconfigured strip of the given chip on the port open
// opens.
func New(kind Kind, open Opener) *Strip { return &Strip{kind: kind, open: open} }

// Configure opens the port for count LEDs (0 closes it) and writes them
// dark. gpio is the data pin as the board reports it; on Linux it is the
// SPI bus's MOSI, fixed by the wiring, and only recorded here.
func (s *Strip) Configure(count, gpio int) error {
	if count < 0 || count > MaxLEDs {
		return fmt.Errorf("led count %d: %w", count, ErrRange)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	s.count, s.gpio = count, gpio
	s.px = make([]color.RGBA, count)
	s.raw = make([]byte, 3*count)
	if count == 0 {
		return nil
	}
	p, err := s.open()
	if err != nil {
		return fmt.Errorf("led strip: %w: %w", ErrBus, err)
	}
	if s.kind == WS2812 {
		if l, ok := p.(conn.Limits); ok && l.MaxTxSize() > 0 && WS2812Bytes(count) > l.MaxTxSize() {
			p.Close()
			return fmt.Errorf("led count %d needs %d-byte SPI transfers; the port takes %d (raise spidev.bufsiz): %w",
				count, WS2812Bytes(count), l.MaxTxSize(), ErrRange)
		}
		s.nrz, err = nrzled.NewSPI(p, &nrzled.Opts{NumPixels: count, Channels: 3, Freq: 2500 * physic.KiloHertz})
	} else {
		s.apa, err = apa102.New(p, &apa102.Opts{NumPixels: count, Intensity: 255, Temperature: apa102.NeutralTemp, DisableGlobalPWM: true})
	}
	if err != nil {
		p.Close()
		return fmt.Errorf("led strip: %w: %w", ErrBus, err)
	}
	s.port = p
	return s.sendLocked()
}

func (s *Strip) closeLocked() {
	if s.port != nil {
		_ = s.port.Close()
	}
	s.port, s.nrz, s.apa = nil, nil, nil
}

// Write sends one colour per LED; len(px) must be the configured count.
func (s *Strip) Write(px []color.RGBA) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(px) != s.count {
		return fmt.Errorf("led frame of %d pixels on a strip of %d: %w", len(px), s.count, ErrSize)
	}
	copy(s.px, px)
	s.frames++
	return s.sendLocked()
}

func (s *Strip) sendLocked() error {
	for i, c := range s.px {
		s.raw[3*i], s.raw[3*i+1], s.raw[3*i+2] = c.R, c.G, c.B
	}
	var err error
	switch {
	case s.nrz != nil:
		_, err = s.nrz.Write(s.raw)
	case s.apa != nil:
		_, err = s.apa.Write(s.raw)
	}
	if err != nil {
		return fmt.Errorf("led strip: %w: %w", ErrBus, err)
	}
	return nil
}

// Pixels returns a copy of the last frame written.
func (s *Strip) Pixels() []color.RGBA {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]color.RGBA(nil), s.px...)
}

// Frames counts the frames written.
func (s *Strip) Frames() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frames
}

// Close turns the LEDs off and closes the port.
func (s *Strip) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.px)
	err := s.sendLocked()
	s.closeLocked()
	return err
}
