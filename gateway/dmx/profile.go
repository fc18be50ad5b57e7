package dmx

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// Profiles: every one starts like a desk's generic dimmer+RGB fixture
// (channels 1-5), so a fixture patched as "generic RGB with dimmer" works
// on any target:
//
//	ch  function      values
//	1   dimmer        0: strip off; 1-255: LED brightness 1-100 %
//	2   red           0-255
//	3   green         0-255
//	4   blue          0-255
//	5   LED mode      0-39 solid, 40-79 wipe, 80-119 rainbow,
//	                  120-159 flicker, 160-255 solid (reserved)
//	--- holo only ---
//	6   scene         0: none; a change to N (1-255) applies scene slot N
//	7   screen red    the screen shows one colour, sent when 7-9 change
//	8   screen green
//	9   screen blue
//	10  holo x        0-255: -1..+1 (128 is the middle), a move
//	11  holo y
//
// rgb is channels 1-5 (5 wide); holo is 1-11 (11 wide).
const (
	ProfileRGB  = "rgb"
	ProfileHolo = "holo"
)

// Channel functions.
const (
	FnDimmer = "dimmer"
	FnRed    = "red"
	FnGreen  = "green"
	FnBlue   = "blue"
	FnMode   = "led_mode"
	FnScene  = "scene"
	FnScrR   = "screen_red"
	FnScrG   = "screen_green"
	FnScrB   = "screen_blue"
	FnHoloX  = "holo_x"
	FnHoloY  = "holo_y"
)

// Profile is a fixture type: its channels in order.
type Profile struct {
	Name     string   `json:"name"`
	Channels []string `json:"channels"`
}

// Profiles are the fixture profiles by name.
var Profiles = map[string]Profile{
	ProfileRGB:  {ProfileRGB, []string{FnDimmer, FnRed, FnGreen, FnBlue, FnMode}},
	ProfileHolo: {ProfileHolo, []string{FnDimmer, FnRed, FnGreen, FnBlue, FnMode, FnScene, FnScrR, FnScrG, FnScrB, FnHoloX, FnHoloY}},
}

// ProfileNames lists the profiles, sorted.
func ProfileNames() []string {
	var n []string
	for k := range Profiles {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// LED mode ranges of channel 5, by the first value of each.
var modeRanges = []struct {
	from uint8
	mode string
}{{0, "solid"}, {40, "wipe"}, {80, "rainbow"}, {120, "flicker"}, {160, "solid"}}

func ledMode(v uint8) string {
	m := "solid"
	for _, r := range modeRanges {
		if v >= r.from {
			m = r.mode
		}
	}
	return m
}

// Look is what a fixture's channels say, decoded by its profile; only
// the parts the profile has are set (Has).
type Look struct {
	Dimmer, R, G, B, Mode uint8
	Scene                 uint8
	ScreenR, ScreenG      uint8
	ScreenB               uint8
	X, Y                  uint8
	// Has* say which parts the profile drives.
	HasScene, HasScreen, HasHolo bool
}

// LookOf decodes a fixture's look from its universe's slots.
func LookOf(f Fixture, slots *[Slots]byte) Look {
	p := Profiles[f.Profile]
	var l Look
	for i, fn := range p.Channels {
		v := slots[f.Address-1+i]
		switch fn {
		case FnDimmer:
			l.Dimmer = v
		case FnRed:
			l.R = v
		case FnGreen:
			l.G = v
		case FnBlue:
			l.B = v
		case FnMode:
			l.Mode = v
		case FnScene:
			l.Scene, l.HasScene = v, true
		case FnScrR:
			l.ScreenR, l.HasScreen = v, true
		case FnScrG:
			l.ScreenG = v
		case FnScrB:
			l.ScreenB = v
		case FnHoloX:
			l.X, l.HasHolo = v, true
		case FnHoloY:
			l.Y = v
		}
	}
	return l
}

// Aspects of a look, each one action when it changes.
const (
	AspectLEDs   = "leds"
	AspectScene  = "scene"
	AspectScreen = "screen"
	AspectHolo   = "holo"
)

// change is one action a look change asks for.
type change struct {
	aspect string
	action fleet.Action
}

func (l Look) ledsKey() [4]uint8 {
	if l.Dimmer == 0 {
		return [4]uint8{}
	}
	return [4]uint8{l.Dimmer, l.R, l.G, l.B}
}

// changes lists the actions that take a target showing prev (nil:
// unknown) to l, in order scene, leds, screen, holo. The scene channel
// applies its slot when it changes to a value above 0 (never on a first
// look alone of 0).
func (l Look) changes(prev *Look) []change {
	var cs []change
	if l.HasScene && l.Scene > 0 && (prev == nil || prev.Scene != l.Scene) {
		cs = append(cs, change{AspectScene, fleet.Action{Kind: fleet.ActionSceneApply, Body: body(map[string]int{"slot": int(l.Scene)})}})
	}
	if prev == nil || prev.ledsKey() != l.ledsKey() || (l.Dimmer > 0 && ledMode(prev.Mode) != ledMode(l.Mode)) {
		b := map[string]any{"mode": "off", "loop": true}
		if l.Dimmer > 0 {
			b = map[string]any{"mode": ledMode(l.Mode), "colour": fmt.Sprintf("#%02x%02x%02x", l.R, l.G, l.B),
				"brightness": max(1, int(math.Round(float64(l.Dimmer)*100/255))), "loop": true}
		}
		cs = append(cs, change{AspectLEDs, fleet.Action{Kind: fleet.ActionLEDs, Body: body(b)}})
	}
	if l.HasScreen && (prev == nil || [3]uint8{prev.ScreenR, prev.ScreenG, prev.ScreenB} != [3]uint8{l.ScreenR, l.ScreenG, l.ScreenB}) {
		cs = append(cs, change{AspectScreen, fleet.Action{Kind: fleet.ActionScreenShow,
			Body: body(map[string]string{"colour": fmt.Sprintf("#%02x%02x%02x", l.ScreenR, l.ScreenG, l.ScreenB)})}})
	}
	if l.HasHolo && (prev == nil || prev.X != l.X || prev.Y != l.Y) {
		cs = append(cs, change{AspectHolo, fleet.Action{Kind: fleet.ActionHolo,
			Body: body(map[string]any{"motion": "move", "x": axis(l.X), "y": axis(l.Y)})}})
	}
	return cs
}

// axis maps 0-255 to -1..+1 in hundredths, 128 the middle.
func axis(v uint8) float64 {
	f := (float64(v) - 128) / 127
	f = math.Max(-1, math.Min(1, f))
	return math.Round(f*100) / 100
}

func body(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
