package sim

import (
	"fmt"
	"image/color"
	"sync"

	"github.com/holofleet/holofleet/firmware/hal"
)

// Limits of the simulated strip's configuration.
const (
	MaxLEDs = 1024 // LEDs on one strip
	MaxGPIO = 48   // highest GPIO number of the board's chip
)

// LEDStrip is the simulated addressable LED strip: it keeps the last frame
// written. It implements hal.LEDStrip. The zero value is an unconfigured
// strip of 0 LEDs.
type LEDStrip struct {
	mu     sync.Mutex
	count  int
	gpio   int
	px     []color.RGBA
	frames int
}

var _ hal.LEDStrip = (*LEDStrip)(nil)

// NewLEDStrip returns an unconfigured strip.
func NewLEDStrip() *LEDStrip { return &LEDStrip{} }

// Configure sets the LED count (0-MaxLEDs) and data pin (0-MaxGPIO); all
// LEDs go dark.
func (s *LEDStrip) Configure(count, gpio int) error {
	if count < 0 || count > MaxLEDs {
		return fmt.Errorf("led count %d: %w", count, ErrRange)
	}
	if gpio < 0 || gpio > MaxGPIO {
		return fmt.Errorf("led gpio %d: %w", gpio, ErrRange)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count, s.gpio = count, gpio
	s.px = make([]color.RGBA, count)
	return nil
}

// Write latches one frame; len(px) must be the configured count.
func (s *LEDStrip) Write(px []color.RGBA) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(px) != s.count {
		return fmt.Errorf("led frame of %d pixels on a strip of %d: %w", len(px), s.count, ErrSize)
	}
	copy(s.px, px)
	s.frames++
	return nil
}

// Pixels returns a copy of the last frame written (all dark before any).
func (s *LEDStrip) Pixels() []color.RGBA {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]color.RGBA(nil), s.px...)
}

// Frames counts the frames written since start.
func (s *LEDStrip) Frames() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frames
}

// Count and GPIO report the configuration.
func (s *LEDStrip) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// GPIO reports the configured data pin.
func (s *LEDStrip) GPIO() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gpio
}
