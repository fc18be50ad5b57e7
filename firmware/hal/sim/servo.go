package sim

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Servo model. A hobby servo turns about 90 degrees for 1000 µs of pulse
// change; a small one needs about 0.2 s per 60 degrees, so 1000 µs of
// travel takes about 0.3 s. The simulated horn moves at exactly that
// speed, linearly, and stops on the target.
const (
	ServoSpeedUS   = 1000                   // µs of travel ...
	ServoSpeedTime = 300 * time.Millisecond // ... in this long
	// ServoRest is where the horn is when the board powers up.
	ServoRest = 1500
	// MinPulse and MaxPulse bound the pulses the simulated servo accepts.
	MinPulse = 500
	MaxPulse = 2500
)

// ServoSpeed is the horn's speed in µs of pulse per second.
const ServoSpeed = float64(ServoSpeedUS) / (float64(ServoSpeedTime) / float64(time.Second))

// Servo is one simulated hobby servo. It implements hal.Servo.
type Servo struct {
	clk clock.Clock

	mu     sync.Mutex
	from   float64   // position at t0
	t0     time.Time // when the current leg started
	target int       // last pulse driven
	driven bool
	drives int
}

var _ hal.Servo = (*Servo)(nil)

// NewServo returns a limp servo with its horn at ServoRest.
func NewServo(clk clock.Clock) *Servo {
	return &Servo{clk: clk, from: ServoRest, target: ServoRest, t0: clk.Now()}
}

// posLocked is the horn position at now.
func (s *Servo) posLocked(now time.Time) float64 {
	if !s.driven {
		return s.from
	}
	dist := float64(s.target) - s.from
	travel := ServoSpeed * now.Sub(s.t0).Seconds()
	switch {
	case travel+1e-6 >= math.Abs(dist):
		return float64(s.target)
	case dist >= 0:
		return s.from + travel
	default:
		return s.from - travel
	}
}

// Drive starts sending pulses of us microseconds (MinPulse-MaxPulse); the
// horn sets off from wherever it is now.
func (s *Servo) Drive(us int) error {
	if us < MinPulse || us > MaxPulse {
		return fmt.Errorf("servo pulse %d µs: %w", us, ErrRange)
	}
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = s.posLocked(now)
	s.t0 = now
	s.target = us
	s.driven = true
	s.drives++
	return nil
}

// Release stops the pulses: the horn stays where it is now, limp.
func (s *Servo) Release() error {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = s.posLocked(now)
	s.t0 = now
	s.driven = false
	return nil
}

// Position reports where the horn is now, rounded to a microsecond, and
// whether the servo is driven.
func (s *Servo) Position() (us int, driven bool) {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.posLocked(now) + 0.5), s.driven
}

// Target reports the last pulse driven (ServoRest before any).
func (s *Servo) Target() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.target
}

// Moving reports whether the horn is still travelling to its target.
func (s *Servo) Moving() bool {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.driven && s.posLocked(now) != float64(s.target)
}

// Drives counts the Drive calls since start.
func (s *Servo) Drives() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drives
}

// TravelTime is how long the horn needs to cross the given distance in µs.
func TravelTime(us int) time.Duration {
	if us < 0 {
		us = -us
	}
	return time.Duration(float64(us) / ServoSpeed * float64(time.Second))
}
