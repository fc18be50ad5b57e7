package boardapi

import (
	"math"
	"time"
)

// Holo motion names; a motion's index in Motions is its native HOLO
// motion number.
const (
	MotionCenter = "center"
	MotionMove   = "move"
	MotionNudge  = "nudge"
	MotionTwitch = "twitch"
	MotionWag    = "wag"
	MotionNod    = "nod"
	MotionScan   = "scan"
	MotionCircle = "circle"
	MotionStop   = "stop"
	MotionOff    = "off"
)

// Motions lists the motions by native number.
var Motions = []string{MotionCenter, MotionMove, MotionNudge, MotionTwitch, MotionWag,
	MotionNod, MotionScan, MotionCircle, MotionStop, MotionOff}

// MotionRequest is the body of POST /holo/motion and the holo part of a
// scene. Pointer fields are optional.
type MotionRequest struct {
	Motion     string    `json:"motion"`
	X          *float64  `json:"x,omitempty"`
	Y          *float64  `json:"y,omitempty"`
	DurationMS *int      `json:"duration_ms,omitempty"`
	Range      *int      `json:"range,omitempty"`
	Count      *int      `json:"count,omitempty"`
	IntervalS  []float64 `json:"interval_s,omitempty"`
}

// MotionParams are a motion's parameters with the defaults filled in.
type MotionParams struct {
	Duration  time.Duration
	Range     float64 // fraction of the half travel, 0.01-1
	Count     int     // 0: until replaced
	IntervalS [2]float64
}

// MotionDefaults per motion, used for parameters left out (or 0
// natively).
var MotionDefaults = map[string]MotionParams{
	MotionCenter: {},
	MotionMove:   {},
	MotionNudge:  {},
	MotionTwitch: {Range: 0.15, IntervalS: [2]float64{1, 4}},
	MotionWag:    {Duration: 800 * time.Millisecond, Range: 0.30},
	MotionNod:    {Duration: 1000 * time.Millisecond, Range: 0.30},
	MotionScan:   {Duration: 8 * time.Second, Range: 1},
	MotionCircle: {Duration: 3 * time.Second, Range: 0.5},
	MotionStop:   {},
	MotionOff:    {},
}

// Limits of the motion parameters.
const (
	MaxMotionDurationMS = 65535
	MaxMotionCount      = 255
	MinMotionIntervalS  = 0.1
	MaxMotionIntervalS  = 600
)

// MotionError returns a bad_request error matching ErrMotion.
func MotionError(format string, args ...any) error {
	return Rulef(ErrMotion, ErrBadRequest, format, args...)
}

// Validate checks the request and returns its parameters with defaults.
// Errors are bad_request and match ErrMotion.
func (m MotionRequest) Validate() (MotionParams, error) {
	p, ok := MotionDefaults[m.Motion]
	if !ok {
		return MotionParams{}, MotionError("motion %q is not one of center, move, nudge, twitch, wag, nod, scan, circle, stop, off", m.Motion)
	}
	lim := 1.0
	if m.Motion == MotionNudge {
		lim = 2
	}
	for _, a := range []struct {
		name string
		v    *float64
	}{{"x", m.X}, {"y", m.Y}} {
		if a.v != nil && (math.IsNaN(*a.v) || *a.v < -lim || *a.v > lim) {
			return MotionParams{}, MotionError("%s %v: want a number from %v to %v", a.name, *a.v, -lim, lim)
		}
	}
	if m.DurationMS != nil {
		d := *m.DurationMS
		if d < 0 || d > MaxMotionDurationMS {
			return MotionParams{}, MotionError("duration_ms %d: want 0-%d (0 takes the default)", d, MaxMotionDurationMS)
		}
		if d > 0 {
			p.Duration = time.Duration(d) * time.Millisecond
		}
	}
	if m.Range != nil {
		r := *m.Range
		if r < 0 || r > 100 {
			return MotionParams{}, MotionError("range %d: want a percent 1-100 (0 takes the default)", r)
		}
		if r > 0 {
			p.Range = float64(r) / 100
		}
	}
	if m.Count != nil {
		c := *m.Count
		if c < 0 || c > MaxMotionCount {
			return MotionParams{}, MotionError("count %d: want 0-%d (0 repeats until replaced)", c, MaxMotionCount)
		}
		p.Count = c
	}
	if m.IntervalS != nil {
		iv := m.IntervalS
		if len(iv) != 2 || math.IsNaN(iv[0]) || math.IsNaN(iv[1]) ||
			iv[0] < MinMotionIntervalS || iv[1] > MaxMotionIntervalS || iv[0] > iv[1] {
			return MotionParams{}, MotionError("interval_s %v: want [min, max] seconds with %v <= min <= max <= %v", iv, MinMotionIntervalS, MaxMotionIntervalS)
		}
		p.IntervalS = [2]float64{iv[0], iv[1]}
	}
	return p, nil
}

// DecodeMotion reads a POST /holo/motion body strictly (unknown fields,
// wrong types and bad JSON are errors, as DecodeBytes gives them) and
// validates it.
func DecodeMotion(b []byte) (MotionRequest, error) {
	var m MotionRequest
	if err := DecodeBytes(b, &m, false); err != nil {
		return MotionRequest{}, err
	}
	if _, err := m.Validate(); err != nil {
		return MotionRequest{}, err
	}
	return m, nil
}
