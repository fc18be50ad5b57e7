package scenes

import (
	"errors"
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/holo"
	"github.com/holofleet/holofleet/firmware/leds"
	"github.com/holofleet/holofleet/firmware/screen"
)

// Limits of scenes.
const (
	MaxScenes    = 16
	MaxSlot      = 255
	MaxNameBytes = 32
	// MaxDurationS is the longest duration_s, as the native
	// scene_started record carries whole seconds in 16 bits.
	MaxDurationS = 65535
)

// Values of then.
const (
	ThenStay    = "stay"
	ThenRestore = "restore"
	ThenOff     = "off"
)

// Values of by in scene_ended.
const (
	ByClip     = "clip"
	ByTime     = "time"
	ByEnd      = "end"
	ByReplaced = "replaced"
)

// Scene is a saved or given scene: the body of PUT /scenes/scene.
type Scene struct {
	Screen    *screen.ShowRequest `json:"screen,omitempty" doc:"as POST /screen/show"`
	LEDs      *leds.Patch         `json:"leds,omitempty" doc:"as PATCH /leds"`
	Holo      *holo.MotionRequest `json:"holo,omitempty" doc:"as POST /holo/motion"`
	Then      string              `json:"then,omitempty" doc:"stay (default), restore or off"`
	DurationS *float64            `json:"duration_s,omitempty" doc:"the scene ends after this many seconds (restore and off scenes)"`
	Slot      *int                `json:"slot,omitempty" doc:"1-255, unique among saved scenes"`
}

// then returns Then with its default.
func (s Scene) then() string {
	if s.Then == "" {
		return ThenStay
	}
	return s.Then
}

func (s Scene) slot() int {
	if s.Slot == nil {
		return 0
	}
	return *s.Slot
}

// Check validates the scene without looking at files: each part as its
// endpoint checks it, then, duration_s, slot, and that a restore or off
// scene can end. Errors are 400 (bad_request, or bad_path for the
// screen's path); a part's error names the part.
func (s Scene) Check() error {
	switch s.Then {
	case "", ThenStay, ThenRestore, ThenOff:
	default:
		return api.Errorf(api.ErrBadRequest, "then %q is not one of stay, restore, off", s.Then)
	}
	if d := s.DurationS; d != nil && (math.IsNaN(*d) || *d <= 0 || *d > MaxDurationS) {
		return api.Errorf(api.ErrBadRequest, "duration_s must be more than 0 and at most %d, not %v", MaxDurationS, *d)
	}
	if s.Slot != nil && (*s.Slot < 1 || *s.Slot > MaxSlot) {
		return api.Errorf(api.ErrBadRequest, "slot must be 1-%d, not %d", MaxSlot, *s.Slot)
	}
	if s.Screen != nil {
		if err := s.Screen.Check(); err != nil {
			return partError("screen", err)
		}
	}
	if s.LEDs != nil {
		if err := checkLEDs(*s.LEDs); err != nil {
			return partError("leds", err)
		}
	}
	if s.Holo != nil {
		if _, err := s.Holo.Validate(); err != nil {
			return partError("holo", err)
		}
	}
	if s.then() != ThenStay && s.DurationS == nil {
		if s.Screen == nil || s.Screen.Path == nil || s.Screen.Plays(true) == 0 {
			return api.Errorf(api.ErrBadRequest, "a scene with then %s needs duration_s, or a clip that does not loop forever", s.then())
		}
	}
	return nil
}

// checkLEDs checks a strip patch as PATCH /leds does.
func checkLEDs(p leds.Patch) error {
	if p.Mode != nil && leds.ModeNumber(*p.Mode) == 0xFF {
		return api.Errorf(api.ErrBadRequest, "mode %q is not one of off, solid, wipe, rainbow, flicker", *p.Mode)
	}
	if p.Colour != nil {
		if _, err := leds.ParseColour(*p.Colour); err != nil {
			return api.Errorf(api.ErrBadRequest, "colour %q: want #rrggbb, R,G,B (each 0-255) or a colour name", *p.Colour)
		}
	}
	if p.Brightness != nil && (*p.Brightness < 1 || *p.Brightness > 100) {
		return api.Errorf(api.ErrBadRequest, "brightness %d: want a percent from 1 to 100", *p.Brightness)
	}
	return nil
}

// CheckName validates a scene name.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameBytes || !utf8.ValidString(name) {
		return api.Errorf(api.ErrBadRequest, "a scene name is 1-%d bytes of UTF-8", MaxNameBytes)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return api.Errorf(api.ErrBadRequest, "a scene name has no control characters")
		}
	}
	return nil
}

// partError gives err's status and code with a message naming the part.
func partError(part string, err error) error {
	var e *api.Error
	if !errors.As(err, &e) {
		e = api.Wrap(err)
	}
	return &api.Error{Status: e.Status, Code: e.Code, Message: part + ": " + e.Message}
}
