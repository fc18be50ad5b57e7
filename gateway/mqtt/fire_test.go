package mqtt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTakeFireTime(t *testing.T) {
	at := time.Date(2026, 3, 1, 20, 0, 0, 250_000_000, time.UTC)
	for _, tc := range []struct {
		payload string
		rest    string
		ft      fireTime
		timed   bool
		bad     string
	}{
		{payload: `{"colour":"red"}`, rest: `{"colour":"red"}`},
		{payload: `not json`, rest: `not json`},
		{payload: `{"colour":"red","fire_at":"2026-03-01T20:00:00.25Z"}`, rest: `{"colour":"red"}`, ft: fireTime{at: at}, timed: true},
		{payload: `{"fire_at":"2026-03-01T21:00:00.25+01:00","mode":"off"}`, rest: `{"mode":"off"}`, ft: fireTime{at: at}, timed: true},
		{payload: `{"lead_ms":250,"end":true}`, rest: `{"end":true}`, ft: fireTime{lead: 250 * time.Millisecond}, timed: true},
		{payload: `{"lead_ms":0}`, rest: `{}`, timed: true},
		{payload: `{"lead_ms":60001}`, timed: true, bad: "lead_ms must be an integer 0-60000"},
		{payload: `{"lead_ms":-5}`, timed: true, bad: "lead_ms must be"},
		{payload: `{"lead_ms":2.5}`, timed: true, bad: "lead_ms must be"},
		{payload: `{"fire_at":1700000000}`, timed: true, bad: "RFC 3339 time string"},
		{payload: `{"fire_at":"tomorrow"}`, timed: true, bad: "not an RFC 3339 time"},
		{payload: `{"fire_at":"2026-03-01T20:00:00Z","lead_ms":5}`, timed: true, bad: "not both"},
	} {
		rest, ft, timed, err := takeFireTime([]byte(tc.payload))
		if tc.bad != "" {
			if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), tc.bad) || !timed {
				t.Errorf("%s: err %v, want one saying %q", tc.payload, err, tc.bad)
			}
			continue
		}
		if err != nil || timed != tc.timed || string(rest) != tc.rest || !ft.at.Equal(tc.ft.at) || ft.lead != tc.ft.lead {
			t.Errorf("%s: %s %+v %v %v", tc.payload, rest, ft, timed, err)
		}
		if c := (command{sort: cmdSet, payload: []byte(tc.payload)}); c.timed() != tc.timed {
			t.Errorf("%s: timed() %v", tc.payload, c.timed())
		}
	}
}

func TestTimedAction(t *testing.T) {
	ft := fireTime{lead: time.Second}
	for _, tc := range []struct {
		resource, body string
		kind           string
		bad            string
	}{
		{resource: "leds", body: `{"colour":"red","loop":true}`, kind: "leds"},
		{resource: "scene", body: `{"end":true}`, kind: "scene_end"},
		{resource: "scene", body: `{"slot":3}`, kind: "scene_apply"},
		{resource: "screen", body: `{"off":true}`, kind: "screen_off"},
		{resource: "holo", body: `{"motion":"wag"}`, kind: "holo"},
		{resource: "leds", body: `{"state":"ON"}`, bad: "Home Assistant"},
		{resource: "screen", body: `{"backlight":20}`, bad: "backlight"},
		{resource: "settings", body: `{}`, bad: "settings takes no"},
		{resource: "restart", body: `{}`, bad: "restart takes no"},
		{resource: "leds", body: `{"colour":"ultraviolet"}`, bad: "colour"},
	} {
		a, err := timedAction(tc.resource, []byte(tc.body), ft)
		if tc.bad != "" {
			if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s %s: err %v, want one saying %q", tc.resource, tc.body, err, tc.bad)
			}
			continue
		}
		if err != nil || a.Kind != tc.kind || a.Lead != time.Second {
			t.Errorf("%s %s: %+v %v", tc.resource, tc.body, a, err)
		}
	}
}

// FuzzTakeFireTime: any payload is read without panicking; what it
// leaves is the payload without the two keys.
func FuzzTakeFireTime(f *testing.F) {
	for _, p := range []string{`{"colour":"red"}`, `{"fire_at":"2026-03-01T20:00:00Z","mode":"off"}`, `{"lead_ms":250}`,
		`{"lead_ms":1e3}`, `{"fire_at":null}`, `{"lead_ms":1,"scene":{"fire_at":1}}`, `[]`, `nope`} {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		rest, ft, timed, err := takeFireTime(payload)
		if !timed {
			if string(rest) != string(payload) {
				t.Fatalf("untimed payload changed: %q -> %q", payload, rest)
			}
			return
		}
		if err != nil {
			return
		}
		if ft.lead < 0 || ft.lead > 60*time.Second {
			t.Fatalf("lead %v", ft.lead)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(rest, &m); err != nil {
			t.Fatalf("rest %q: %v", rest, err)
		}
		if _, ok := m[keyFireAt]; ok {
			t.Fatalf("fire_at left in %q", rest)
		}
		if _, ok := m[keyLeadMS]; ok {
			t.Fatalf("lead_ms left in %q", rest)
		}
	})
}
