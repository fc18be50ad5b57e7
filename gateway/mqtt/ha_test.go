package mqtt_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testlevel"
)

// haRow is one command Home Assistant can send for one discovered entity,
// in one starting state of the board, and what the board must then be.
// The rows are the table of docs/mqtt.md.
type haRow struct {
	entity string // the component's key in the discovery message
	start  string // a starting state (haStarts)
	// payload is what HA publishes. For a select or a number it is the
	// value HA renders into the discovery's command_template; for a
	// button or the update entity it is empty (the discovery's
	// payload_press or payload_install is sent).
	payload string
	// want reads the board back; nil when the row is refused.
	want func(s boardNow) error
	// state is the HA state ("ON"/"OFF") the light's retained state topic
	// must carry afterwards; "" for other entities.
	state string
	// refused: the command changes nothing and says why on bridge/event
	// (then want, if set, must still hold: the starting state).
	refused string
}

// boardNow is the board's state as its API returns it.
type boardNow struct {
	leds, screen, holo, scenes map[string]any
}

func check(what string, ok func(s boardNow) bool) func(s boardNow) error {
	return func(s boardNow) error {
		if ok(s) {
			return nil
		}
		return fmt.Errorf("want %s; leds %v screen %v holo %v active %v", what, s.leds, s.screen, s.holo, s.scenes["active"])
	}
}

func ledsAre(mode, colour string, brightness float64) func(s boardNow) error {
	return check(fmt.Sprintf("leds %s %s %v", mode, colour, brightness), func(s boardNow) bool {
		return s.leds["mode"] == mode && (colour == "" || s.leds["colour"] == colour) && (brightness == 0 || s.leds["brightness"] == brightness)
	})
}

func screenIs(powered bool, backlight float64, showing string) func(s boardNow) error {
	return check(fmt.Sprintf("screen powered %v backlight %v showing %s", powered, backlight, showing), func(s boardNow) bool {
		return s.screen["powered"] == powered && s.screen["backlight"] == backlight && (showing == "" || s.screen["showing"] == showing)
	})
}

func holoAt(x, y float64) func(s boardNow) error {
	return check(fmt.Sprintf("holo at %v,%v", x, y), func(s boardNow) bool {
		hx, _ := s.holo["x"].(float64)
		hy, _ := s.holo["y"].(float64)
		return s.holo["moving"] == false && math.Abs(hx-x) < 0.011 && math.Abs(hy-y) < 0.011
	})
}

func sceneRunning(name string) func(s boardNow) error {
	return check("scene running "+name, func(s boardNow) bool {
		a, _ := s.scenes["active"].(map[string]any)
		if name == "" {
			return a == nil
		}
		return a != nil && a["name"] == name
	})
}

func all(fs ...func(s boardNow) error) func(s boardNow) error {
	return func(s boardNow) error {
		for _, f := range fs {
			if err := f(s); err != nil {
				return err
			}
		}
		return nil
	}
}

// haRows: every command HA sends for every entity that takes commands
// (sensors and events take none), from each starting state that changes
// what the command does.
var haRows = []haRow{
	// LED strip: light, JSON schema, brightness_scale 100, rgb, effects.
	{entity: "leds", start: "strip off (was solid)", payload: `{"state":"ON","color":{"r":12,"g":200,"b":34},"brightness":20}`,
		want: ledsAre("solid", "#0cc822", 20), state: "ON"},
	{entity: "leds", start: "strip off (was solid)", payload: `{"state":"ON"}`, want: ledsAre("solid", "#102030", 50), state: "ON"},
	{entity: "leds", start: "strip off (was wipe)", payload: `{"state":"ON"}`, want: ledsAre("wipe", "#102030", 50), state: "ON"},
	{entity: "leds", start: "strip off (was solid)", payload: `{"state":"ON","brightness":1}`, want: ledsAre("solid", "#102030", 1), state: "ON"},
	{entity: "leds", start: "strip off (was solid)", payload: `{"state":"ON","effect":"rainbow"}`, want: ledsAre("rainbow", "", 50), state: "ON"},
	{entity: "leds", start: "strip off (was solid)", payload: `{"state":"OFF"}`, want: ledsAre("off", "#102030", 50), state: "OFF"},
	{entity: "leds", start: "strip solid", payload: `{"state":"ON"}`, want: ledsAre("solid", "#102030", 50), state: "ON"},
	{entity: "leds", start: "strip solid", payload: `{"state":"ON","brightness":100}`, want: ledsAre("solid", "#102030", 100), state: "ON"},
	{entity: "leds", start: "strip solid", payload: `{"state":"ON","color":{"r":255,"g":0,"b":128}}`, want: ledsAre("solid", "#ff0080", 50), state: "ON"},
	{entity: "leds", start: "strip solid", payload: `{"state":"ON","effect":"wipe"}`, want: ledsAre("wipe", "#102030", 50), state: "ON"},
	{entity: "leds", start: "strip solid", payload: `{"state":"ON","effect":"flicker"}`, want: ledsAre("flicker", "#102030", 50), state: "ON"},
	{entity: "leds", start: "strip solid", payload: `{"state":"OFF"}`, want: ledsAre("off", "#102030", 50), state: "OFF"},
	{entity: "leds", start: "strip rainbow", payload: `{"state":"ON","brightness":10}`, want: ledsAre("rainbow", "", 10), state: "ON"},
	{entity: "leds", start: "strip rainbow", payload: `{"state":"ON","color":{"r":1,"g":2,"b":3}}`, want: ledsAre("rainbow", "#010203", 50), state: "ON"},
	{entity: "leds", start: "strip rainbow", payload: `{"state":"ON","effect":"solid"}`, want: ledsAre("solid", "", 50), state: "ON"},
	{entity: "leds", start: "strip rainbow", payload: `{"state":"OFF"}`, want: ledsAre("off", "", 50), state: "OFF"},
	{entity: "leds", start: "strip solid", payload: `{"state":"ON","effect":"disco"}`, want: ledsAre("solid", "#102030", 50), refused: "effect"},
	// Screen backlight: light, JSON schema, brightness only.
	{entity: "backlight", start: "panel asleep (level 60)", payload: `{"state":"ON","brightness":40}`, want: screenIs(true, 40, "colour"), state: "ON"},
	{entity: "backlight", start: "panel asleep (level 60)", payload: `{"state":"ON"}`, want: screenIs(true, 60, "colour"), state: "ON"},
	{entity: "backlight", start: "panel asleep (level 0)", payload: `{"state":"ON"}`, want: screenIs(true, 100, "colour"), state: "ON"},
	{entity: "backlight", start: "panel asleep (level 60)", payload: `{"state":"OFF"}`, want: screenIs(false, 0, "nothing"), state: "OFF"},
	{entity: "backlight", start: "panel awake (level 60)", payload: `{"state":"ON","brightness":25}`, want: screenIs(true, 25, "colour"), state: "ON"},
	{entity: "backlight", start: "panel awake (level 60)", payload: `{"state":"ON"}`, want: screenIs(true, 60, "colour"), state: "ON"},
	{entity: "backlight", start: "panel awake (level 60)", payload: `{"state":"OFF"}`, want: screenIs(false, 0, "nothing"), state: "OFF"},
	// Scene: select of the saved scenes.
	{entity: "scene", start: "no scene running", payload: "glow", want: all(sceneRunning(""), ledsAre("solid", "#00ff00", 0))},
	{entity: "scene", start: "no scene running", payload: "pulse", want: all(sceneRunning("pulse"), ledsAre("rainbow", "", 0))},
	{entity: "scene", start: "scene pulse running", payload: "glow", want: all(sceneRunning(""), ledsAre("solid", "#00ff00", 0))},
	// End scene: button.
	{entity: "end_scene", start: "scene pulse running", want: all(sceneRunning(""), ledsAre("solid", "#102030", 50))},
	{entity: "end_scene", start: "no scene running", want: sceneRunning(""), refused: "not_running"},
	// Holo x and y: numbers, -1 to 1 in steps of 0.05.
	{entity: "holo_x", start: "holo calibrated at 0,0", payload: "0.5", want: holoAt(0.5, 0)},
	{entity: "holo_x", start: "holo calibrated at 0,0", payload: "-1.0", want: holoAt(-1, 0)},
	{entity: "holo_y", start: "holo calibrated at 0,0", payload: "0.25", want: holoAt(0, 0.25)},
	{entity: "holo_x", start: "holo not calibrated", payload: "0.5", want: holoAt(0, 0), refused: "not_ready"},
	// Firmware: update; this gateway runs no rollouts (the install itself
	// is TestRolloutsOverMQTT's).
	{entity: "firmware", start: "any", refused: "needs rollouts"},
	// Restart: button (last: the board starts again).
	{entity: "restart", start: "any"},
}

// TestHACommands sends every command Home Assistant can send for every
// discovered entity, from each starting state, through each broker, and
// reads the board back.
func TestHACommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	t.Parallel()
	for bi, bc := range brokerCases() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			url := bc.start(t)
			r := startRig(t, url, rigOptions{n: 2})
			rc := newRecorder(t, url, r.base+"/#")
			ha := newRecorder(t, url, r.base+"-ha/#")
			names := r.waitOnline(t)
			id, name := r.infos[0].ID, names[0]
			h := &haRig{t: t, r: r, rc: rc, id: id, name: name, pub: publisher(t, url)}

			for _, s := range []struct{ name, body string }{
				{"glow", `{"leds":{"mode":"solid","colour":"#00ff00"}}`},
				{"pulse", `{"leds":{"mode":"rainbow","loop":true},"then":"restore","duration_s":60}`},
			} {
				h.call("PUT", "/scenes/scene?name="+s.name, s.body)
			}
			// The select appears once the bridge knows the saved scenes.
			var cmps map[string]map[string]any
			topic := r.base + "-ha/device/holo_" + id + "/config"
			if !ha.until(20*time.Second, func(msgs []rec) bool {
				m, ok := lastOf(msgs, topic)
				var d struct {
					Cmps map[string]map[string]any `json:"cmps"`
				}
				if !ok || json.Unmarshal(m.Payload, &d) != nil || d.Cmps["scene"] == nil {
					return false
				}
				cmps = d.Cmps
				opts, _ := cmps["scene"]["options"].([]any)
				return len(opts) == 2
			}) {
				t.Fatal("no discovery with the scene select")
			}
			// make test shares the rows out between the brokers (each row
			// runs on one of them, the restart on both); make soak runs
			// every row on each.
			for i, row := range haRows {
				if !testlevel.Soak() && i%2 != bi && i != len(haRows)-1 {
					continue
				}
				h.run(row, cmps[row.entity])
			}
		})
	}
}

type haRig struct {
	t        *testing.T
	r        *rig
	rc       *recorder
	id, name string
	pub      func(topic, payload string) // HA's connection
}

// call runs a request on the board directly (not through MQTT).
func (h *haRig) call(method, path, body string) (int, map[string]any) {
	h.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	rep, err := h.r.fleet.Call(h.t.Context(), h.id, method, path, b)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	var m map[string]any
	_ = json.Unmarshal(rep.Body, &m)
	return rep.Status, m
}

func (h *haRig) must(method, path, body string) map[string]any {
	h.t.Helper()
	st, m := h.call(method, path, body)
	if st >= 300 {
		h.t.Fatalf("%s %s %s: %d %v", method, path, body, st, m)
	}
	return m
}

func (h *haRig) now() boardNow {
	h.t.Helper()
	var s boardNow
	_, s.leds = h.call(http.MethodGet, "/leds", "")
	_, s.screen = h.call(http.MethodGet, "/screen", "")
	_, s.holo = h.call(http.MethodGet, "/holo", "")
	_, s.scenes = h.call(http.MethodGet, "/scenes", "")
	return s
}

// retained waits until the board's retained topic leaf matches.
func (h *haRig) retained(leaf string, ok func(v map[string]any) bool) {
	h.t.Helper()
	h.rc.waitLast(20*time.Second, h.r.base+"/"+h.name+"/"+leaf, ok)
}

// setStrip sets the strip and waits until the bridge saw it.
func (h *haRig) setStrip(body, mode string) {
	h.t.Helper()
	h.must(http.MethodPatch, "/leds", body)
	h.retained("leds", func(v map[string]any) bool { return v["effect"] == mode })
}

// starts puts the board in a starting state.
func (h *haRig) start(name string) {
	h.t.Helper()
	switch name {
	case "strip off (was solid)":
		h.setStrip(`{"mode":"solid","colour":"#102030","brightness":50,"loop":false}`, "solid")
		h.setStrip(`{"mode":"off"}`, "off")
	case "strip off (was wipe)":
		h.setStrip(`{"mode":"wipe","colour":"#102030","brightness":50,"loop":true}`, "wipe")
		h.setStrip(`{"mode":"off","loop":false}`, "off")
	case "strip solid":
		h.setStrip(`{"mode":"solid","colour":"#102030","brightness":50,"loop":false}`, "solid")
	case "strip rainbow":
		h.setStrip(`{"mode":"rainbow","colour":"#102030","brightness":50,"loop":true}`, "rainbow")
	case "panel asleep (level 60)", "panel asleep (level 0)":
		level := "60"
		if strings.Contains(name, "level 0") {
			level = "0"
		}
		h.must(http.MethodPatch, "/screen", `{"backlight":`+level+`}`)
		h.must(http.MethodDelete, "/screen", "")
		h.retained("screen", func(v map[string]any) bool { return v["state"] == "OFF" })
	case "panel awake (level 60)":
		h.must(http.MethodPatch, "/screen", `{"backlight":60}`)
		h.must(http.MethodPost, "/screen/show", `{"colour":"#202020"}`)
		h.retained("screen", func(v map[string]any) bool { return v["state"] == "ON" && v["brightness"] == 60.0 })
	case "no scene running":
		h.call(http.MethodPost, "/scenes/end", "")
		h.setStrip(`{"mode":"solid","colour":"#102030","brightness":50,"loop":false}`, "solid")
	case "scene pulse running":
		h.call(http.MethodPost, "/scenes/end", "")
		h.setStrip(`{"mode":"solid","colour":"#102030","brightness":50,"loop":false}`, "solid")
		h.must(http.MethodPost, "/scenes/apply", `{"name":"pulse"}`)
	case "holo not calibrated":
		// Centred and at rest first: a move still under way when the
		// calibration goes stays where it stopped (moving).
		for _, s := range []string{"pan", "tilt"} {
			h.must(http.MethodPut, "/servos/calibration?id="+s, `{"min_us":1000,"max_us":2000}`)
		}
		h.must(http.MethodPost, "/holo/motion", `{"motion":"center"}`)
		if err := h.eventually(holoAt(0, 0)); err != nil {
			h.t.Fatalf("holo centred: %v", err)
		}
		for _, s := range []string{"pan", "tilt"} {
			h.call(http.MethodDelete, "/servos/calibration?id="+s, "")
		}
	case "holo calibrated at 0,0":
		for _, s := range []string{"pan", "tilt"} {
			h.must(http.MethodPut, "/servos/calibration?id="+s, `{"min_us":1000,"max_us":2000}`)
		}
		h.must(http.MethodPost, "/holo/motion", `{"motion":"center"}`)
		if err := h.eventually(holoAt(0, 0)); err != nil {
			h.t.Fatalf("holo centred: %v", err)
		}
	case "any":
	default:
		h.t.Fatalf("no starting state %q", name)
	}
}

// eventually polls the board until check passes, or says why not.
func (h *haRig) eventually(check func(boardNow) error) error {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check(h.now())
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// command renders what HA publishes for the row from the discovery
// component.
func command(row haRow, cmp map[string]any) (topic, payload string) {
	topic, _ = cmp["command_topic"].(string)
	switch p, _ := cmp["p"].(string); p {
	case "button":
		payload, _ = cmp["payload_press"].(string)
	case "update":
		payload, _ = cmp["payload_install"].(string)
	case "select":
		tpl, _ := cmp["command_template"].(string)
		v, _ := json.Marshal(row.payload)
		payload = strings.Replace(tpl, "{{ value | tojson }}", string(v), 1)
	case "number":
		tpl, _ := cmp["command_template"].(string)
		payload = strings.Replace(tpl, "{{ value }}", row.payload, 1)
	default:
		payload = row.payload
	}
	return topic, payload
}

func (h *haRig) run(row haRow, cmp map[string]any) {
	t := h.t
	t.Helper()
	what := fmt.Sprintf("%s from %q: %s", row.entity, row.start, row.payload)
	if cmp == nil {
		t.Fatalf("%s: no such entity in the discovery", what)
	}
	h.start(row.start)
	topic, payload := command(row, cmp)
	if topic == "" || payload == "" {
		t.Fatalf("%s: no command topic or payload in %v", what, cmp)
	}
	mark := len(h.rc.all())
	h.pub(topic, payload)
	since := func(match func(rec) bool) bool {
		return slices.ContainsFunc(h.rc.all()[mark:], match)
	}
	waitFor := func(desc string, match func(rec) bool) {
		if !h.rc.until(20*time.Second, func(msgs []rec) bool { return slices.ContainsFunc(msgs[mark:], match) }) {
			t.Fatalf("%s: no %s", what, desc)
		}
	}
	bridgeEvent := func(typ, contains string) func(rec) bool {
		return func(m rec) bool {
			return m.Topic == h.r.base+"/bridge/event" && strings.Contains(string(m.Payload), `"type":"`+typ+`"`) &&
				strings.Contains(string(m.Payload), contains)
		}
	}
	switch {
	case row.refused != "":
		waitFor("command_error saying "+row.refused, bridgeEvent("command_error", row.refused))
		if row.want != nil {
			if err := row.want(h.now()); err != nil {
				t.Errorf("%s: refused, but the board changed: %v", what, err)
			}
		}
		return
	case row.entity == "restart":
		waitFor("board_restarted", bridgeEvent("board_restarted", h.id))
		h.r.waitOnline(t)
		return
	}
	if since(bridgeEvent("command_error", topic)) {
		t.Errorf("%s: refused", what)
	}
	if err := h.eventually(row.want); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if row.state != "" {
		leaf := "leds"
		if row.entity == "backlight" {
			leaf = "screen"
		}
		h.retained(leaf, func(v map[string]any) bool { return v["state"] == row.state })
	}
}
