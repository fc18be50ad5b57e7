// Package linktest holds the host-link conformance table: every link path
// and native message with the reply a fresh simulated board gives. The
// board's link tests run it against the firmware, and the gateway's tests
// run it through the gateway's RS485 master, so both sides are held to the
// same expectations.
package linktest

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/holofleet/holofleet/bus/frame"
)

// LineCase is one JSON-line request and what its reply must hold.
type LineCase struct {
	Name string
	// Line is the request without its line feed, without an address
	// (the runner adds one where the transport needs it).
	Line   string
	Status int
	// Code is the error code of a refused request.
	Code string
	// Fields are top-level fields the reply body must hold with these
	// values (a subset check).
	Fields map[string]any
	// Keys are top-level fields the reply body must have, any value.
	Keys []string
}

// Lines is the conformance table of JSON lines, run in order against one
// fresh board (later cases may rely on earlier ones).
var Lines = []LineCase{
	{Name: "info", Line: "GET /info", Status: 200, Fields: map[string]any{"api": 1.0, "chip": "holo-sim"}, Keys: []string{"firmware", "hostname", "uptime_s", "features"}},
	{Name: "info with prefix", Line: "GET /api/v1/info", Status: 200, Fields: map[string]any{"api": 1.0}},
	{Name: "leds", Line: "GET /leds", Status: 200, Fields: map[string]any{"mode": "off"}, Keys: []string{"colour", "brightness", "count", "gpio"}},
	{Name: "leds patch", Line: `PATCH /leds {"mode":"solid","colour":"0,128,255","brightness":20}`, Status: 200, Fields: map[string]any{"mode": "solid", "colour": "#0080ff", "brightness": 20.0}},
	{Name: "leds bad colour", Line: `PATCH /leds {"colour":"ultraviolet"}`, Status: 400, Code: "bad_request"},
	{Name: "leds unknown field", Line: `PATCH /leds {"speed":3}`, Status: 400, Code: "bad_request"},
	{Name: "leds broken json", Line: `PATCH /leds {"mode":`, Status: 400, Code: "bad_request"},
	{Name: "leds scheduled", Line: `PATCH /leds?at_ms=60000 {"mode":"solid"}`, Status: 202,
		Fields: map[string]any{"scheduled": true, "in_us": 60000000.0}, Keys: []string{"fire_at"}},
	{Name: "leds scheduled too far", Line: `PATCH /leds?at_ms=60001 {"mode":"solid"}`, Status: 400, Code: "bad_request"},
	{Name: "leds scheduled bad body", Line: `PATCH /leds?at_ms=10 {"colour":"ultraviolet"}`, Status: 400, Code: "bad_request"},
	{Name: "scene end scheduled", Line: `POST /scenes/end?at_ms=60000`, Status: 202, Fields: map[string]any{"scheduled": true}},
	{Name: "holo", Line: "GET /holo", Status: 200, Fields: map[string]any{"ready": false}},
	{Name: "holo not ready", Line: `POST /holo/motion {"motion":"wag"}`, Status: 409, Code: "not_ready"},
	{Name: "holo stop when not ready", Line: `POST /holo/motion {"motion":"stop"}`, Status: 200},
	{Name: "servos", Line: "GET /servos", Status: 200, Keys: []string{"servos"}},
	{Name: "servo move", Line: `POST /servos/move {"id":"pan","us":1500}`, Status: 200},
	{Name: "servo release", Line: `POST /servos/release {"id":"all"}`, Status: 200},
	{Name: "settings", Line: "GET /settings", Status: 200, Keys: []string{"screen", "leds", "boot_scene"}},
	{Name: "settings patch", Line: `PATCH /settings {"screen":{"backlight":60}}`, Status: 200},
	{Name: "settings bad", Line: `PATCH /settings {"screen":{"backlight":-1}}`, Status: 400, Code: "bad_request"},
	{Name: "events json form", Line: "GET /events", Status: 200, Keys: []string{"seq", "lost", "events"}},
	{Name: "link", Line: "GET /link", Status: 200, Fields: map[string]any{"protocol": 1.0}, Keys: []string{"saved", "running", "counters"}},
	{Name: "link events", Line: "GET /link/events", Status: 200, Fields: map[string]any{"pending": 0.0}},
	{Name: "link events patch", Line: `PATCH /link/events {"kinds":["clip_ended","touch"],"push":false}`, Status: 200, Fields: map[string]any{"push": false}, Keys: []string{"seq", "pending"}},
	{Name: "link events bad kind", Line: `PATCH /link/events {"kinds":["sneeze"]}`, Status: 400, Code: "bad_request"},
	{Name: "time", Line: "GET /time?t1=5", Status: 200, Fields: map[string]any{"t1": 5.0}, Keys: []string{"t2", "t3"}},
	{Name: "time without t1", Line: "GET /time", Status: 200, Fields: map[string]any{"t1": nil}, Keys: []string{"t2", "t3"}},
	{Name: "time bad t1", Line: "GET /time?t1=soon", Status: 400, Code: "bad_request"},
	{Name: "restart bad delay", Line: `POST /restart {"delay_ms":10}`, Status: 400, Code: "bad_request"},
	{Name: "files not served", Line: "GET /fs", Status: 404, Code: "not_found"},
	{Name: "firmware not served", Line: "GET /ota", Status: 404, Code: "not_found"},
	{Name: "network not served", Line: "GET /network", Status: 404, Code: "not_found"},
	{Name: "web not served", Line: "GET /web", Status: 404, Code: "not_found"},
	{Name: "calibration not served", Line: `PUT /servos/calibration?id=pan {"min_us":1000,"max_us":2000}`, Status: 404, Code: "not_found"},
	{Name: "unknown path", Line: "GET /nope", Status: 404, Code: "not_found"},
	{Name: "unknown method", Line: "HEAD /info", Status: 404, Code: "not_found"},
	{Name: "no path", Line: "GET", Status: 400, Code: "bad_request"},
	{Name: "body not object", Line: "PATCH /leds [1,2]", Status: 400, Code: "bad_request"},
}

// NativeCase is one native request and the status of its reply.
type NativeCase struct {
	Name   string
	Req    frame.Request
	Status frame.Status
	// Check, when set, inspects the reply body.
	Check func(body frame.Message) error
}

// Natives is the conformance table of native messages against a fresh
// board with no scenes and an uncalibrated holo.
var Natives = []NativeCase{
	{Name: "ping", Req: &frame.PingRequest{}, Status: frame.StatusOK, Check: func(m frame.Message) error {
		if p := m.(*frame.PingReply); p.Protocol != frame.ProtocolVersion {
			return fmt.Errorf("protocol %d", p.Protocol)
		}
		return nil
	}},
	{Name: "version", Req: &frame.VersionRequest{}, Status: frame.StatusOK, Check: func(m frame.Message) error {
		if v := m.(*frame.VersionReply); v.Version == "" {
			return fmt.Errorf("empty version")
		}
		return nil
	}},
	{Name: "status", Req: &frame.StatusRequest{}, Status: frame.StatusOK, Check: func(m frame.Message) error {
		sb := m.(*frame.StatusReply).Block
		if sb.Holo != frame.HoloCannotMove || sb.Flags&frame.FlagHoloReady != 0 {
			return fmt.Errorf("uncalibrated holo reported movable: %+v", sb)
		}
		return nil
	}},
	{Name: "leds solid red", Req: &frame.LEDsRequest{Mode: frame.LEDSolid, R: 255, Brightness: 25, Flags: frame.LEDNewColour}, Status: frame.StatusOK},
	{Name: "leds keep mode", Req: &frame.LEDsRequest{Mode: frame.LEDKeep, Brightness: 10}, Status: frame.StatusOK},
	{Name: "status after leds", Req: &frame.StatusRequest{}, Status: frame.StatusOK, Check: func(m frame.Message) error {
		sb := m.(*frame.StatusReply).Block
		if sb.LEDs != frame.LEDSolid || sb.Brightness != 10 {
			return fmt.Errorf("leds %v brightness %d, want solid 10", sb.LEDs, sb.Brightness)
		}
		return nil
	}},
	{Name: "holo not ready", Req: &frame.HoloRequest{Motion: frame.MotionWag}, Status: frame.StatusNotReady},
	{Name: "holo stop", Req: &frame.HoloRequest{Motion: frame.MotionStop}, Status: frame.StatusOK},
	{Name: "events set", Req: &frame.EventsSetRequest{Kinds: frame.MaskClipEnded | frame.MaskSceneEnded}, Status: frame.StatusOK},
	{Name: "events get", Req: &frame.EventsGetRequest{}, Status: frame.StatusOK, Check: func(m frame.Message) error {
		if r := m.(*frame.EventsGetReply); len(r.Records) != 0 {
			return fmt.Errorf("records on a quiet board: %v", r.Records)
		}
		return nil
	}},
}

// SubsetMatch reports how body differs from the fields and keys wanted.
func SubsetMatch(body []byte, fields map[string]any, keys []string) error {
	if len(fields) == 0 && len(keys) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("body %s: %v", body, err)
	}
	for k, want := range fields {
		if got, ok := m[k]; !ok || !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s = %v, want %v in %s", k, got, want, body)
		}
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("no %s in %s", k, body)
		}
	}
	return nil
}
