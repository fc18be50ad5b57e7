package mqtt

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

func TestHappeningPayload(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		ev   fleet.Event
		want string
	}{
		{fleet.Event{N: 9, Board: "b1", Kind: "touch", Seq: 3, Time: at, Data: json.RawMessage(`{"action":"down","seq":3,"t_ms":10}`)},
			`{"event_type":"touch","board":"b1","n":9,"time":"2026-01-02T03:04:05Z","action":"down","seq":3,"t_ms":10}`},
		{fleet.Event{N: 1, Board: "b\"2", Kind: "clip_ended", Seq: 65535, Time: at, Data: json.RawMessage(`{}`)},
			`{"event_type":"clip_ended","board":"b\"2","n":1,"time":"2026-01-02T03:04:05Z","seq":65535}`},
		{fleet.Event{N: 2, Board: "b", Kind: "k", Seq: 1, Time: at},
			`{"event_type":"k","board":"b","n":2,"time":"2026-01-02T03:04:05Z","seq":1}`},
	} {
		got := string(happeningPayload(tc.ev))
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("payload (-got +want)\n%s", diff)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("not JSON: %s", got)
		}
	}
}

func TestTranslate(t *testing.T) {
	b := &Bridge{}
	type call struct{ Method, Path, Body string }
	for _, tc := range []struct {
		res, payload string
		want         []call
		bad          bool
	}{
		{"leds", `{"mode":"rainbow","brightness":20}`, []call{{"PATCH", "/leds", `{"mode":"rainbow","brightness":20}`}}, false},
		{"leds", `{"brightness":1}`, []call{{"PATCH", "/leds", `{"brightness":1}`}}, false},
		{"leds", `{"state":"ON"}`, nil, true}, // HA's form is not the board's (homeassistant.ParseLight takes it first)
		{"leds", `{"mode":"disco"}`, nil, true},
		{"leds", `{"brightness":101}`, nil, true},
		{"leds", `{"brightness":0}`, nil, true}, // the board's range is 1-100, as over the API
		{"leds", `{"brightness":1.5}`, nil, true},
		{"leds", `{}`, nil, true},
		{"leds", `[1]`, nil, true},
		{"screen", `{"backlight":40}`, []call{{"PATCH", "/screen", `{"backlight":40}`}}, false},
		{"screen", `{"backlight":0}`, []call{{"PATCH", "/screen", `{"backlight":0}`}}, false},
		{"screen", `{"backlight":40,"path":"/a.png"}`, nil, true},
		{"screen", `{"path":"/media/a.mov","loop":true}`, []call{{"POST", "/screen/show", `{"path":"/media/a.mov","loop":true}`}}, false},
		{"screen", `{"colour":"red"}`, []call{{"POST", "/screen/show", `{"colour":"red"}`}}, false},
		{"screen", `{"off":true}`, []call{{"DELETE", "/screen", ""}}, false},
		{"screen", `{"off":false}`, nil, true},
		{"screen", `{"colour":"red","path":"/a.png"}`, nil, true},
		{"screen", `{"backlight":"high"}`, nil, true},
		{"holo", `{"motion":"move","x":0.5,"y":-1}`, []call{{"POST", "/holo/motion", `{"motion":"move","x":0.5,"y":-1}`}}, false},
		{"holo", `{"y":-1,"motion":"move"}`, []call{{"POST", "/holo/motion", `{"motion":"move","y":-1}`}}, false},
		{"holo", `{"motion":"move","x":2}`, nil, true},
		{"holo", `{"motion":"Rm -rf"}`, nil, true},
		{"holo", `{"x":0}`, nil, true},
		{"scene", `{"name":"glow"}`, []call{{"POST", "/scenes/apply", `{"name":"glow"}`}}, false},
		{"scene", `{"slot":3}`, []call{{"POST", "/scenes/apply", `{"slot":3}`}}, false},
		{"scene", `{"end":true}`, []call{{"POST", "/scenes/end", ""}}, false},
		{"scene", `{"slot":0}`, nil, true},
		{"scene", `{"name":"a","slot":1}`, nil, true},
		{"scene", `{"scene":3}`, nil, true},
		{"scene", `{"end":true,"name":"x"}`, nil, true},
		{"scene", `{"scene":{"leds":{"mode":"rainbow"}},"name":"x"}`, []call{{"POST", "/scenes/apply", `{"name":"x","scene":{"leds":{"mode":"rainbow"}}}`}}, false},
		{"settings", `{"leds":{"brightness":20}}`, []call{{"PATCH", "/settings", `{"leds":{"brightness":20}}`}}, false},
		{"settings", `{"leds":{"colour":"red"}}`, nil, true},
		{"settings", `{"leds":{"brightness":0}}`, nil, true},
		{"settings", `{"leds":{"count":0}}`, nil, true},
		{"settings", `{"screen":{"backlight":0}}`, []call{{"PATCH", "/settings", `{"screen":{"backlight":0}}`}}, false},
		{"restart", ``, []call{{"POST", "/restart", ""}}, false},
		{"restart", `{"delay_ms":100}`, nil, true},
		{"teleport", `{}`, nil, true},
	} {
		calls, err := b.translate("id", tc.res, []byte(tc.payload))
		if tc.bad {
			if err == nil || !errors.Is(err, ErrBadCommand) {
				t.Errorf("%s %s: err %v, want ErrBadCommand", tc.res, tc.payload, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tc.res, tc.payload, err)
			continue
		}
		var got []call
		for _, c := range calls {
			got = append(got, call{c.method, c.path, string(c.body)})
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s %s (-got +want)\n%s", tc.res, tc.payload, diff)
		}
	}
}

func TestParseTopic(t *testing.T) {
	b := &Bridge{o: Options{Base: "holo", HAPrefix: "ha"}, t: layout.Topics{Base: "holo", HA: "ha"}}
	for _, tc := range []struct {
		topic string
		want  command
		bad   bool
	}{
		{"holo/b1/set/leds", command{sort: cmdSet, board: "b1", resource: "leds"}, false},
		{"holo/group/3/set/scene", command{sort: cmdGroup, group: 3, resource: "scene"}, false},
		{"holo/group/32/set/scene", command{sort: cmdGroup, resource: "scene"}, false},
		{"holo/group/03/set/scene", command{sort: cmdGroup, resource: "scene"}, false},
		{"holo/bridge/request/call", command{sort: cmdRequest, verb: "call"}, false},
		{"ha/status", command{sort: cmdHA}, false},
		{"holo/bridge/set/leds", command{}, true},
		{"other/b1/set/leds", command{}, true},
		{"holo/b1/leds", command{}, true},
	} {
		got, err := b.parseTopic(tc.topic)
		if (err != nil) != tc.bad {
			t.Errorf("%s: err %v", tc.topic, err)
			continue
		}
		if err != nil {
			continue
		}
		tc.want.topic = tc.topic
		if diff := cmp.Diff(got, tc.want, cmp.AllowUnexported(command{})); diff != "" {
			t.Errorf("%s (-got +want)\n%s", tc.topic, diff)
		}
	}
}

func TestLimiter(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	l := newLimiter(clk, 2, 100, 3)
	n := 0
	for range 10 {
		if l.allow("board/a", "t1") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("burst: %d allowed, want 3", n)
	}
	if !l.allow("board/b", "t2") {
		t.Error("another board is not limited by the first")
	}
	clk.Advance(time.Second)
	n = 0
	for range 10 {
		if l.allow("board/a", "t1") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("after 1 s at 2/s: %d allowed, want 2", n)
	}
	// The topic's own limit.
	l2 := newLimiter(clk, 100, 1, 1)
	if !l2.allow("board/a", "t") || l2.allow("board/b", "t") {
		t.Error("per-topic limit not applied")
	}
}

// FuzzCommand feeds topics and payloads to the command path: it never
// panics, and a payload it accepts becomes JSON bodies only.
func FuzzCommand(f *testing.F) {
	for _, s := range []struct{ topic, payload string }{
		{"holo/b1/set/leds", `{"mode":"rainbow"}`}, {"holo/b1/set/leds", `{"state":"ON","color":{"r":1,"g":2,"b":3}}`},
		{"holo/b1/set/screen", `{"state":"ON","brightness":3}`}, {"holo/b1/set/holo", `{"motion":"wag","interval_s":[1,2]}`},
		{"holo/b1/set/scene", `{"end":true}`}, {"holo/group/2/set/scene", `{"slot":1}`},
		{"holo/b1/set/settings", `{"screen":{"backlight":5}}`}, {"holo/bridge/request/call", `{"board":"x"}`},
	} {
		f.Add(s.topic, []byte(s.payload))
	}
	b := &Bridge{o: Options{Base: "holo", HAPrefix: "ha"}, t: layout.Topics{Base: "holo", HA: "ha"}}
	f.Fuzz(func(t *testing.T, topic string, payload []byte) {
		c, err := b.parseTopic(topic)
		if err != nil || c.sort != cmdSet {
			return
		}
		if hl, ok, err := homeassistant.ParseLight(c.resource, payload); ok {
			if err != nil {
				return
			}
			// An accepted HA command never makes a body the board refuses,
			// whatever state the board is in.
			for _, now := range []homeassistant.LEDsNow{{}, {Mode: "off"}, {Mode: "rainbow"}, {Mode: "off", LastOn: "wipe"}} {
				if c.resource == "leds" {
					if err := homeassistant.LEDsPatch(hl, now).Validate(); err != nil {
						t.Fatalf("%s %s in %+v: %v", topic, payload, now, err)
					}
				}
			}
			for _, powered := range []bool{false, true} {
				for _, ac := range homeassistant.BacklightCalls(hl, powered) {
					if ac.Body != nil && !json.Valid(ac.Body) {
						t.Fatalf("%s %s: body %q", topic, payload, ac.Body)
					}
				}
			}
			return
		}
		calls, err := b.translate("id", c.resource, payload)
		if err != nil {
			return
		}
		for _, ac := range calls {
			if ac.body != nil && !json.Valid(ac.body) {
				t.Fatalf("%s %s: body %q", topic, payload, ac.body)
			}
		}
	})
}

func TestParseAccept(t *testing.T) {
	for in, want := range map[string]auth.Role{"": auth.RoleAdmin, "none": auth.RoleNone, "viewer": auth.RoleViewer,
		"operator": auth.RoleOperator, "admin": auth.RoleAdmin} {
		if got, err := ParseAccept(in); err != nil || got != want {
			t.Errorf("ParseAccept(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseAccept("root"); err == nil {
		t.Error("accept root")
	}
}

// TestSceneNames: the saved scenes' names from GET /scenes, sorted.
func TestSceneNames(t *testing.T) {
	if got := sceneNames(json.RawMessage(`{"scenes":[{"name":"b"},{"name":"a"}],"active":null}`)); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("scene names %v", got)
	}
}
