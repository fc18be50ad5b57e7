package mqtt_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// requiredByPlatform lists, per HA MQTT platform, the options HA refuses
// a component without (beyond platform and unique_id, which the bridge
// always gives).
var requiredByPlatform = map[string][]string{
	"light":  {"command_topic", "schema"},
	"button": {"command_topic"},
	"number": {"command_topic", "state_topic"},
	"select": {"command_topic", "options"},
	"sensor": {"state_topic"},
	"event":  {"state_topic", "event_types"},
	"update": {"state_topic"},
}

// validateDiscovery checks a device discovery payload against what Home
// Assistant requires: a device with identifiers, an origin with a name,
// components with a known platform and a unique id, the platform's
// required options, topics without wildcards, availability entries with a
// topic.
func validateDiscovery(payload []byte) error {
	var d struct {
		Dev struct {
			Identifiers []string `json:"identifiers"`
			Name        string   `json:"name"`
		} `json:"dev"`
		O struct {
			Name string `json:"name"`
		} `json:"o"`
		Availability []map[string]any          `json:"availability"`
		Mode         string                    `json:"availability_mode"`
		Cmps         map[string]map[string]any `json:"cmps"`
	}
	if err := json.Unmarshal(payload, &d); err != nil {
		return err
	}
	if len(d.Dev.Identifiers) == 0 || d.Dev.Name == "" {
		return fmt.Errorf("device without identifiers or name")
	}
	if d.O.Name == "" {
		return fmt.Errorf("origin without a name")
	}
	if len(d.Availability) != 2 || d.Mode != "all" {
		return fmt.Errorf("availability %v mode %q", d.Availability, d.Mode)
	}
	for _, a := range d.Availability {
		if t, _ := a["topic"].(string); t == "" || strings.ContainsAny(t, "+#") {
			return fmt.Errorf("availability topic %v", a["topic"])
		}
	}
	want := []string{"leds", "backlight", "end_scene", "restart", "holo_x", "holo_y", "uptime", "heap_free", "rssi",
		"link_errors", "firmware", "event_touch", "event_scene_started"}
	uids := map[string]bool{}
	for _, k := range want {
		if _, ok := d.Cmps[k]; !ok {
			return fmt.Errorf("no component %q", k)
		}
	}
	for k, c := range d.Cmps {
		p, _ := c["p"].(string)
		req, ok := requiredByPlatform[p]
		if !ok {
			return fmt.Errorf("%s: platform %q", k, p)
		}
		uid, _ := c["unique_id"].(string)
		if uid == "" || uids[uid] {
			return fmt.Errorf("%s: unique_id %q missing or repeated", k, uid)
		}
		uids[uid] = true
		for _, r := range req {
			if _, ok := c[r]; !ok {
				return fmt.Errorf("%s (%s): no %s", k, p, r)
			}
		}
		for _, tk := range []string{"state_topic", "command_topic"} {
			if t, ok := c[tk].(string); ok && (t == "" || strings.ContainsAny(t, "+#")) {
				return fmt.Errorf("%s: %s %q", k, tk, t)
			}
		}
		if p == "sensor" && c["entity_category"] != "diagnostic" {
			return fmt.Errorf("%s: sensors are diagnostics", k)
		}
		if p == "light" && c["schema"] == "json" {
			if _, ok := c["supported_color_modes"]; !ok {
				return fmt.Errorf("%s: json light without supported_color_modes", k)
			}
		}
		if p == "event" {
			if ets, _ := c["event_types"].([]any); len(ets) == 0 {
				return fmt.Errorf("%s: no event types", k)
			}
		}
	}
	if lights := d.Cmps["leds"]; lights != nil {
		el, _ := lights["effect_list"].([]any)
		if !slices.ContainsFunc(el, func(v any) bool { return v == "rainbow" }) {
			return fmt.Errorf("leds: effects %v", el)
		}
	}
	return nil
}
