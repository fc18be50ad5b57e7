package action

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/frame"
)

// decodeCases are bodies by kind: the request each stands for and its
// native form (type and payload in hex, "" for none), or the reason it is
// refused (a part of the error's text). The fuzz test is seeded from them.
var decodeCases = []struct {
	kind         Kind
	body         string
	method, path string
	json         string // the request's body as encoded
	native       string
	bad          string
}{
	{kind: KindSceneApply, body: `{"slot":3}`, method: "POST", path: "/scenes/apply", json: `{"slot":3}`, native: "10 03"},
	{kind: KindSceneApply, body: `{"slot":255}`, method: "POST", path: "/scenes/apply", json: `{"slot":255}`, native: "10 ff"},
	{kind: KindSceneApply, body: ` {"name":"intro"} `, method: "POST", path: "/scenes/apply", json: `{"name":"intro"}`},
	{kind: KindSceneApply, body: `{"scene":{"leds":{"mode":"solid","colour":"red"},"then":"restore","duration_s":2.5},"name":"x"}`,
		method: "POST", path: "/scenes/apply", json: `{"name":"x","scene":{"leds":{"mode":"solid","colour":"red"},"then":"restore","duration_s":2.5}}`},
	{kind: KindSceneApply, body: `{"slot":0}`, bad: "slot must be 1-255"},
	{kind: KindSceneApply, body: `{"slot":256}`, bad: "slot must be 1-255"},
	{kind: KindSceneApply, body: `{"slot":1.5}`, bad: "slot must be"},
	{kind: KindSceneApply, body: `{"slot":2,"name":"x"}`, bad: "give name, slot, or scene"},
	{kind: KindSceneApply, body: `{}`, bad: "give name, slot, or scene"},
	{kind: KindSceneApply, body: `{"name":""}`, bad: "scene name"},
	{kind: KindSceneApply, body: `{"scene":{"then":"restore"}}`, bad: "needs duration_s"},
	{kind: KindSceneApply, body: `{"scene":{"leds":{"brightness":0}}}`, bad: "leds: brightness 0"},
	{kind: KindSceneApply, body: `{"scene":{"holo":{"motion":"spin"}}}`, bad: "holo: motion \"spin\""},
	{kind: KindSceneApply, body: `{"scene":{"screen":{"colour":"nope-colour"}}}`, bad: "screen: colour"},
	{kind: KindSceneApply, body: `{"nme":"typo"}`, bad: `unknown field "nme"`},
	{kind: KindSceneEnd, body: ``, method: "POST", path: "/scenes/end", native: "11"},
	{kind: KindSceneEnd, body: `{}`, method: "POST", path: "/scenes/end", native: "11"},
	{kind: KindSceneEnd, body: `{"now":true}`, bad: `unknown field "now"`},
	{kind: KindScreenOff, body: ``, method: "DELETE", path: "/screen", native: "20"},
	{kind: KindScreenOff, body: `[]`, bad: "must be a JSON object"},
	{kind: KindScreenShow, body: `{"colour":"#ff8000"}`, method: "POST", path: "/screen/show", json: `{"colour":"#ff8000"}`, native: "21 ff8000"},
	{kind: KindScreenShow, body: `{"colour":"10, 20, 30"}`, method: "POST", path: "/screen/show", json: `{"colour":"10, 20, 30"}`, native: "21 0a141e"},
	{kind: KindScreenShow, body: `{"path":"/clips/a.mov","loops":3}`, method: "POST", path: "/screen/show", json: `{"path":"/clips/a.mov","loops":3}`},
	{kind: KindScreenShow, body: `{"calibration":true}`, method: "POST", path: "/screen/show", json: `{"calibration":true}`},
	{kind: KindScreenShow, body: `{"colour":"nope-colour"}`, bad: "colour \"nope-colour\""},
	{kind: KindScreenShow, body: `{"colour":"red","path":"/a.png"}`, bad: "only one of"},
	{kind: KindScreenShow, body: `{"colour":"red","loop":true}`, bad: "loop and loops go with a path"},
	{kind: KindScreenShow, body: `{"path":"/a.mov","loops":0}`, bad: "loops must be 1-10000"},
	{kind: KindScreenShow, body: `{"path":"../etc/passwd"}`, bad: "screen_show"},
	{kind: KindLEDs, body: `{"mode":"rainbow","loop":true}`, method: "PATCH", path: "/leds", json: `{"mode":"rainbow","loop":true}`, native: "30 03000000 00 01"},
	{kind: KindLEDs, body: `{"mode":"solid","colour":"#010203","brightness":40,"loop":false}`, method: "PATCH", path: "/leds",
		json: `{"mode":"solid","colour":"#010203","loop":false,"brightness":40}`, native: "30 01010203 28 02"},
	{kind: KindLEDs, body: `{"brightness":100,"loop":true}`, method: "PATCH", path: "/leds", json: `{"loop":true,"brightness":100}`, native: "30 ff000000 64 01"},
	{kind: KindLEDs, body: `{"brightness":1,"loop":true}`, method: "PATCH", path: "/leds", json: `{"loop":true,"brightness":1}`, native: "30 ff000000 01 01"},
	{kind: KindLEDs, body: `{"colour":"warm white","loop":true}`, method: "PATCH", path: "/leds", json: `{"colour":"warm white","loop":true}`, native: "30 ffffb46b 00 03"},
	// Without loop the frame would change it: no native form.
	{kind: KindLEDs, body: `{"mode":"solid"}`, method: "PATCH", path: "/leds", json: `{"mode":"solid"}`},
	{kind: KindLEDs, body: `{}`, method: "PATCH", path: "/leds", json: `{}`},
	{kind: KindLEDs, body: `{"mode":"sparkle"}`, bad: `mode "sparkle"`},
	{kind: KindLEDs, body: `{"brightness":0}`, bad: "brightness 0: want a percent from 1 to 100"},
	{kind: KindLEDs, body: `{"brightness":101}`, bad: "brightness 101"},
	{kind: KindLEDs, body: `{"brightness":20.5}`, bad: "brightness must be"},
	{kind: KindLEDs, body: `{"colour":"#fff"}`, bad: `colour "#fff"`},
	{kind: KindLEDs, body: `{"speed":3,"loop":true}`, bad: `unknown field "speed"`},
	{kind: KindLEDs, body: `{"mode":`, bad: "not valid JSON"},
	{kind: KindLEDs, body: `[1,2]`, bad: "must be a JSON object"},
	{kind: KindLEDs, body: `{"loop":true} {}`, bad: "trailing data"},
	{kind: KindHolo, body: `{"motion":"wag"}`, method: "POST", path: "/holo/motion", json: `{"motion":"wag"}`, native: "40 04 00 00 0000 00 00"},
	{kind: KindHolo, body: `{"motion":"move","x":0.25,"y":-1}`, method: "POST", path: "/holo/motion", json: `{"motion":"move","x":0.25,"y":-1}`, native: "40 01 19 9c 0000 00 00"},
	{kind: KindHolo, body: `{"motion":"move","x":0.29,"y":0}`, method: "POST", path: "/holo/motion", json: `{"motion":"move","x":0.29,"y":0}`, native: "40 01 1d 00 0000 00 00"},
	{kind: KindHolo, body: `{"motion":"nudge","x":-1.28,"y":1.27}`, method: "POST", path: "/holo/motion", json: `{"motion":"nudge","x":-1.28,"y":1.27}`, native: "40 02 80 7f 0000 00 00"},
	{kind: KindHolo, body: `{"motion":"nod","duration_ms":1500,"range":40,"count":3}`, method: "POST", path: "/holo/motion",
		json: `{"motion":"nod","duration_ms":1500,"range":40,"count":3}`, native: "40 05 00 00 dc05 28 03"},
	{kind: KindHolo, body: `{"motion":"move","x":0.255,"y":0}`, method: "POST", path: "/holo/motion", json: `{"motion":"move","x":0.255,"y":0}`},
	{kind: KindHolo, body: `{"motion":"move","x":0.5}`, method: "POST", path: "/holo/motion", json: `{"motion":"move","x":0.5}`},
	{kind: KindHolo, body: `{"motion":"nudge","x":1.5,"y":0}`, method: "POST", path: "/holo/motion", json: `{"motion":"nudge","x":1.5,"y":0}`},
	{kind: KindHolo, body: `{"motion":"wag","x":1}`, method: "POST", path: "/holo/motion", json: `{"motion":"wag","x":1}`},
	{kind: KindHolo, body: `{"motion":"scan","interval_s":[1,2]}`, method: "POST", path: "/holo/motion", json: `{"motion":"scan","interval_s":[1,2]}`},
	{kind: KindHolo, body: `{"motion":"nod","duration_ms":0}`, method: "POST", path: "/holo/motion", json: `{"motion":"nod","duration_ms":0}`},
	{kind: KindHolo, body: `{"motion":"move","x":1.5,"y":0}`, bad: "x 1.5"},
	{kind: KindHolo, body: `{"motion":"nod","duration_ms":70000}`, bad: "duration_ms 70000"},
	{kind: KindHolo, body: `{"motion":"spin"}`, bad: `motion "spin"`},
	{kind: KindHolo, body: `{}`, bad: `motion ""`},
	{kind: KindHolo, body: `{"motion":"twitch","interval_s":[2,1]}`, bad: "interval_s"},
	{kind: "explode", body: `{}`, bad: "unknown kind"},
}

func hexOf(s string) string { return strings.ReplaceAll(s, " ", "") }

func nativeHex(t *testing.T, b Body) string {
	t.Helper()
	req, ok := b.Native()
	if !ok {
		return ""
	}
	payload, err := req.AppendBinary(nil)
	if err != nil {
		t.Fatalf("%T: native form does not encode: %v", b, err)
	}
	return hex.EncodeToString(append([]byte{byte(req.Type())}, payload...))
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases {
		b, err := Decode(tc.kind, []byte(tc.body))
		if tc.bad != "" {
			want := ErrInvalid
			if tc.kind == "explode" {
				want = ErrUnknownKind
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s %s: err %v, want %v saying %q", tc.kind, tc.body, err, want, tc.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tc.kind, tc.body, err)
			continue
		}
		if b.Kind() != tc.kind {
			t.Errorf("%s %s: kind %s", tc.kind, tc.body, b.Kind())
		}
		r := b.Request()
		got := []string{r.Method, r.Path, string(r.Body), nativeHex(t, b)}
		if diff := cmp.Diff(got, []string{tc.method, tc.path, tc.json, hexOf(tc.native)}); diff != "" {
			t.Errorf("%s %s (-got +want)\n%s", tc.kind, tc.body, diff)
		}
	}
}

// TestNativeMeansTheSame reads every native form back with the board's
// own native readers and compares what the board would do with what the
// JSON body says.
func TestNativeMeansTheSame(t *testing.T) {
	n := 0
	for _, tc := range decodeCases {
		if tc.native == "" {
			continue
		}
		b, err := Decode(tc.kind, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if err := sameOnBoard(b); err != nil {
			t.Errorf("%s %s: %v", tc.kind, tc.body, err)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d native cases", n)
	}
}

// sameOnBoard checks that b's native form means what b means, by the
// board's readers of native payloads (bus/boardapi).
func sameOnBoard(b Body) error {
	req, ok := b.Native()
	if !ok {
		return nil
	}
	payload, err := req.AppendBinary(nil)
	if err != nil {
		return err
	}
	back, err := frame.ParseRequest(frame.Frame{Type: req.Type(), Payload: payload})
	if err != nil {
		return err
	}
	again, _ := back.AppendBinary(nil)
	if string(again) != string(payload) {
		return errors.New("native payload does not round-trip")
	}
	switch v := b.(type) {
	case LEDs:
		p, err := boardapi.LEDPatchFromNative(payload)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(normLEDs(boardapi.LEDPatch(v)), normLEDs(p)); diff != "" {
			return errors.New("LEDS differs (-json +native)\n" + diff)
		}
	case Holo:
		m, err := boardapi.MotionFromNative(payload)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(boardapi.MotionRequest(v), m); diff != "" {
			return errors.New("HOLO differs (-json +native)\n" + diff)
		}
	case SceneApply:
		if int(payload[0]) != *v.Slot {
			return errors.New("SCENE slot differs")
		}
	case ScreenShow:
		c, _ := boardapi.ParseColour(*v.Colour)
		if payload[0] != c.R || payload[1] != c.G || payload[2] != c.B {
			return errors.New("COLOUR differs")
		}
	case SceneEnd, ScreenOff:
		if len(payload) != 0 {
			return errors.New("payload where none is due")
		}
	default:
		return errors.New("unknown body type")
	}
	return nil
}

// normLEDs spells a patch's colour as #rrggbb so names and numbers
// compare.
func normLEDs(p boardapi.LEDPatch) boardapi.LEDPatch {
	if p.Colour != nil {
		if c, err := boardapi.ParseColour(*p.Colour); err == nil {
			s := boardapi.FormatColour(c)
			p.Colour = &s
		}
	}
	return p
}

// TestValidateTypedValues: values built in code (as the MQTT bridge builds
// them from Home Assistant's commands) are checked by the same rules.
func TestValidateTypedValues(t *testing.T) {
	ptr := func(v int) *int { return &v }
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		b  Body
		ok bool
	}{
		{LEDs{Brightness: ptr(1)}, true},
		{LEDs{Brightness: ptr(0)}, false},
		{LEDs{Mode: str("disco")}, false},
		{Holo{Motion: "move"}, true},
		{Holo{Motion: "dance"}, false},
		{SceneApply{Slot: ptr(0)}, false},
		{ScreenShow{}, false},
	} {
		if err := tc.b.Validate(); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%#v: %v, want ok %v", tc.b, err, tc.ok)
		}
	}
}
