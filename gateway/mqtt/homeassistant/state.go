package homeassistant

import (
	"encoding/json"
	"strconv"
)

// The state HA's JSON-schema lights read: the board's own state on
// <b>/leds and <b>/screen with HA's light fields added.

// LEDsState adds Home Assistant's JSON light fields to the strip state:
// state ON/OFF, brightness (0-100, the strip's percent), color {r,g,b},
// effect (the mode) and color_mode.
func LEDsState(state json.RawMessage) []byte {
	var m map[string]any
	if json.Unmarshal(state, &m) != nil || m == nil {
		return state
	}
	mode, _ := m["mode"].(string)
	m["state"] = onOff(mode != "" && mode != "off")
	if mode != "" {
		m["effect"] = mode
	}
	if c, ok := m["colour"].(string); ok {
		if r, g, bl, ok := parseHex(c); ok {
			m["color"] = map[string]int{"r": r, "g": g, "b": bl}
		}
	}
	m["color_mode"] = "rgb"
	return mustJSON(m)
}

// ScreenState adds a JSON light's fields for the backlight: state (the panel
// powered), brightness (the backlight percent).
func ScreenState(state json.RawMessage) []byte {
	var m map[string]any
	if json.Unmarshal(state, &m) != nil || m == nil {
		return state
	}
	p, _ := m["powered"].(bool)
	m["state"] = onOff(p)
	if bl, ok := m["backlight"]; ok {
		m["brightness"] = bl
	}
	m["color_mode"] = "brightness"
	return mustJSON(m)
}

func onOff(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

func parseHex(c string) (r, g, b int, ok bool) {
	if len(c) != 7 || c[0] != '#' {
		return 0, 0, 0, false
	}
	v, err := strconv.ParseUint(c[1:], 16, 32)
	if err != nil {
		return 0, 0, 0, false
	}
	return int(v >> 16 & 0xff), int(v >> 8 & 0xff), int(v & 0xff), true
}
