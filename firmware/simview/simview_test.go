package simview

import (
	"bytes"
	"encoding/json"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal/sim"
)

func TestView(t *testing.T) {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	d := sim.NewDisplay()
	_ = d.Fill(color.RGBA{10, 20, 30, 255})
	strip := sim.NewLEDStrip()
	_ = strip.Configure(2, 5)
	_ = strip.Write([]color.RGBA{{255, 0, 16, 255}, {0, 0, 0, 255}})
	pan := sim.NewServo(clk)
	_ = pan.Drive(2000)
	clk.Advance(150 * time.Millisecond)
	v := &View{Screen: d, Strip: strip, Mode: func() string { return "solid" },
		Servos: []NamedServo{{"pan", pan}, {"tilt", sim.NewServo(clk)}}}
	mux := http.NewServeMux()
	for _, rt := range v.Routes() {
		if rt.Link {
			t.Errorf("%s served over the link", rt.Path)
		}
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		return rec
	}
	rec := get("/sim/screen.png")
	img, err := png.Decode(bytes.NewReader(rec.Body.Bytes()))
	if err != nil || rec.Header().Get("Content-Type") != "image/png" {
		t.Fatalf("png: %v %q", err, rec.Header().Get("Content-Type"))
	}
	if b := img.Bounds(); b.Dx() != 240 || b.Dy() != 240 {
		t.Errorf("png size %v", b)
	}
	if got := color.RGBAModel.Convert(img.At(120, 120)); got != (color.RGBA{10, 20, 30, 255}) {
		t.Errorf("centre %v", got)
	}
	if got := color.RGBAModel.Convert(img.At(0, 0)); got != (color.RGBA{0, 0, 0, 255}) {
		t.Errorf("corner %v", got)
	}
	var leds LEDs
	if err := json.Unmarshal(get("/sim/leds").Body.Bytes(), &leds); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(leds, LEDs{Mode: "solid", Frames: 1, Pixels: []string{"#ff0010", "#000000"}}); diff != "" {
		t.Errorf("leds (-got +want)\n%s", diff)
	}
	var servos struct{ Servos []ServoView }
	if err := json.Unmarshal(get("/sim/servos").Body.Bytes(), &servos); err != nil {
		t.Fatal(err)
	}
	want := []ServoView{{ID: "pan", US: 2000, TargetUS: 2000, Driven: true}, {ID: "tilt", US: 1500, TargetUS: 1500}}
	if diff := cmp.Diff(servos.Servos, want); diff != "" {
		t.Errorf("servos (-got +want)\n%s", diff)
	}
}

func TestViewEmpty(t *testing.T) {
	v := &View{}
	if got := v.LEDs(); len(got.Pixels) != 0 || got.Mode != "" {
		t.Errorf("%+v", got)
	}
	rec := httptest.NewRecorder()
	v.Routes()[0].Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/sim/screen.png", nil))
	if rec.Code != 404 {
		t.Errorf("no screen: %d", rec.Code)
	}
}
