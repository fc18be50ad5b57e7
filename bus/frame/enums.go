package frame

import "fmt"

// Enumerations shared by the native payloads, the status block and the
// event records. Each has a String method that returns the name the JSON
// API uses and a Parse function for the way back. The names are those of
// the board's HTTP API, so board and gateway translate through one table.

// LEDMode is the LED strip mode: LEDS request byte 0 and status block
// byte 5.
type LEDMode uint8

// LED modes.
const (
	LEDOff     LEDMode = 0
	LEDSolid   LEDMode = 1
	LEDWipe    LEDMode = 2
	LEDRainbow LEDMode = 3
	LEDFlicker LEDMode = 4
	// LEDKeep leaves the mode as it is (LEDS request only).
	LEDKeep LEDMode = 0xFF
)

var ledModeNames = []string{"off", "solid", "wipe", "rainbow", "flicker"}

// String returns "off", "solid", "wipe", "rainbow", "flicker" or "keep".
func (m LEDMode) String() string {
	if m == LEDKeep {
		return "keep"
	}
	return enumString(ledModeNames, m, "LEDMode")
}

// ParseLEDMode maps a JSON mode name to its byte.
func ParseLEDMode(name string) (LEDMode, error) { return enumParse[LEDMode](ledModeNames, name) }

// Motion is a HOLO request's motion byte.
type Motion uint8

// Holo motions.
const (
	MotionCenter Motion = 0
	MotionMove   Motion = 1
	MotionNudge  Motion = 2
	MotionTwitch Motion = 3
	MotionWag    Motion = 4
	MotionNod    Motion = 5
	MotionScan   Motion = 6
	MotionCircle Motion = 7
	MotionStop   Motion = 8
	MotionOff    Motion = 9
)

var motionNames = []string{"center", "move", "nudge", "twitch", "wag", "nod", "scan", "circle", "stop", "off"}

// String returns the motion's name as POST /holo/motion takes it.
func (m Motion) String() string { return enumString(motionNames, m, "Motion") }

// ParseMotion maps a motion name to its byte.
func ParseMotion(name string) (Motion, error) { return enumParse[Motion](motionNames, name) }

// HoloState is what the holo is doing, status block byte 4.
type HoloState uint8

// Holo states.
const (
	HoloHold   HoloState = 0
	HoloMove   HoloState = 1
	HoloTwitch HoloState = 2
	HoloWag    HoloState = 3
	HoloNod    HoloState = 4
	HoloScan   HoloState = 5
	HoloCircle HoloState = 6
	// HoloCannotMove means the holo is not ready (for example servos
	// not calibrated).
	HoloCannotMove HoloState = 0xFF
)

var holoStateNames = []string{"hold", "move", "twitch", "wag", "nod", "scan", "circle"}

// String returns "hold", "move", ..., "circle", or "cannot_move".
func (h HoloState) String() string {
	if h == HoloCannotMove {
		return "cannot_move"
	}
	return enumString(holoStateNames, h, "HoloState")
}

// ParseHoloState maps a name returned by String back to its byte.
func ParseHoloState(name string) (HoloState, error) {
	if name == "cannot_move" {
		return HoloCannotMove, nil
	}
	return enumParse[HoloState](holoStateNames, name)
}

// Showing is what the screen shows, status block byte 0.
type Showing uint8

// Screen contents.
const (
	ShowingNothing     Showing = 0
	ShowingColour      Showing = 1
	ShowingCalibration Showing = 2
	ShowingImage       Showing = 3
	ShowingClip        Showing = 4
)

var showingNames = []string{"nothing", "colour", "calibration", "image", "clip"}

// String returns the screen state's `showing` value.
func (s Showing) String() string { return enumString(showingNames, s, "Showing") }

// ParseShowing maps a `showing` value to its byte.
func ParseShowing(name string) (Showing, error) { return enumParse[Showing](showingNames, name) }

// Then is what a scene does when it ends.
type Then uint8

// Scene endings.
const (
	ThenStay    Then = 0
	ThenRestore Then = 1
	ThenOff     Then = 2
)

var thenNames = []string{"stay", "restore", "off"}

// String returns "stay", "restore" or "off".
func (t Then) String() string { return enumString(thenNames, t, "Then") }

// ParseThen maps a scene's `then` to its byte.
func ParseThen(name string) (Then, error) { return enumParse[Then](thenNames, name) }

// EndedBy is why a scene ended (scene_ended `by`).
type EndedBy uint8

// Reasons a scene ends.
const (
	ByClip     EndedBy = 0
	ByTime     EndedBy = 1
	ByEnd      EndedBy = 2
	ByReplaced EndedBy = 3
)

var byNames = []string{"clip", "time", "end", "replaced"}

// String returns "clip", "time", "end" or "replaced".
func (b EndedBy) String() string { return enumString(byNames, b, "EndedBy") }

// ParseEndedBy maps a scene_ended `by` to its byte.
func ParseEndedBy(name string) (EndedBy, error) { return enumParse[EndedBy](byNames, name) }

// TouchAction is a touch event's action.
type TouchAction uint8

// Touch actions.
const (
	TouchDown TouchAction = 0
	TouchUp   TouchAction = 1
)

var touchNames = []string{"down", "up"}

// String returns "down" or "up".
func (a TouchAction) String() string { return enumString(touchNames, a, "TouchAction") }

// ParseTouchAction maps "down" or "up" to its byte.
func ParseTouchAction(name string) (TouchAction, error) {
	return enumParse[TouchAction](touchNames, name)
}

func enumString[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

func enumParse[T ~uint8](names []string, name string) (T, error) {
	for i, n := range names {
		if n == name {
			return T(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownName, name)
}

// known reports whether v has a name in names.
func known[T ~uint8](names []string, v T) bool { return int(v) < len(names) }
