// Package homeassistant is Home Assistant's side of the MQTT bridge: the
// device discovery message of each board (one retained message with every
// entity: the LED strip and the screen's backlight as JSON-schema lights,
// the holo's axes, scenes, buttons, diagnostics, happenings as events and
// the firmware as an update entity), the light state HA reads, and what
// each light command HA sends does to a board, decided by pure functions
// of the command and the board's state. The bridge (gateway/mqtt) reads
// the board's state, publishes and runs what these functions decide;
// docs/mqtt.md has the table of every command from each starting state.
package homeassistant

import (
	"encoding/json"

	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// Home Assistant device discovery: one retained message per board on
// <prefix>/device/holo_<id>/config. The device-level keys use HA's short
// names for the device-discovery schema ("dev", "o", "cmps", and "p" for
// each component's platform); everything else is spelled out.

// HappeningKinds are the board happenings that get an HA event entity.
var HappeningKinds = []string{"clip_started", "clip_ended", "scene_started", "scene_ended", "touch"}

// Device is what a board's discovery message says of it.
type Device struct {
	ID       string   // the board's id
	Name     string   // its name in topics
	Hostname string   // its label in HA ("" uses Name)
	Firmware string   // the version it runs
	Scenes   []string // its saved scenes' names, for the scene select
	// Installation adds the installation sensor (installation.go).
	Installation bool
}

// Discovery is the board's device discovery message, published retained
// on t.Discovery(d.ID). version is the gateway's. In a cluster (t.Gateway
// set) the board is shown behind its gateway's device, with a gateway
// sensor.
func Discovery(t layout.Topics, d Device, version string) []byte {
	id, name := d.ID, d.Name
	clustered := t.Gateway != ""
	uid := layout.ObjectID("holo_" + id)
	st := func(leaf string) string { return t.Board(name, leaf) }
	cmd := func(res string) string { return t.BoardSet(name, res) }
	label := d.Hostname
	if label == "" {
		label = name
	}
	cmps := map[string]any{
		"leds": map[string]any{"p": "light", "schema": "json", "name": "LED strip", "unique_id": uid + "_leds",
			"state_topic": st("leds"), "command_topic": cmd("leds"), "brightness": true, "brightness_scale": 100,
			"supported_color_modes": []string{"rgb"}, "effect": true, "effect_list": Effects, "flash": false,
			"transition": false, "icon": "mdi:led-strip-variant"},
		"backlight": map[string]any{"p": "light", "schema": "json", "name": "Screen backlight", "unique_id": uid + "_backlight",
			"state_topic": st("screen"), "command_topic": cmd("screen"), "brightness": true, "brightness_scale": 100,
			"supported_color_modes": []string{"brightness"}, "flash": false, "transition": false, "icon": "mdi:monitor"},
		"end_scene": map[string]any{"p": "button", "name": "End scene", "unique_id": uid + "_end_scene",
			"command_topic": cmd("scene"), "payload_press": `{"end":true}`, "icon": "mdi:stop"},
		"restart": map[string]any{"p": "button", "name": "Restart", "unique_id": uid + "_restart", "device_class": "restart",
			"command_topic": cmd("restart"), "payload_press": "{}", "entity_category": "config"},
		"holo_x": holoNumber("Holo x", uid+"_holo_x", st("holo"), cmd("holo"), "x"),
		"holo_y": holoNumber("Holo y", uid+"_holo_y", st("holo"), cmd("holo"), "y"),
		"uptime": diagSensor("Uptime", uid+"_uptime", st("system"), "{{ value_json.uptime_s }}", "s", "duration", "total_increasing"),
		"heap_free": diagSensor("Free memory", uid+"_heap_free", st("system"), "{{ value_json.heap_free }}", "B", "data_size",
			"measurement"),
		"rssi": diagSensor("RSSI", uid+"_rssi", st("system"), "{{ value_json.rssi }}", "dBm", "signal_strength", "measurement"),
		"link_errors": diagSensor("Link errors", uid+"_link_errors", st("link"),
			"{{ value_json.counters.errors if value_json.counters is defined else 0 }}", "", "", "total_increasing"),
		"firmware": map[string]any{"p": "update", "name": "Firmware", "unique_id": uid + "_firmware", "device_class": "firmware",
			"state_topic": st(layout.LevelUpdate), "command_topic": cmd(layout.LevelUpdate), "payload_install": "install",
			"entity_category": "config"},
	}
	if len(d.Scenes) > 0 {
		cmps["scene"] = map[string]any{"p": "select", "name": "Scene", "unique_id": uid + "_scene",
			"options": d.Scenes, "command_topic": cmd("scene"), "command_template": `{"name": {{ value | tojson }}}`,
			"state_topic": st("scene"), "value_template": "{{ value_json.name if value_json and value_json.name else 'None' }}",
			"icon": "mdi:movie-open"}
	}
	if d.Installation {
		cmps["installation"] = installationSensor(t, name, uid)
	}
	if clustered {
		cmps["gateway"] = map[string]any{"p": "sensor", "name": "Gateway", "unique_id": uid + "_gateway",
			"state_topic": st("info"), "value_template": "{{ value_json.gateway }}", "entity_category": "diagnostic",
			"icon": "mdi:router-network"}
	}
	for _, k := range HappeningKinds {
		cmps["event_"+k] = map[string]any{"p": "event", "name": eventLabel(k), "unique_id": uid + "_event_" + k,
			"state_topic": t.Event(name, k), "event_types": []string{k}}
	}
	dev := map[string]any{"identifiers": []string{uid}, "name": label, "manufacturer": "holofleet",
		"model": "holo-board", "sw_version": d.Firmware, "serial_number": id}
	if clustered {
		// The board's gateway: HA shows the board behind it.
		dev["via_device"] = layout.GatewayDevice(t.Gateway)
	}
	return mustJSON(map[string]any{
		"dev": dev,
		"o":   map[string]any{"name": "holo-gateway", "sw_version": version},
		"availability": []map[string]any{
			{"topic": t.Own("state"), "value_template": "{{ value_json.state }}"},
			{"topic": st(layout.LevelAvail), "value_template": "{{ value_json.state }}"},
		},
		"availability_mode": "all",
		"qos":               1,
		"cmps":              cmps,
	})
}

func holoNumber(label, uid, state, cmd, axis string) map[string]any {
	return map[string]any{"p": "number", "name": label, "unique_id": uid, "min": -1, "max": 1, "step": 0.05,
		"mode": "slider", "state_topic": state, "value_template": "{{ value_json." + axis + " }}",
		"command_topic": cmd, "command_template": `{"motion":"move","` + axis + `":{{ value }}}`}
}

func diagSensor(label, uid, state, tpl, unit, class, stateClass string) map[string]any {
	m := map[string]any{"p": "sensor", "name": label, "unique_id": uid, "state_topic": state, "value_template": tpl,
		"entity_category": "diagnostic", "state_class": stateClass}
	if unit != "" {
		m["unit_of_measurement"] = unit
	}
	if class != "" {
		m["device_class"] = class
	}
	return m
}

func eventLabel(kind string) string {
	b := []byte(kind)
	for i, c := range b {
		if c == '_' {
			b[i] = ' '
		}
	}
	if len(b) > 0 && b[0] >= 'a' && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	return string(b)
}

// mustJSON marshals the package's own values, which always marshal.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}
