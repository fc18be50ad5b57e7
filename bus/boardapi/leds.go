package boardapi

// LED strip modes, indexed by their native LEDS mode number (bus/frame's
// LEDMode).
const (
	LEDModeOff     = "off"
	LEDModeSolid   = "solid"
	LEDModeWipe    = "wipe"
	LEDModeRainbow = "rainbow"
	LEDModeFlicker = "flicker"
)

// LEDModes lists the mode names; a mode's index is its native number.
var LEDModes = []string{LEDModeOff, LEDModeSolid, LEDModeWipe, LEDModeRainbow, LEDModeFlicker}

// LEDModeUnknown is what LEDModeNumber returns for a name that is not a
// mode. Natively the same byte means "leave the mode as it is".
const LEDModeUnknown = 0xFF

// LEDModeNumber returns the native number of a mode name, or
// LEDModeUnknown.
func LEDModeNumber(name string) byte {
	for i, m := range LEDModes {
		if m == name {
			return byte(i)
		}
	}
	return LEDModeUnknown
}

// Limits of the LED strip.
const (
	// MaxLEDCount is the longest strip a board drives.
	MaxLEDCount = 1024
	// MinBrightness and MaxBrightness bound a brightness percent; 0 is
	// refused (natively it means "leave as is"; turn the strip dark with
	// mode off).
	MinBrightness = 1
	MaxBrightness = 100
)

// LEDPatch is a change to the strip, the body of PATCH /leds and the leds
// part of a scene: nil fields are left as they are.
type LEDPatch struct {
	Mode       *string `json:"mode,omitempty"`
	Colour     *string `json:"colour,omitempty"`
	Loop       *bool   `json:"loop,omitempty"`
	Brightness *int    `json:"brightness,omitempty"`
}

// Check checks the patch as the board applies it, changing nothing: the
// mode, the colour and the brightness (1-100). Errors are bad_request and
// match ErrLEDMode, ErrColour or ErrBrightness.
func (p LEDPatch) Check() error {
	if p.Mode != nil && LEDModeNumber(*p.Mode) == LEDModeUnknown {
		return Rulef(ErrLEDMode, ErrBadRequest, "mode %q is not one of off, solid, wipe, rainbow, flicker", *p.Mode)
	}
	if p.Colour != nil {
		if _, err := ParseColour(*p.Colour); err != nil {
			return Rulef(ErrColour, ErrBadRequest, "colour %q: want #rrggbb, R,G,B (each 0-255) or a colour name such as red or warm white", *p.Colour)
		}
	}
	if p.Brightness != nil && (*p.Brightness < MinBrightness || *p.Brightness > MaxBrightness) {
		return Rulef(ErrBrightness, ErrBadRequest, "brightness %d: want a percent from 1 to 100 (use mode off to turn the strip dark)", *p.Brightness)
	}
	return nil
}
