package holo

import (
	"fmt"
	"math"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
)

// Motion names; a motion's index in Motions is its native number.
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

// State motions that are not request motions.
const (
	StateHold = "hold" // still, driven or released by policy
	StateOff  = "off"  // limp after off or release
)

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

// Params are a motion's parameters with the defaults filled in.
type Params struct {
	Duration  time.Duration
	Range     float64 // fraction of the half travel, 0.01-1
	Count     int     // 0: until replaced
	IntervalS [2]float64
}

// Defaults per motion, used for parameters left out (or 0 natively).
var Defaults = map[string]Params{
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
	MaxDurationMS = 65535
	MaxCount      = 255
	MinIntervalS  = 0.1
	MaxIntervalS  = 600
)

func motionError(format string, args ...any) error {
	return &apiError{api.Errorf(api.ErrBadRequest, format, args...), ErrMotion}
}

// Validate checks the request and returns its parameters with defaults.
// Errors are bad_request and match ErrMotion.
func (m MotionRequest) Validate() (Params, error) {
	p, ok := Defaults[m.Motion]
	if !ok {
		return Params{}, motionError("motion %q is not one of center, move, nudge, twitch, wag, nod, scan, circle, stop, off", m.Motion)
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
			return Params{}, motionError("%s %v: want a number from %v to %v", a.name, *a.v, -lim, lim)
		}
	}
	if m.DurationMS != nil {
		d := *m.DurationMS
		if d < 0 || d > MaxDurationMS {
			return Params{}, motionError("duration_ms %d: want 0-%d (0 takes the default)", d, MaxDurationMS)
		}
		if d > 0 {
			p.Duration = time.Duration(d) * time.Millisecond
		}
	}
	if m.Range != nil {
		r := *m.Range
		if r < 0 || r > 100 {
			return Params{}, motionError("range %d: want a percent 1-100 (0 takes the default)", r)
		}
		if r > 0 {
			p.Range = float64(r) / 100
		}
	}
	if m.Count != nil {
		c := *m.Count
		if c < 0 || c > MaxCount {
			return Params{}, motionError("count %d: want 0-%d (0 repeats until replaced)", c, MaxCount)
		}
		p.Count = c
	}
	if m.IntervalS != nil {
		iv := m.IntervalS
		if len(iv) != 2 || math.IsNaN(iv[0]) || math.IsNaN(iv[1]) ||
			iv[0] < MinIntervalS || iv[1] > MaxIntervalS || iv[0] > iv[1] {
			return Params{}, motionError("interval_s %v: want [min, max] seconds with %v <= min <= max <= %v", iv, MinIntervalS, MaxIntervalS)
		}
		p.IntervalS = [2]float64{iv[0], iv[1]}
	}
	return p, nil
}

// DecodeMotion reads a POST /holo/motion body strictly (unknown fields,
// wrong types and bad JSON are errors, as api.DecodeBytes gives them) and
// validates it.
func DecodeMotion(b []byte) (MotionRequest, error) {
	var m MotionRequest
	if err := api.DecodeBytes(b, &m, false); err != nil {
		return MotionRequest{}, err
	}
	if _, err := m.Validate(); err != nil {
		return MotionRequest{}, err
	}
	return m, nil
}

// Native HOLO message (type 0x40) payload, 7 bytes, little-endian:
//
//	0    motion       0-9, the index in Motions
//	1    x            s8, hundredths: -100..100 for move, -128..127 for nudge
//	2    y            s8, likewise
//	3-4  duration_ms  u16, 0 takes the default
//	5    range        u8 percent, 0 takes the default
//	6    count        u8, 0 takes the default (repeat until replaced)
const NativeLen = 7

// FromNative turns a native HOLO payload into a MotionRequest (x and y
// only for move and nudge). The result still goes through Motion, which
// validates it.
func FromNative(payload []byte) (MotionRequest, error) {
	if len(payload) != NativeLen {
		return MotionRequest{}, motionError("HOLO payload is %d bytes, want %d", len(payload), NativeLen)
	}
	n := int(payload[0])
	if n >= len(Motions) {
		return MotionRequest{}, motionError("motion number %d: want 0-%d", n, len(Motions)-1)
	}
	m := MotionRequest{Motion: Motions[n]}
	x, y := int(int8(payload[1])), int(int8(payload[2]))
	switch m.Motion {
	case MotionMove:
		if x < -100 || x > 100 || y < -100 || y > 100 {
			return MotionRequest{}, motionError("move x %d, y %d: want -100..100", x, y)
		}
		fallthrough
	case MotionNudge:
		fx, fy := float64(x)/100, float64(y)/100
		m.X, m.Y = &fx, &fy
	}
	if d := int(payload[3]) | int(payload[4])<<8; d != 0 {
		m.DurationMS = &d
	}
	if r := int(payload[5]); r != 0 {
		m.Range = &r
	}
	if c := int(payload[6]); c != 0 {
		m.Count = &c
	}
	return m, nil
}

// point is a position, each axis -1..1.
type point struct{ x, y float64 }

func (p point) clamp() point {
	return point{max(-1, min(1, p.x)), max(-1, min(1, p.y))}
}

// behaviour is a running motion: where the holo should be e after it
// started, and whether it has ended.
type behaviour struct {
	name   string
	req    MotionRequest
	p      Params
	home   point // where it was at the start
	target point // for center, move, nudge
	seed   uint64
	tw     twitchAt
}

// twitchAt is the twitch walk so far: i twitches done, the last at t.
type twitchAt struct {
	i   uint64
	t   time.Duration
	pos point
}

// at returns the wanted position at elapsed e and whether the motion has
// done all it will (after which the holo holds the returned point).
func (b *behaviour) at(e time.Duration) (point, bool) {
	period := b.p.Duration
	cycles := func() (float64, bool) {
		if period <= 0 {
			return 0, true
		}
		c := float64(e) / float64(period)
		if b.p.Count > 0 && c >= float64(b.p.Count) {
			return 0, true
		}
		return c - math.Floor(c), false
	}
	a := b.p.Range
	switch b.name {
	case MotionCenter, MotionMove, MotionNudge:
		if period <= 0 || e >= period {
			return b.target, true
		}
		f := float64(e) / float64(period)
		return point{b.home.x + (b.target.x-b.home.x)*f, b.home.y + (b.target.y-b.home.y)*f}, false
	case MotionWag, MotionNod:
		c, done := cycles()
		if done {
			return b.home, true
		}
		off := a * math.Sin(2*math.Pi*c)
		if b.name == MotionWag {
			return point{b.home.x + off, b.home.y}.clamp(), false
		}
		return point{b.home.x, b.home.y + off}.clamp(), false
	case MotionScan:
		c, done := cycles()
		if done {
			return point{0, b.home.y}, true
		}
		// Even speed: a triangle wave 0 -> a -> 0 -> -a -> 0.
		var tri float64
		switch {
		case c < 0.25:
			tri = 4 * c
		case c < 0.75:
			tri = 2 - 4*c
		default:
			tri = 4*c - 4
		}
		return point{a * tri, b.home.y}.clamp(), false
	case MotionCircle:
		c, done := cycles()
		if done {
			return point{0, a}, true
		}
		return point{a * math.Sin(2*math.Pi*c), a * math.Cos(2*math.Pi*c)}.clamp(), false
	case MotionTwitch:
		// Twitch i happens at t_i = the sum of the first i+1 pauses;
		// between twitches the holo holds the last twitch's point. The
		// walk resumes from the last twitch passed, as e only grows.
		tw := &b.tw
		if e < tw.t {
			*tw = twitchAt{pos: b.home}
		}
		for {
			lo, hi := b.p.IntervalS[0], b.p.IntervalS[1]
			next := tw.t + time.Duration((lo+(hi-lo)*unit(b.seed, tw.i, 0))*float64(time.Second))
			if e < next {
				return tw.pos, false
			}
			if b.p.Count > 0 && tw.i >= uint64(b.p.Count) {
				return b.home, true // one more pause after the last twitch, then home
			}
			tw.t = next
			tw.pos = point{b.home.x + a*(2*unit(b.seed, tw.i, 1)-1), b.home.y + a*(2*unit(b.seed, tw.i, 2)-1)}.clamp()
			tw.i++
		}
	}
	return b.home, true
}

// unit is a pseudo-random number in [0, 1) from a seed and two counters:
// a hash, so a twitch's schedule is a function of time alone.
func unit(seed, i, k uint64) float64 {
	x := seed ^ (i+1)*0x9E3779B97F4A7C15 ^ (k+1)*0xC2B2AE3D27D4EB4F
	x ^= x >> 33
	x *= 0xFF51AFD7ED558CCD
	x ^= x >> 33
	x *= 0xC4CEB9FE1A85EC53
	x ^= x >> 33
	return float64(x>>11) / (1 << 53)
}

// formatRange is for messages.
func formatRange(lo, hi int) string { return fmt.Sprintf("%d-%d µs", lo, hi) }
