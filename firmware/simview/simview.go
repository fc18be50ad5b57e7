// Package simview serves a look at the simulated hardware, for people and
// tests watching a simulated board. These endpoints are an extension: the
// board API specification does not have them, real boards do not serve
// them, and they are never served over the host link.
//
//	GET /sim/screen.png  what the round glass shows now, as a 240x240 PNG
//	                     (mask, backlight and sleep applied)
//	GET /sim/leds        {"mode", "frames", "pixels": ["#rrggbb", ...]}:
//	                     the colour each LED shows now, after brightness
//	GET /sim/servos      {"servos": [{"id", "us", "target_us", "driven",
//	                     "moving"}]}: where each horn is now (µs) and the
//	                     pulse it was last sent
//
// Paths are under /api/v1 like the rest of the API.
package simview

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strconv"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Screen is the display to show (hal.Display has it).
type Screen interface{ Snapshot() *image.RGBA }

// Strip is the simulated strip's read side (sim.LEDStrip has it).
type Strip interface {
	Pixels() []color.RGBA
	Frames() int
}

// Moder tells the strip's mode name (leds.Controller's State has it; the
// board passes a small adapter, or nil).
type Moder func() string

// Servo is a servo whose last pulse can be read (sim.Servo has it).
type Servo interface {
	hal.Servo
	Target() int
}

// NamedServo is a servo with its id.
type NamedServo struct {
	ID    string
	Servo Servo
}

// View serves the simulator endpoints.
type View struct {
	Screen Screen
	Strip  Strip
	Mode   Moder // may be nil
	Servos []NamedServo
}

// LEDs is the body of GET /sim/leds.
type LEDs struct {
	Mode   string   `json:"mode"`
	Frames int      `json:"frames"`
	Pixels []string `json:"pixels"`
}

// ServoView is one servo in GET /sim/servos.
type ServoView struct {
	ID       string `json:"id"`
	US       int    `json:"us"`
	TargetUS int    `json:"target_us"`
	Driven   bool   `json:"driven"`
	Moving   bool   `json:"moving"`
}

// Routes returns the three GET endpoints (not over the link).
func (v *View) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/sim/screen.png", Summary: "Simulator extension: the screen as PNG",
			Handler: http.HandlerFunc(v.screen)},
		{Method: http.MethodGet, Path: "/sim/leds", Summary: "Simulator extension: the colour of every LED",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, v.LEDs())
			})},
		{Method: http.MethodGet, Path: "/sim/servos", Summary: "Simulator extension: servo horn positions",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				api.WriteJSON(w, http.StatusOK, map[string]any{"servos": v.ServoViews()})
			})},
	}
}

func (v *View) screen(w http.ResponseWriter, r *http.Request) {
	if v.Screen == nil {
		api.WriteError(w, api.Errorf(api.ErrNotFound, "no screen in this simulator"))
		return
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, v.Screen.Snapshot()); err != nil {
		api.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// LEDs returns what the strip shows now.
func (v *View) LEDs() LEDs {
	out := LEDs{Pixels: []string{}}
	if v.Mode != nil {
		out.Mode = v.Mode()
	}
	if v.Strip == nil {
		return out
	}
	out.Frames = v.Strip.Frames()
	for _, p := range v.Strip.Pixels() {
		out.Pixels = append(out.Pixels, "#"+hex2(p.R)+hex2(p.G)+hex2(p.B))
	}
	return out
}

// ServoViews returns where every servo is now.
func (v *View) ServoViews() []ServoView {
	out := []ServoView{}
	for _, s := range v.Servos {
		us, driven := s.Servo.Position()
		t := s.Servo.Target()
		out = append(out, ServoView{ID: s.ID, US: us, TargetUS: t, Driven: driven, Moving: driven && us != t})
	}
	return out
}

func hex2(b uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}
