package clock

import (
	"fmt"
	"math"
	"time"
)

// MaxSkewPPM bounds Skewed's rate error: a crystal is a few tens of parts
// per million off; more than a thousand is a broken oscillator, not a
// clock worth simulating.
const MaxSkewPPM = 1000

// Skewed is a clock that runs ppm parts per million fast (negative: slow)
// against base, as a board's crystal runs against the true time. It reads
// base's time at the moment Skewed was made, then adds base's elapsed time
// scaled by 1+ppm/1e6; its timers last their duration on the skewed clock
// (a timer of d fires after d/(1+ppm/1e6) on base).
//
// It is the simulator's crystal (docs/simulator.md): two simulated boards
// made with different rates drift apart as real boards do, which is what
// clock alignment and clip sync must survive. ppm outside ±MaxSkewPPM
// panics (a programming error); 0 returns base itself.
func Skewed(base Clock, ppm float64) Clock {
	if math.IsNaN(ppm) || math.Abs(ppm) > MaxSkewPPM {
		panic(fmt.Sprintf("clock: skew %v ppm outside ±%d", ppm, MaxSkewPPM))
	}
	if ppm == 0 {
		return base
	}
	return &skewed{base: base, origin: base.Now(), rate: 1 + ppm/1e6}
}

type skewed struct {
	base   Clock
	origin time.Time // base's and our time when made
	rate   float64   // our seconds per base second
}

func (s *skewed) Now() time.Time {
	return s.origin.Add(s.scale(s.base.Since(s.origin)))
}

func (s *skewed) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

func (s *skewed) scale(d time.Duration) time.Duration {
	return time.Duration(math.Round(float64(d) * s.rate))
}

// onBase is how long d of ours lasts on base.
func (s *skewed) onBase(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return max(time.Duration(math.Round(float64(d)/s.rate)), 1)
}

// toBase is the moment on base at which we read t.
func (s *skewed) toBase(t time.Time) time.Time {
	return s.origin.Add(time.Duration(math.Round(float64(t.Sub(s.origin)) / s.rate)))
}

func (s *skewed) NewTimer(d time.Duration) Timer {
	return skewedTimer{s: s, t: s.base.NewTimer(s.onBase(d))}
}

func (s *skewed) NewTicker(d time.Duration) Ticker {
	return skewedTicker{s: s, t: s.base.NewTicker(s.onBase(d))}
}

func (s *skewed) AfterFunc(d time.Duration, f func()) Timer {
	return skewedTimer{s: s, t: s.base.AfterFunc(s.onBase(d), f)}
}

// The channels deliver base's time, as the base clock's timers do: the
// project reads the time from its clock, never from a timer's value.
type skewedTimer struct {
	s *skewed
	t Timer
}

func (t skewedTimer) C() <-chan time.Time        { return t.t.C() }
func (t skewedTimer) Stop() bool                 { return t.t.Stop() }
func (t skewedTimer) Reset(d time.Duration) bool { return t.t.Reset(t.s.onBase(d)) }

type skewedTicker struct {
	s *skewed
	t Ticker
}

func (t skewedTicker) C() <-chan time.Time   { return t.t.C() }
func (t skewedTicker) Stop()                 { t.t.Stop() }
func (t skewedTicker) Reset(d time.Duration) { t.t.Reset(t.s.onBase(d)) }
