package holo

import (
	"fmt"
	"math"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// State motions that are not request motions.
const (
	StateHold = "hold" // still, driven or released by policy
	StateOff  = "off"  // limp after off or release
)

// The body of POST /holo/motion (and the holo part of a scene), its
// motions, defaults, limits and rules are boardapi.MotionRequest: the
// gateway checks a motion as the board does.

// The native HOLO payload and its decoding (boardapi.MotionFromNative)
// are the board API's too.

// point is a position, each axis -1..1.
type point struct{ x, y float64 }

func (p point) clamp() point {
	return point{max(-1, min(1, p.x)), max(-1, min(1, p.y))}
}

// behaviour is a running motion: where the holo should be e after it
// started, and whether it has ended.
type behaviour struct {
	name   string
	req    boardapi.MotionRequest
	p      boardapi.MotionParams
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
	case boardapi.MotionCenter, boardapi.MotionMove, boardapi.MotionNudge:
		if period <= 0 || e >= period {
			return b.target, true
		}
		f := float64(e) / float64(period)
		return point{b.home.x + (b.target.x-b.home.x)*f, b.home.y + (b.target.y-b.home.y)*f}, false
	case boardapi.MotionWag, boardapi.MotionNod:
		c, done := cycles()
		if done {
			return b.home, true
		}
		off := a * math.Sin(2*math.Pi*c)
		if b.name == boardapi.MotionWag {
			return point{b.home.x + off, b.home.y}.clamp(), false
		}
		return point{b.home.x, b.home.y + off}.clamp(), false
	case boardapi.MotionScan:
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
	case boardapi.MotionCircle:
		c, done := cycles()
		if done {
			return point{0, a}, true
		}
		return point{a * math.Sin(2*math.Pi*c), a * math.Cos(2*math.Pi*c)}.clamp(), false
	case boardapi.MotionTwitch:
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
