package boardapi

import (
	"math"
	"unicode"
	"unicode/utf8"
)

// Limits of scenes.
const (
	MaxScenes         = 16  // saved scenes per board
	MaxSceneSlot      = 255 // slots are 1-MaxSceneSlot
	MaxSceneNameBytes = 32
	// MaxSceneDurationS is the longest duration_s, as the native
	// scene_started record carries whole seconds in 16 bits.
	MaxSceneDurationS = 65535
)

// Values of a scene's then: what happens when it ends.
const (
	SceneThenStay    = "stay"
	SceneThenRestore = "restore"
	SceneThenOff     = "off"
)

// Scene is a saved or given scene: the body of PUT /scenes/scene, and the
// scene of a SceneApply.
type Scene struct {
	Screen    *ShowRequest   `json:"screen,omitempty" doc:"as POST /screen/show"`
	LEDs      *LEDPatch      `json:"leds,omitempty" doc:"as PATCH /leds"`
	Holo      *MotionRequest `json:"holo,omitempty" doc:"as POST /holo/motion"`
	Then      string         `json:"then,omitempty" doc:"stay (default), restore or off"`
	DurationS *float64       `json:"duration_s,omitempty" doc:"the scene ends after this many seconds (restore and off scenes)"`
	Slot      *int           `json:"slot,omitempty" doc:"1-255, unique among saved scenes"`
}

// ThenOrDefault returns Then with its default, SceneThenStay.
func (s Scene) ThenOrDefault() string {
	if s.Then == "" {
		return SceneThenStay
	}
	return s.Then
}

// SlotOrZero returns the scene's slot, 0 when it has none.
func (s Scene) SlotOrZero() int {
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
	case "", SceneThenStay, SceneThenRestore, SceneThenOff:
	default:
		return Errorf(ErrBadRequest, "then %q is not one of stay, restore, off", s.Then)
	}
	if d := s.DurationS; d != nil && (math.IsNaN(*d) || *d <= 0 || *d > MaxSceneDurationS) {
		return Errorf(ErrBadRequest, "duration_s must be more than 0 and at most %d, not %v", MaxSceneDurationS, *d)
	}
	if s.Slot != nil && (*s.Slot < 1 || *s.Slot > MaxSceneSlot) {
		return Errorf(ErrBadRequest, "slot must be 1-%d, not %d", MaxSceneSlot, *s.Slot)
	}
	if s.Screen != nil {
		if err := s.Screen.Check(); err != nil {
			return PartError("screen", err)
		}
	}
	if s.LEDs != nil {
		if err := s.LEDs.Check(); err != nil {
			return PartError("leds", err)
		}
	}
	if s.Holo != nil {
		if _, err := s.Holo.Validate(); err != nil {
			return PartError("holo", err)
		}
	}
	if s.ThenOrDefault() != SceneThenStay && s.DurationS == nil {
		if s.Screen == nil || s.Screen.Path == nil || s.Screen.Plays(true) == 0 {
			return Errorf(ErrBadRequest, "a scene with then %s needs duration_s, or a clip that does not loop forever", s.ThenOrDefault())
		}
	}
	return nil
}

// CheckSceneName validates a scene name: 1-MaxSceneNameBytes bytes of
// UTF-8 without control characters.
func CheckSceneName(name string) error {
	if name == "" || len(name) > MaxSceneNameBytes || !utf8.ValidString(name) {
		return Errorf(ErrBadRequest, "a scene name is 1-%d bytes of UTF-8", MaxSceneNameBytes)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return Errorf(ErrBadRequest, "a scene name has no control characters")
		}
	}
	return nil
}

// SceneApply is the body of POST /scenes/apply: a saved scene by name or
// by slot, or a scene given whole (with an optional name for its events).
type SceneApply struct {
	Name  *string `json:"name,omitempty" doc:"a saved scene; with scene, the name the given scene goes by"`
	Scene *Scene  `json:"scene,omitempty" doc:"an unsaved scene"`
	Slot  *int    `json:"slot,omitempty" doc:"the saved scene with this slot"`
}
