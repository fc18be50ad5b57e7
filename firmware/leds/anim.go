package leds

import (
	"image/color"
	"math"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// Animation timing.
const (
	FrameRate     = 50                      // frames per second
	FrameInterval = time.Second / FrameRate // 20 ms
	WipeStep      = FrameInterval           // one more LED per frame
	RainbowPeriod = 6 * time.Second         // one full turn of hues
	FlickerStep   = 60 * time.Millisecond   // a flicker key level every 60 ms
	FlickerLow    = 55                      // percent: the dimmest flicker level
	flickerSpan   = 100 - FlickerLow        // percent between dimmest and full
)

// look is what the strip is asked to show.
type look struct {
	mode       string
	colour     color.RGBA
	loop       bool
	brightness int
}

// render writes the frame at elapsed time e into px (len(px) LEDs) and
// reports whether the picture is still from now on.
func (l look) render(px []color.RGBA, e time.Duration, seed uint64) (still bool) {
	n := len(px)
	black := color.RGBA{0, 0, 0, 0xff}
	if e < 0 {
		e = 0
	}
	switch l.mode {
	case boardapi.LEDModeSolid:
		for i := range px {
			px[i] = l.colour
		}
		still = true
	case boardapi.LEDModeWipe:
		k := int(e / WipeStep)
		if n == 0 {
			return true
		}
		if !l.loop {
			lit := min(n, k+1)
			for i := range px {
				px[i] = black
				if i < lit {
					px[i] = l.colour
				}
			}
			still = lit == n
			break
		}
		p := k % (2 * n)
		for i := range px {
			if p < n {
				px[i] = black
				if i <= p {
					px[i] = l.colour
				}
			} else {
				px[i] = l.colour
				if i <= p-n {
					px[i] = black
				}
			}
		}
	case boardapi.LEDModeRainbow:
		turn := float64(e) / float64(RainbowPeriod)
		if !l.loop && turn >= 1 {
			turn, still = 0, true
		}
		for i := range px {
			px[i] = hue(float64(i)/float64(max(n, 1)) + turn)
		}
	case boardapi.LEDModeFlicker:
		step := uint64(e / FlickerStep)
		frac := float64(e%FlickerStep) / float64(FlickerStep)
		for i := range px {
			a := flickerLevel(seed, uint64(i), step)
			b := flickerLevel(seed, uint64(i), step+1)
			px[i] = scale(l.colour, a+(b-a)*frac)
		}
	default: // off
		for i := range px {
			px[i] = black
		}
		still = true
	}
	for i := range px {
		px[i] = scale(px[i], float64(l.brightness)/100)
	}
	return still
}

// flickerLevel is a pseudo-random level in [FlickerLow/100, 1] for one LED
// at one key step: a hash, so the flicker is a function of time alone.
func flickerLevel(seed, led, step uint64) float64 {
	x := seed ^ led*0x9E3779B97F4A7C15 ^ step*0xC2B2AE3D27D4EB4F
	x ^= x >> 33
	x *= 0xFF51AFD7ED558CCD
	x ^= x >> 33
	x *= 0xC4CEB9FE1A85EC53
	x ^= x >> 33
	return (FlickerLow + float64(x%1000)/1000*flickerSpan) / 100
}

// hue returns the fully saturated colour at hue h (turns; any real).
func hue(h float64) color.RGBA {
	h -= math.Floor(h)
	h *= 6
	sector := int(h)
	f := h - float64(sector)
	up := uint8(math.Round(255 * f))
	down := 255 - up
	switch sector {
	case 0:
		return color.RGBA{255, up, 0, 0xff}
	case 1:
		return color.RGBA{down, 255, 0, 0xff}
	case 2:
		return color.RGBA{0, 255, up, 0xff}
	case 3:
		return color.RGBA{0, down, 255, 0xff}
	case 4:
		return color.RGBA{up, 0, 255, 0xff}
	default:
		return color.RGBA{255, 0, down, 0xff}
	}
}

// scale multiplies the colour channels by f (0-1), rounding.
func scale(c color.RGBA, f float64) color.RGBA {
	s := func(v uint8) uint8 { return uint8(math.Round(float64(v) * f)) }
	return color.RGBA{s(c.R), s(c.G), s(c.B), 0xff}
}
