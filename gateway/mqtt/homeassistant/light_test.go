package homeassistant

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
)

// TestHALights: the light state HA reads beside the board's own fields.
func TestHALights(t *testing.T) {
	got := string(LEDsState(json.RawMessage(`{"mode":"wipe","colour":"#ff8000","brightness":20}`)))
	want := `{"brightness":20,"color":{"b":0,"g":128,"r":255},"color_mode":"rgb","colour":"#ff8000","effect":"wipe","mode":"wipe","state":"ON"}`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("leds (-got +want)\n%s", diff)
	}
	got = string(ScreenState(json.RawMessage(`{"powered":false,"backlight":60,"showing":"nothing"}`)))
	want = `{"backlight":60,"brightness":60,"color_mode":"brightness","powered":false,"showing":"nothing","state":"OFF"}`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("screen (-got +want)\n%s", diff)
	}
}

// TestHALightPlans: what each Home Assistant light command does to the
// strip and the backlight, by the board's state (the table of
// docs/mqtt.md; TestHACommands runs it on boards through brokers).
func TestHALightPlans(t *testing.T) {
	for _, tc := range []struct {
		payload string
		now     LEDsNow
		want    string // the PATCH /leds body
	}{
		{`{"state":"OFF"}`, LEDsNow{Mode: "rainbow"}, `{"mode":"off"}`},
		{`{"state":"ON"}`, LEDsNow{Mode: "off"}, `{"mode":"solid"}`},
		{`{"state":"ON"}`, LEDsNow{Mode: "off", LastOn: "wipe"}, `{"mode":"wipe"}`},
		{`{"state":"ON"}`, LEDsNow{Mode: "rainbow"}, `{}`},
		{`{"state":"ON","color":{"r":12,"g":200,"b":34},"brightness":20}`, LEDsNow{Mode: "off"},
			`{"mode":"solid","colour":"#0cc822","brightness":20}`},
		{`{"state":"ON","color":{"r":12,"g":200,"b":34},"brightness":20}`, LEDsNow{Mode: "flicker"},
			`{"colour":"#0cc822","brightness":20}`},
		{`{"state":"ON","brightness":0}`, LEDsNow{Mode: "solid"}, `{"brightness":1}`},
		{`{"state":"ON","brightness":99.5}`, LEDsNow{Mode: "solid"}, `{"brightness":100}`},
		{`{"state":"ON","effect":"rainbow"}`, LEDsNow{Mode: "off"}, `{"mode":"rainbow"}`},
		{`{"state":"ON","effect":"solid","transition":2}`, LEDsNow{Mode: "wipe"}, `{"mode":"solid"}`},
		{`{"state":"ON"}`, LEDsNow{}, `{"mode":"solid"}`},
	} {
		hl, ok, err := ParseLight("leds", []byte(tc.payload))
		if !ok || err != nil {
			t.Errorf("%s: %v %v", tc.payload, ok, err)
			continue
		}
		p := LEDsPatch(hl, tc.now)
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", tc.payload, err)
		}
		if got := string(p.Request().Body); got != tc.want {
			t.Errorf("%s in %+v: %s, want %s", tc.payload, tc.now, got, tc.want)
		}
	}
	type call struct{ Method, Path, Body string }
	for _, tc := range []struct {
		payload string
		powered bool
		want    []call
	}{
		{`{"state":"OFF"}`, true, []call{{"DELETE", "/screen", ""}}},
		{`{"state":"ON"}`, true, nil},
		{`{"state":"ON","brightness":40}`, true, []call{{"PATCH", "/screen", `{"backlight":40}`}}},
		{`{"state":"ON"}`, false, []call{{"POST", "/screen/show", `{"colour":"#000000"}`}}},
		{`{"state":"ON","brightness":40}`, false, []call{{"PATCH", "/screen", `{"backlight":40}`}, {"POST", "/screen/show", `{"colour":"#000000"}`}}},
	} {
		hl, ok, err := ParseLight("screen", []byte(tc.payload))
		if !ok || err != nil {
			t.Errorf("%s: %v %v", tc.payload, ok, err)
			continue
		}
		var got []call
		for _, c := range BacklightCalls(hl, tc.powered) {
			got = append(got, call{c.Method, c.Path, string(c.Body)})
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s powered %v (-got +want)\n%s", tc.payload, tc.powered, diff)
		}
	}
	for _, bad := range []struct{ res, payload string }{
		{"leds", `{"state":"on"}`}, {"leds", `{"state":"ON","effect":"off"}`}, {"leds", `{"state":"ON","effect":"disco"}`},
		{"leds", `{"state":"ON","color":{"r":300,"g":0,"b":0}}`}, {"leds", `{"state":"ON","color":{"h":3,"s":4}}`},
		{"leds", `{"state":"ON","flash":"short"}`}, {"leds", `{"state":"ON","brightness":101}`},
		{"screen", `{"state":"ON","color":{"r":1,"g":2,"b":3}}`}, {"screen", `{"state":"ON","effect":"solid"}`},
	} {
		if _, ok, err := ParseLight(bad.res, []byte(bad.payload)); !ok || !errors.Is(err, cmdbody.ErrBadCommand) {
			t.Errorf("%s %s: %v %v, want ErrBadCommand", bad.res, bad.payload, ok, err)
		}
	}
}
