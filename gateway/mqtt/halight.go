package mqtt

import (
	"context"
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
// function of the command and the board's state (haLEDsPatch,
// haBacklightCalls), then done.

// haEffects are the strip modes HA offers as effects: every mode but off,
// which is the light's OFF state.
var haEffects = []string{boardapi.LEDModeSolid, boardapi.LEDModeWipe, boardapi.LEDModeRainbow, boardapi.LEDModeFlicker}

// haLight is one JSON-schema light command, checked.
type haLight struct {
	on bool
	// brightness is the board's percent, 1-100, when given. HA scales
	// its brightness to brightness_scale (100); an older HA could round
	// a low value down to 0, read here as 1.
	brightness *int
	colour     *string // "#rrggbb", leds only
	effect     *string // a strip mode, leds only
}

// haKeys are the fields HA may send per entity. transition and
// color_mode are taken and ignored: discovery says the lights have no
// transitions, but a script may echo a state payload back.
var haKeys = map[string][]string{
	"leds":   {"state", "brightness", "color", "effect", "transition", "color_mode"},
	"screen": {"state", "brightness", "transition", "color_mode"},
}

// haCommand parses payload as an HA light command when resource is an HA
// light (leds, screen) and the payload is an object with "state"; ok
// says whether it is one (then err says what is wrong with it).
func haCommand(resource string, payload []byte) (haLight, bool, error) {
	keys, light := haKeys[resource]
	if !light {
		return haLight{}, false, nil
	}
	m, err := cmdbody.Object(payload)
	if err != nil {
		return haLight{}, false, nil
	}
	if _, ok := m["state"]; !ok {
		return haLight{}, false, nil
	}
	c, err := parseHALight(resource, keys, m)
	return c, true, err
}

func parseHALight(resource string, keys []string, m map[string]json.RawMessage) (haLight, error) {
	var c haLight
	if err := cmdbody.OnlyKeys(m, resource, keys...); err != nil {
		return c, err
	}
	st, _, err := cmdbody.String(m, "state", 8)
	if err != nil || st != "ON" && st != "OFF" {
		return c, fmt.Errorf("%w: %s: state must be ON or OFF", ErrBadCommand, resource)
	}
	c.on = st == "ON"
	if v, ok, err := cmdbody.Number(m, "brightness", 0, 100, false); err != nil {
		return c, err
	} else if ok {
		n := max(action.MinBrightness, int(math.Floor(v+0.5)))
		c.brightness = &n
	}
	if raw, ok := m["color"]; ok {
		var rgb struct{ R, G, B *int }
		if err := decodeStrict(raw, &rgb); err != nil || rgb.R == nil || rgb.G == nil || rgb.B == nil ||
			*rgb.R < 0 || *rgb.R > 255 || *rgb.G < 0 || *rgb.G > 255 || *rgb.B < 0 || *rgb.B > 255 {
			return c, fmt.Errorf("%w: %s: color must be {r, g, b}, each 0-255", ErrBadCommand, resource)
		}
		s := fmt.Sprintf("#%02x%02x%02x", *rgb.R, *rgb.G, *rgb.B)
		c.colour = &s
	}
	if e, ok, err := cmdbody.String(m, "effect", 16); err != nil {
		return c, err
	} else if ok {
		if !slices.Contains(haEffects, e) {
			return c, fmt.Errorf("%w: %s: effect %q (%s)", ErrBadCommand, resource, e, strings.Join(haEffects, ", "))
		}
		c.effect = &e
	}
	return c, nil
}

// decodeStrict decodes one JSON object refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// ledsNow is what the bridge knows of a strip when it turns an HA command
// into a change: its mode now ("" when unknown) and the last mode other
// than off it was seen in ("" when none).
type ledsNow struct {
	mode, lastOn string
}

// haLEDsPatch is what an HA light command does to a strip:
//
//	OFF                   mode off (colour, loop and brightness are kept)
//	ON with effect        that mode, with the colour and brightness given
//	ON, strip on          the colour and brightness given; the mode stays
//	ON, strip off/unknown the mode it was last seen in before off (solid
//	                      when none), with the colour and brightness given
func haLEDsPatch(c haLight, now ledsNow) action.LEDs {
	if !c.on {
		off := boardapi.LEDModeOff
		return action.LEDs{Mode: &off}
	}
	p := action.LEDs{Colour: c.colour, Brightness: c.brightness}
	switch {
	case c.effect != nil:
		p.Mode = c.effect
	case now.mode == "" || now.mode == boardapi.LEDModeOff:
		m := boardapi.LEDModeSolid
		if now.lastOn != "" && now.lastOn != boardapi.LEDModeOff {
			m = now.lastOn
		}
		p.Mode = &m
	}
	return p
}

// black is the colour a woken panel shows: nothing but its backlight.
const black = "#000000"

// haBacklightCalls is what an HA light command does to the screen's
// backlight:
//
//	OFF                  DELETE /screen (panel asleep, backlight off)
//	ON, panel awake      PATCH /screen {backlight} when brightness is given
//	ON, panel asleep     PATCH /screen {backlight} when brightness is given,
//	                     then POST /screen/show {colour: black}, which
//	                     wakes the panel at the kept (or new) level
//
// (the bridge then lights a panel woken at level 0 to 100).
func haBacklightCalls(c haLight, powered bool) []apiCall {
	if !c.on {
		return []apiCall{callOf(action.ScreenOff{}.Request())}
	}
	var calls []apiCall
	if c.brightness != nil {
		calls = append(calls, apiCall{http.MethodPatch, "/screen", mustJSON(map[string]int{"backlight": *c.brightness})})
	}
	if !powered {
		col := black
		calls = append(calls, callOf(action.ScreenShow{Colour: &col}.Request()))
	}
	return calls
}

// groupHALight is the group action of an HA light command. The members'
// states are not read, so ON without an effect sets mode solid on every
// strip (each must come on, whatever it did); a group's screen takes OFF
// only (waking a panel depends on its state).
func groupHALight(resource string, c haLight) (action.Body, error) {
	if resource == "screen" {
		if c.on {
			return nil, fmt.Errorf("%w: a group's screen takes state OFF, show fields or off", ErrBadCommand)
		}
		return action.ScreenOff{}, nil
	}
	p := haLEDsPatch(c, ledsNow{})
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	return p, nil
}

// runHALight runs an HA light command on one board.
func (b *Bridge) runHALight(ctx context.Context, id, resource string, c haLight) error {
	if resource == "leds" {
		var now ledsNow
		if c.on && c.effect == nil {
			var st struct {
				Mode string `json:"mode"`
			}
			if err := b.readState(ctx, id, "/leds", &st); err != nil {
				return err
			}
			now = ledsNow{mode: st.Mode, lastOn: b.lastLEDMode(id)}
		}
		p := haLEDsPatch(c, now)
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadCommand, err)
		}
		if p == (action.LEDs{}) {
			return nil // ON for a strip that is on: nothing to change
		}
		_, err := b.callAll(ctx, id, []apiCall{callOf(p.Request())})
		return err
	}
	var st struct {
		Powered bool `json:"powered"`
	}
	if c.on {
		if err := b.readState(ctx, id, "/screen", &st); err != nil {
			return err
		}
	}
	rep, err := b.callAll(ctx, id, haBacklightCalls(c, st.Powered))
	if err != nil || !c.on || st.Powered || c.brightness != nil {
		return err
	}
	var woke struct {
		Backlight int `json:"backlight"`
	}
	if json.Unmarshal(rep.Body, &woke) == nil && woke.Backlight == 0 {
		_, err = b.callAll(ctx, id, []apiCall{{http.MethodPatch, "/screen", []byte(`{"backlight":100}`)}})
	}
	return err
}

// readState reads GET path of a board into v.
func (b *Bridge) readState(ctx context.Context, id, path string, v any) error {
	rep, err := b.callAll(ctx, id, []apiCall{{http.MethodGet, path, nil}})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rep.Body, v); err != nil {
		return fmt.Errorf("board %s: GET %s: %w", id, path, err)
	}
	return nil
}

// lastLEDMode is the last mode other than off the bridge saw board id's
// strip in ("" when none since the gateway started).
func (b *Bridge) lastLEDMode(id string) string {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	if bi, ok := b.boards[id]; ok {
		return bi.ledsOn
	}
	return ""
}
