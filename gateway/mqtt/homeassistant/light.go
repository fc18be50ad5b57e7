package homeassistant

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/action"
	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
)

// Home Assistant's JSON light schema on <b>/set/leds and <b>/set/screen
// (and group/<n>/set/leds|screen). A command is HA's when its object has
// "state". What each command does to the board is decided by a pure
// function of the command and the board's state (LEDsPatch,
// BacklightCalls); the bridge reads the state and does it.

// Effects are the strip modes HA offers as effects: every mode but off,
// which is the light's OFF state.
var Effects = []string{boardapi.LEDModeSolid, boardapi.LEDModeWipe, boardapi.LEDModeRainbow, boardapi.LEDModeFlicker}

// Light is one JSON-schema light command, checked.
type Light struct {
	On bool
	// Brightness is the board's percent, 1-100, when given. HA scales
	// its brightness to brightness_scale (100); an older HA could round
	// a low value down to 0, read here as 1.
	Brightness *int
	Colour     *string // "#rrggbb", leds only
	Effect     *string // a strip mode, leds only
}

// lightKeys are the fields HA may send per entity. transition and
// color_mode are taken and ignored: discovery says the lights have no
// transitions, but a script may echo a state payload back.
var lightKeys = map[string][]string{
	"leds":   {"state", "brightness", "color", "effect", "transition", "color_mode"},
	"screen": {"state", "brightness", "transition", "color_mode"},
}

// ParseLight parses payload as an HA light command when resource is an HA
// light (leds, screen) and the payload is an object with "state"; ok
// says whether it is one (then err says what is wrong with it).
func ParseLight(resource string, payload []byte) (Light, bool, error) {
	keys, light := lightKeys[resource]
	if !light {
		return Light{}, false, nil
	}
	m, err := cmdbody.Object(payload)
	if err != nil {
		return Light{}, false, nil
	}
	if _, ok := m["state"]; !ok {
		return Light{}, false, nil
	}
	c, err := parseLight(resource, keys, m)
	return c, true, err
}

func parseLight(resource string, keys []string, m map[string]json.RawMessage) (Light, error) {
	var c Light
	if err := cmdbody.OnlyKeys(m, resource, keys...); err != nil {
		return c, err
	}
	st, _, err := cmdbody.String(m, "state", 8)
	if err != nil || st != "ON" && st != "OFF" {
		return c, fmt.Errorf("%w: %s: state must be ON or OFF", cmdbody.ErrBadCommand, resource)
	}
	c.On = st == "ON"
	if v, ok, err := cmdbody.Number(m, "brightness", 0, 100, false); err != nil {
		return c, err
	} else if ok {
		n := max(action.MinBrightness, int(math.Floor(v+0.5)))
		c.Brightness = &n
	}
	if raw, ok := m["color"]; ok {
		var rgb struct{ R, G, B *int }
		if err := decodeStrict(raw, &rgb); err != nil || rgb.R == nil || rgb.G == nil || rgb.B == nil ||
			*rgb.R < 0 || *rgb.R > 255 || *rgb.G < 0 || *rgb.G > 255 || *rgb.B < 0 || *rgb.B > 255 {
			return c, fmt.Errorf("%w: %s: color must be {r, g, b}, each 0-255", cmdbody.ErrBadCommand, resource)
		}
		s := fmt.Sprintf("#%02x%02x%02x", *rgb.R, *rgb.G, *rgb.B)
		c.Colour = &s
	}
	if e, ok, err := cmdbody.String(m, "effect", 16); err != nil {
		return c, err
	} else if ok {
		if !slices.Contains(Effects, e) {
			return c, fmt.Errorf("%w: %s: effect %q (%s)", cmdbody.ErrBadCommand, resource, e, strings.Join(Effects, ", "))
		}
		c.Effect = &e
	}
	return c, nil
}

// decodeStrict decodes one JSON object refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// LEDsNow is what the bridge knows of a strip when it turns an HA command
// into a change: its mode now ("" when unknown) and the last mode other
// than off it was seen in ("" when none).
type LEDsNow struct {
	Mode, LastOn string
}

// LEDsPatch is what an HA light command does to a strip:
//
//	OFF                   mode off (colour, loop and brightness are kept)
//	ON with effect        that mode, with the colour and brightness given
//	ON, strip on          the colour and brightness given; the mode stays
//	ON, strip off/unknown the mode it was last seen in before off (solid
//	                      when none), with the colour and brightness given
func LEDsPatch(c Light, now LEDsNow) action.LEDs {
	if !c.On {
		off := boardapi.LEDModeOff
		return action.LEDs{Mode: &off}
	}
	p := action.LEDs{Colour: c.Colour, Brightness: c.Brightness}
	switch {
	case c.Effect != nil:
		p.Mode = c.Effect
	case now.Mode == "" || now.Mode == boardapi.LEDModeOff:
		m := boardapi.LEDModeSolid
		if now.LastOn != "" && now.LastOn != boardapi.LEDModeOff {
			m = now.LastOn
		}
		p.Mode = &m
	}
	return p
}

// black is the colour a woken panel shows: nothing but its backlight.
const black = "#000000"

// BacklightCalls is what an HA light command does to the screen's
// backlight:
//
//	OFF                  DELETE /screen (panel asleep, backlight off)
//	ON, panel awake      PATCH /screen {backlight} when brightness is given
//	ON, panel asleep     PATCH /screen {backlight} when brightness is given,
//	                     then POST /screen/show {colour: black}, which
//	                     wakes the panel at the kept (or new) level
//
// (the bridge then lights a panel woken at level 0 to 100).
func BacklightCalls(c Light, powered bool) []action.Request {
	if !c.On {
		return []action.Request{action.ScreenOff{}.Request()}
	}
	var calls []action.Request
	if c.Brightness != nil {
		body, _ := json.Marshal(map[string]int{"backlight": *c.Brightness})
		calls = append(calls, action.Request{Method: http.MethodPatch, Path: "/screen", Body: body})
	}
	if !powered {
		col := black
		calls = append(calls, action.ScreenShow{Colour: &col}.Request())
	}
	return calls
}

// GroupLight is the group action of an HA light command. The members'
// states are not read, so ON without an effect sets mode solid on every
// strip (each must come on, whatever it did); a group's screen takes OFF
// only (waking a panel depends on its state).
func GroupLight(resource string, c Light) (action.Body, error) {
	if resource == "screen" {
		if c.On {
			return nil, fmt.Errorf("%w: a group's screen takes state OFF, show fields or off", cmdbody.ErrBadCommand)
		}
		return action.ScreenOff{}, nil
	}
	p := LEDsPatch(c, LEDsNow{})
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", cmdbody.ErrBadCommand, err)
	}
	return p, nil
}
