package action

import (
	"fmt"
	"math"
	"net/http"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/frame"
)

// SceneApply is the body of scene_apply (POST /scenes/apply): a saved
// scene by name or by slot, or a whole scene (with an optional name it
// goes by). Exactly one of the three forms.
type SceneApply boardapi.SceneApply

// Kind returns KindSceneApply.
func (SceneApply) Kind() Kind { return KindSceneApply }

// Validate checks the form, the name (1-32 bytes, no control
// characters), the slot (1-255) and a given scene as PUT /scenes/scene
// checks it. Whether a named scene exists is the board's to say.
func (b SceneApply) Validate() error {
	switch {
	case b.Scene != nil && b.Slot == nil:
		if b.Name != nil {
			if err := boardapi.CheckSceneName(*b.Name); err != nil {
				return invalid(b.Kind(), err)
			}
		}
		return invalid(b.Kind(), b.Scene.Check())
	case b.Name != nil && b.Slot == nil:
		return invalid(b.Kind(), boardapi.CheckSceneName(*b.Name))
	case b.Slot != nil && b.Name == nil && b.Scene == nil:
		if *b.Slot < 1 || *b.Slot > boardapi.MaxSceneSlot {
			return fmt.Errorf("%w: %s: slot must be 1-%d, not %d", ErrInvalid, b.Kind(), boardapi.MaxSceneSlot, *b.Slot)
		}
		return nil
	}
	return fmt.Errorf("%w: %s: give name, slot, or scene (with an optional name)", ErrInvalid, b.Kind())
}

// Request returns POST /scenes/apply with the body.
func (b SceneApply) Request() Request {
	return Request{Method: http.MethodPost, Path: "/scenes/apply", Body: encode(b)}
}

// Native returns SCENE for a scene by slot.
func (b SceneApply) Native() (frame.Request, bool) {
	if b.Slot == nil || b.Name != nil || b.Scene != nil || *b.Slot < 1 || *b.Slot > boardapi.MaxSceneSlot {
		return nil, false
	}
	return frame.SceneRequest{Slot: uint8(*b.Slot)}, true
}

// SceneEnd is the body of scene_end (POST /scenes/end): none, or {}.
type SceneEnd struct{}

// Kind returns KindSceneEnd.
func (SceneEnd) Kind() Kind { return KindSceneEnd }

// Validate accepts the empty body.
func (SceneEnd) Validate() error { return nil }

// Request returns POST /scenes/end without a body.
func (SceneEnd) Request() Request { return Request{Method: http.MethodPost, Path: "/scenes/end"} }

// Native returns END.
func (SceneEnd) Native() (frame.Request, bool) { return frame.EndRequest{}, true }

// ScreenOff is the body of screen_off (DELETE /screen): none, or {}.
type ScreenOff struct{}

// Kind returns KindScreenOff.
func (ScreenOff) Kind() Kind { return KindScreenOff }

// Validate accepts the empty body.
func (ScreenOff) Validate() error { return nil }

// Request returns DELETE /screen without a body.
func (ScreenOff) Request() Request { return Request{Method: http.MethodDelete, Path: "/screen"} }

// Native returns SCREEN_OFF.
func (ScreenOff) Native() (frame.Request, bool) { return frame.ScreenOffRequest{}, true }

// LEDs is the body of leds (PATCH /leds): any of mode, colour, loop and
// brightness; fields left out are left as they are.
type LEDs boardapi.LEDPatch

// Brightness bounds of the strip, in percent. 0 is not a brightness: the
// native LEDS message uses it for "leave as is"; mode off darkens the
// strip.
const (
	MinBrightness = 1
	MaxBrightness = 100
)

// Kind returns KindLEDs.
func (LEDs) Kind() Kind { return KindLEDs }

// Validate checks the mode (off, solid, wipe, rainbow, flicker), the
// colour (#rrggbb, R,G,B or a colour name) and the brightness (1-100).
func (b LEDs) Validate() error {
	if b.Mode != nil && boardapi.LEDModeNumber(*b.Mode) == boardapi.LEDModeUnknown {
		return fmt.Errorf("%w: %s: mode %q is not one of off, solid, wipe, rainbow, flicker", ErrInvalid, b.Kind(), *b.Mode)
	}
	if b.Colour != nil {
		if _, err := boardapi.ParseColour(*b.Colour); err != nil {
			return fmt.Errorf("%w: %s: colour %q: want #rrggbb, R,G,B (each 0-255) or a colour name", ErrInvalid, b.Kind(), *b.Colour)
		}
	}
	if b.Brightness != nil && (*b.Brightness < MinBrightness || *b.Brightness > MaxBrightness) {
		return fmt.Errorf("%w: %s: brightness %d: want a percent from %d to %d (mode off darkens the strip)",
			ErrInvalid, b.Kind(), *b.Brightness, MinBrightness, MaxBrightness)
	}
	return nil
}

// Request returns PATCH /leds with the body.
func (b LEDs) Request() Request {
	return Request{Method: http.MethodPatch, Path: "/leds", Body: encode(b)}
}

// Native returns LEDS when loop is given (the message always sets it).
func (b LEDs) Native() (frame.Request, bool) {
	if b.Loop == nil || b.Validate() != nil {
		return nil, false
	}
	r := frame.LEDsRequest{Mode: frame.LEDKeep}
	if *b.Loop {
		r.Flags |= frame.LEDLoop
	}
	if b.Mode != nil {
		r.Mode = frame.LEDMode(boardapi.LEDModeNumber(*b.Mode))
	}
	if b.Colour != nil {
		c, _ := boardapi.ParseColour(*b.Colour)
		r.R, r.G, r.B = c.R, c.G, c.B
		r.Flags |= frame.LEDNewColour
	}
	if b.Brightness != nil {
		r.Brightness = uint8(*b.Brightness)
	}
	return r, true
}

// ScreenShow is the body of screen_show (POST /screen/show): one of path
// (with loop or loops), colour or calibration.
type ScreenShow boardapi.ShowRequest

// Kind returns KindScreenShow.
func (ScreenShow) Kind() Kind { return KindScreenShow }

// Validate checks the body as the board does before looking at files.
func (b ScreenShow) Validate() error { return invalid(b.Kind(), boardapi.ShowRequest(b).Check()) }

// Request returns POST /screen/show with the body.
func (b ScreenShow) Request() Request {
	return Request{Method: http.MethodPost, Path: "/screen/show", Body: encode(b)}
}

// Native returns COLOUR for a colour alone.
func (b ScreenShow) Native() (frame.Request, bool) {
	if b.Colour == nil || b.Path != nil || b.Loop != nil || b.Loops != nil || b.Calibration != nil {
		return nil, false
	}
	c, err := boardapi.ParseColour(*b.Colour)
	if err != nil {
		return nil, false
	}
	return frame.ColourRequest{R: c.R, G: c.G, B: c.B}, true
}

// Holo is the body of holo (POST /holo/motion): a motion and its
// parameters.
type Holo boardapi.MotionRequest

// Kind returns KindHolo.
func (Holo) Kind() Kind { return KindHolo }

// Validate checks the motion and its parameters as the board does.
func (b Holo) Validate() error {
	_, err := boardapi.MotionRequest(b).Validate()
	return invalid(b.Kind(), err)
}

// Request returns POST /holo/motion with the body.
func (b Holo) Request() Request {
	return Request{Method: http.MethodPost, Path: "/holo/motion", Body: encode(b)}
}

// Native returns HOLO when the message says the same: x and y both given
// for move and nudge, in whole hundredths that fit the byte (-100..100
// for move, -128..127 for nudge), neither for other motions; duration_ms,
// range and count from 1 (the message's 0 is "the default", which the
// body says by leaving them out); no interval_s.
func (b Holo) Native() (frame.Request, bool) {
	if b.Validate() != nil || b.IntervalS != nil {
		return nil, false
	}
	m, err := frame.ParseMotion(b.Motion)
	if err != nil {
		return nil, false
	}
	r := frame.HoloRequest{Motion: m}
	switch m {
	case frame.MotionMove, frame.MotionNudge:
		lo, hi := frame.MinMove, frame.MaxMove
		if m == frame.MotionNudge {
			lo, hi = math.MinInt8, math.MaxInt8
		}
		if b.X == nil || b.Y == nil {
			return nil, false
		}
		x, okX := hundredths(*b.X, lo, hi)
		y, okY := hundredths(*b.Y, lo, hi)
		if !okX || !okY {
			return nil, false
		}
		r.X, r.Y = int8(x), int8(y)
	default:
		if b.X != nil || b.Y != nil {
			return nil, false
		}
	}
	for _, p := range []struct {
		v      *int
		hi     int
		assign func(int)
	}{
		{b.DurationMS, math.MaxUint16, func(v int) { r.DurationMS = uint16(v) }},
		{b.Range, math.MaxUint8, func(v int) { r.Range = uint8(v) }},
		{b.Count, math.MaxUint8, func(v int) { r.Count = uint8(v) }},
	} {
		if p.v == nil {
			continue
		}
		if *p.v < 1 || *p.v > p.hi {
			return nil, false
		}
		p.assign(*p.v)
	}
	return r, true
}

// hundredths returns v*100 when it is a whole number in lo..hi (the
// native byte's resolution; 0.255 has none).
func hundredths(v float64, lo, hi int) (int, bool) {
	h := math.Round(v * 100)
	if math.Abs(h-v*100) > 1e-6 || h < float64(lo) || h > float64(hi) {
		return 0, false
	}
	return int(h), true
}
