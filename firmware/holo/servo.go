package holo

import (
	"fmt"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Servo ids.
const (
	Pan  = "pan"  // x: left (-1) to right (1)
	Tilt = "tilt" // y: down (-1) to up (1)
	All  = "all"  // both, for release only
)

// Calibration and pulse limits.
const (
	MinPulseUS   = 500
	MaxPulseUS   = 2500
	MinSpan      = 100  // µs between the ends at least
	DefaultMinUS = 1000 // the mapping of an uncalibrated servo
	DefaultMaxUS = 2000
	// EndMargin is how near an end (as a fraction of the travel) a
	// settled servo counts as being at that end for its drive policy.
	EndMargin = 0.03
)

// Calibration is a servo's pulse at the closed end (MinUS, x or y = -1)
// and at the open end (MaxUS, 1) of the holo's travel.
type Calibration struct {
	MinUS int `json:"min_us"`
	MaxUS int `json:"max_us"`
}

// Validate checks both ends are 500-2500 µs and at least MinSpan apart.
func (c Calibration) Validate() error {
	for _, v := range []int{c.MinUS, c.MaxUS} {
		if v < MinPulseUS || v > MaxPulseUS {
			return calError("calibration %d µs: each end must be %s", v, formatRange(MinPulseUS, MaxPulseUS))
		}
	}
	if d := c.MaxUS - c.MinUS; d < MinSpan && d > -MinSpan {
		return calError("calibration %d-%d µs: the ends must be at least %d µs apart", c.MinUS, c.MaxUS, MinSpan)
	}
	return nil
}

// Policy says whether a servo stays driven once it has settled.
type Policy struct {
	HoldAtEnds  bool `json:"hold_at_ends"`
	HoldBetween bool `json:"hold_between"`
}

// DefaultPolicy releases at the ends and holds between them.
var DefaultPolicy = Policy{HoldAtEnds: false, HoldBetween: true}

// ServoRecord is one servo as GET /servos reports it.
type ServoRecord struct {
	ID         string `json:"id"`
	US         int    `json:"us"`          // the pulse last sent; 0 before any
	PositionUS int    `json:"position_us"` // where the horn is now
	Driven     bool   `json:"driven"`
	Moving     bool   `json:"moving"`
	Calibrated bool   `json:"calibrated"`
	MinUS      int    `json:"min_us"` // the calibration, or the default mapping
	MaxUS      int    `json:"max_us"`
	Policy     Policy `json:"policy"`
}

// Servos is the body of GET /servos and the reply of the servo actions.
type Servos struct {
	Servos []ServoRecord `json:"servos"`
}

// saved is what the Store keeps per servo under "servo/<id>".
type saved struct {
	Calibration *Calibration `json:"calibration"`
	Policy      Policy       `json:"policy"`
}

func storeKey(id string) string { return "servo/" + id }

// axis is one servo with its settings.
type axis struct {
	id     string
	hw     hal.Servo
	cal    *Calibration
	policy Policy
	sent   int  // last pulse sent, 0 before any
	settle bool // check the policy once the horn arrives
}

func (a *axis) ends() (lo, hi int) {
	if a.cal == nil {
		return DefaultMinUS, DefaultMaxUS
	}
	return a.cal.MinUS, a.cal.MaxUS
}

// toUS maps a position -1..1 to a pulse.
func (a *axis) toUS(v float64) int {
	lo, hi := a.ends()
	v = max(-1, min(1, v))
	f := float64(lo) + (v+1)/2*float64(hi-lo)
	if f < 0 {
		return int(f - 0.5)
	}
	return int(f + 0.5)
}

// toPos maps a pulse to -1..1 (beyond when outside the ends).
func (a *axis) toPos(us int) float64 {
	lo, hi := a.ends()
	return 2*float64(us-lo)/float64(hi-lo) - 1
}

func (a *axis) record() ServoRecord {
	pos, driven := a.hw.Position()
	lo, hi := a.ends()
	return ServoRecord{ID: a.id, US: a.sent, PositionUS: pos, Driven: driven,
		Moving: driven && a.sent != 0 && pos != a.sent, Calibrated: a.cal != nil,
		MinUS: lo, MaxUS: hi, Policy: a.policy}
}

func (a *axis) drive(us int) error {
	if err := a.hw.Drive(us); err != nil {
		return fmt.Errorf("holo: driving %s to %d µs: %w", a.id, us, err)
	}
	a.sent = us
	a.settle = true
	return nil
}

func (a *axis) release() error {
	a.settle = false
	if err := a.hw.Release(); err != nil {
		return fmt.Errorf("holo: releasing %s: %w", a.id, err)
	}
	return nil
}

// settled applies the drive policy once the horn has arrived; it reports
// whether the servo still waits to arrive.
func (a *axis) settled() (waiting bool, err error) {
	if !a.settle {
		return false, nil
	}
	pos, driven := a.hw.Position()
	if !driven {
		a.settle = false
		return false, nil
	}
	if pos != a.sent {
		return true, nil
	}
	a.settle = false
	hold := a.policy.HoldBetween
	if a.cal != nil {
		lo, hi := a.ends()
		margin := EndMargin * float64(hi-lo)
		if margin < 0 {
			margin = -margin
		}
		d1, d2 := float64(pos-lo), float64(pos-hi)
		if d1 <= margin && d1 >= -margin || d2 <= margin && d2 >= -margin {
			hold = a.policy.HoldAtEnds
		}
	}
	if hold {
		return false, nil
	}
	return false, a.release()
}

func calError(format string, args ...any) error {
	return &apiError{api.Errorf(api.ErrBadRequest, format, args...), ErrCalibration}
}

// apiError is an *api.Error that also matches one of this package's
// sentinels with errors.Is.
type apiError struct {
	e        *api.Error
	sentinel error
}

func (e *apiError) Error() string   { return e.e.Message }
func (e *apiError) Unwrap() []error { return []error{e.e, e.sentinel} }
