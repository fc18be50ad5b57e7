package leds

import (
	"context"
	"encoding/json"
	"errors"
	"image/color"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal/sim"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type recPub struct {
	mu     sync.Mutex
	states []State
}

func (p *recPub) SetState(kind string, state any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if kind != Kind {
		panic("kind " + kind)
	}
	p.states = append(p.states, state.(State))
}

func (p *recPub) all() []State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]State(nil), p.states...)
}

type rig struct {
	clk   *clock.Fake
	strip *sim.LEDStrip
	c     *Controller
	pub   *recPub
}

func newRig(t *testing.T, count int) *rig {
	t.Helper()
	r := &rig{clk: clock.NewFake(t0), strip: sim.NewLEDStrip(), pub: &recPub{}}
	c, err := New(Options{Clock: r.clk, Strip: r.strip, Count: count, GPIO: 5, Publisher: r.pub, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// advance moves the fake clock and waits (on the controller's frame
// notifications, never on a timer) until the frame for the new time is on
// the strip, or the picture is still.
func (r *rig) advance(t *testing.T, d time.Duration) {
	t.Helper()
	r.clk.Advance(d)
	now := r.clk.Now()
	deadline := time.After(5 * time.Second)
	for {
		r.c.mu.Lock()
		ok := !r.c.active || !r.c.rendered.Before(now)
		ch := r.c.notify
		r.c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no frame rendered for %v", now.Sub(t0))
		}
	}
}

func (r *rig) patch(t *testing.T, p boardapi.LEDPatch) State {
	t.Helper()
	st, err := r.c.Patch(p)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ptr[T any](v T) *T { return &v }

var (
	black = color.RGBA{0, 0, 0, 0xff}
	red   = color.RGBA{0xff, 0, 0, 0xff}
)

func repeat(c color.RGBA, n int) []color.RGBA {
	out := make([]color.RGBA, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func TestStartsOff(t *testing.T) {
	r := newRig(t, 4)
	want := State{Mode: "off", Colour: "#ffffff", Brightness: DefaultBrightness, Count: 4, GPIO: 5}
	if diff := cmp.Diff(r.c.State(), want); diff != "" {
		t.Errorf("state (-got +want)\n%s", diff)
	}
	if diff := cmp.Diff(r.strip.Pixels(), repeat(black, 4)); diff != "" {
		t.Errorf("pixels (-got +want)\n%s", diff)
	}
	if r.strip.Count() != 4 || r.strip.GPIO() != 5 {
		t.Errorf("strip configured %d/%d", r.strip.Count(), r.strip.GPIO())
	}
}

func TestSolidAndBrightness(t *testing.T) {
	r := newRig(t, 3)
	r.patch(t, boardapi.LEDPatch{Mode: ptr("solid"), Colour: ptr("200,100,50"), Brightness: ptr(100)})
	for range 3 {
		if diff := cmp.Diff(r.strip.Pixels(), repeat(color.RGBA{200, 100, 50, 0xff}, 3)); diff != "" {
			t.Fatalf("solid (-got +want)\n%s", diff)
		}
		r.advance(t, time.Second)
	}
	r.patch(t, boardapi.LEDPatch{Brightness: ptr(50)})
	if diff := cmp.Diff(r.strip.Pixels(), repeat(color.RGBA{100, 50, 25, 0xff}, 3)); diff != "" {
		t.Errorf("half brightness (-got +want)\n%s", diff)
	}
	frames := r.strip.Frames()
	r.advance(t, time.Second)
	if r.strip.Frames() != frames {
		t.Errorf("a still picture was written again: %d frames, want %d", r.strip.Frames(), frames)
	}
	st := r.c.Off()
	if st.Mode != "off" || st.Colour != "#c86432" || st.Brightness != 50 {
		t.Errorf("Off state = %+v", st)
	}
	if diff := cmp.Diff(r.strip.Pixels(), repeat(black, 3)); diff != "" {
		t.Errorf("off (-got +want)\n%s", diff)
	}
}

func lit(px []color.RGBA) (n int) {
	for _, p := range px {
		if p != black {
			n++
		}
	}
	return n
}

func TestWipe(t *testing.T) {
	r := newRig(t, 5)
	r.patch(t, boardapi.LEDPatch{Mode: ptr("wipe"), Colour: ptr("red"), Brightness: ptr(100)})
	// One more LED per 20 ms frame, from the first; then it stays full.
	for i, want := range []int{1, 2, 3, 4, 5, 5, 5} {
		px := r.strip.Pixels()
		if lit(px) != want {
			t.Fatalf("frame %d: %d lit, want %d (%v)", i, lit(px), want, px)
		}
		for k := range want {
			if px[k] != red {
				t.Fatalf("frame %d: LED %d = %v, want red", i, k, px[k])
			}
		}
		r.advance(t, WipeStep)
	}
	r.c.mu.Lock()
	active := r.c.active
	r.c.mu.Unlock()
	if active {
		t.Error("frame timer still runs after a wipe without loop ended")
	}
}

func TestWipeLoop(t *testing.T) {
	r := newRig(t, 3)
	r.patch(t, boardapi.LEDPatch{Mode: ptr("wipe"), Colour: ptr("#ff0000"), Loop: ptr(true), Brightness: ptr(100)})
	// Fill 1,2,3 then clear from the first LED, then fill again.
	want := []string{"R..", "RR.", "RRR", ".RR", "..R", "...", "R..", "RR."}
	for i, w := range want {
		var got strings.Builder
		for _, p := range r.strip.Pixels() {
			if p == red {
				got.WriteByte('R')
			} else {
				got.WriteByte('.')
			}
		}
		if got.String() != w {
			t.Fatalf("frame %d: %s, want %s", i, got.String(), w)
		}
		r.advance(t, WipeStep)
	}
}

func TestRainbow(t *testing.T) {
	r := newRig(t, 6)
	r.patch(t, boardapi.LEDPatch{Mode: ptr("rainbow"), Brightness: ptr(100)})
	first := r.strip.Pixels()
	// Hues spread along the strip: LED 0 red, LED 2 green-ish, LED 4 blue-ish.
	want := []color.RGBA{{255, 0, 0, 255}, {255, 255, 0, 255}, {0, 255, 0, 255}, {0, 255, 255, 255}, {0, 0, 255, 255}, {255, 0, 255, 255}}
	if diff := cmp.Diff(first, want); diff != "" {
		t.Fatalf("rainbow at 0 (-got +want)\n%s", diff)
	}
	// A sixth of a turn later every LED shows its neighbour's hue.
	for range RainbowPeriod / 6 / FrameInterval {
		r.advance(t, FrameInterval)
	}
	moved := r.strip.Pixels()
	if diff := cmp.Diff(moved, append(want[1:], want[0])); diff != "" {
		t.Errorf("rainbow at 1/6 turn (-got +want)\n%s", diff)
	}
	// Without loop it stops after one turn, back where it began.
	r.advance(t, RainbowPeriod)
	if diff := cmp.Diff(r.strip.Pixels(), want); diff != "" {
		t.Errorf("rainbow after a turn (-got +want)\n%s", diff)
	}
	frames := r.strip.Frames()
	r.advance(t, time.Second)
	if r.strip.Frames() != frames {
		t.Error("rainbow without loop still animates after one turn")
	}
	// With loop it keeps turning.
	r.patch(t, boardapi.LEDPatch{Loop: ptr(true)})
	r.advance(t, RainbowPeriod+RainbowPeriod/6)
	if diff := cmp.Diff(r.strip.Pixels(), append(want[1:], want[0])); diff != "" {
		t.Errorf("looping rainbow after 7/6 turn (-got +want)\n%s", diff)
	}
}

func TestFlicker(t *testing.T) {
	r := newRig(t, 8)
	base := color.RGBA{200, 100, 40, 255}
	r.patch(t, boardapi.LEDPatch{Mode: ptr("flicker"), Colour: ptr(boardapi.FormatColour(base)), Brightness: ptr(100)})
	seen := map[color.RGBA]bool{}
	for range 100 {
		for _, p := range r.strip.Pixels() {
			seen[p] = true
			lo := func(v uint8) uint8 { return uint8(float64(v)*FlickerLow/100) - 1 }
			if p.R > base.R || p.G > base.G || p.B > base.B || p.R < lo(base.R) || p.G < lo(base.G) || p.B < lo(base.B) {
				t.Fatalf("flicker pixel %v outside %d%%-100%% of %v", p, FlickerLow, base)
			}
		}
		r.advance(t, FrameInterval)
	}
	if len(seen) < 50 {
		t.Errorf("flicker showed only %d distinct colours in 2 s", len(seen))
	}
	// Reproducible: the same seed and times give the same frames.
	r2 := newRig(t, 8)
	r2.patch(t, boardapi.LEDPatch{Mode: ptr("flicker"), Colour: ptr(boardapi.FormatColour(base)), Brightness: ptr(100)})
	r.patch(t, boardapi.LEDPatch{Mode: ptr("solid")})
	r.patch(t, boardapi.LEDPatch{Mode: ptr("flicker")})
	for range 5 {
		if diff := cmp.Diff(r.strip.Pixels(), r2.strip.Pixels()); diff != "" {
			t.Fatalf("flicker not reproducible (-got +want)\n%s", diff)
		}
		r.advance(t, FrameInterval)
		r2.advance(t, FrameInterval)
	}
}

func TestPublishAndSnapshot(t *testing.T) {
	r := newRig(t, 2)
	r.patch(t, boardapi.LEDPatch{Mode: ptr("wipe"), Colour: ptr("blue"), Loop: ptr(true)})
	r.patch(t, boardapi.LEDPatch{Mode: ptr("wipe")}) // no change: not published
	snap := r.c.Snapshot()
	r.patch(t, boardapi.LEDPatch{Mode: ptr("solid"), Colour: ptr("red"), Loop: ptr(false), Brightness: ptr(80)})
	if err := r.c.Restore(snap); err != nil {
		t.Fatal(err)
	}
	want := []State{
		{Mode: "wipe", Colour: "#0000ff", Loop: true, Brightness: 30, Count: 2, GPIO: 5},
		{Mode: "solid", Colour: "#ff0000", Brightness: 80, Count: 2, GPIO: 5},
		{Mode: "wipe", Colour: "#0000ff", Loop: true, Brightness: 30, Count: 2, GPIO: 5},
	}
	if diff := cmp.Diff(r.pub.all(), want); diff != "" {
		t.Errorf("published (-got +want)\n%s", diff)
	}
	// The restored wipe starts again from the first LED.
	if got := lit(r.strip.Pixels()); got != 1 {
		t.Errorf("restored wipe shows %d LEDs lit, want 1", got)
	}
}

func TestPatchErrors(t *testing.T) {
	r := newRig(t, 2)
	before := r.c.State()
	for _, tc := range []struct {
		p    boardapi.LEDPatch
		want error
	}{
		{boardapi.LEDPatch{Mode: ptr("strobe")}, boardapi.ErrLEDMode},
		{boardapi.LEDPatch{Mode: ptr("Solid")}, boardapi.ErrLEDMode},
		{boardapi.LEDPatch{Colour: ptr("#12345")}, boardapi.ErrColour},
		{boardapi.LEDPatch{Brightness: ptr(0)}, boardapi.ErrBrightness},
		{boardapi.LEDPatch{Brightness: ptr(101)}, boardapi.ErrBrightness},
		{boardapi.LEDPatch{Mode: ptr("solid"), Brightness: ptr(-5)}, boardapi.ErrBrightness},
	} {
		_, err := r.c.Patch(tc.p)
		if !errors.Is(err, tc.want) || !errors.Is(err, api.ErrBadRequest) {
			t.Errorf("Patch(%+v): err = %v, want %v and bad_request", tc.p, err, tc.want)
		}
	}
	if diff := cmp.Diff(r.c.State(), before); diff != "" {
		t.Errorf("state changed by failed patches (-got +want)\n%s", diff)
	}
}

func TestNewErrors(t *testing.T) {
	clk := clock.NewFake(t0)
	for _, o := range []Options{
		{Clock: clk},
		{Strip: sim.NewLEDStrip()},
		{Clock: clk, Strip: sim.NewLEDStrip(), Count: -1},
		{Clock: clk, Strip: sim.NewLEDStrip(), Count: MaxCount + 1},
		{Clock: clk, Strip: sim.NewLEDStrip(), Count: 3, GPIO: 99},
		{Clock: clk, Strip: sim.NewLEDStrip(), Count: 3, Brightness: 101},
	} {
		if _, err := New(o); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): err = %v, want ErrConfig", o, err)
		}
	}
	c, err := New(Options{Clock: clk, Strip: sim.NewLEDStrip(), Count: 3, Brightness: 20})
	if err != nil || c.State().Brightness != 20 {
		t.Fatalf("saved brightness not applied: %v %+v", err, c)
	}
}

func TestHTTP(t *testing.T) {
	r := newRig(t, 2)
	mux := http.NewServeMux()
	for _, rt := range r.c.Routes() {
		if !rt.Link {
			t.Errorf("%s %s not served over the link", rt.Method, rt.Path)
		}
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
	}
	do := func(method, body string) (int, map[string]any) {
		req := httptest.NewRequest(method, "/leds", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %q: reply %q: %v", method, body, rec.Body, err)
		}
		return rec.Code, m
	}
	code, m := do("PATCH", `{"mode":"solid","colour":"Orange","loop":true,"brightness":25}`)
	want := map[string]any{"mode": "solid", "colour": "#ff8000", "loop": true, "brightness": 25.0, "count": 2.0, "gpio": 5.0}
	if code != 200 {
		t.Fatalf("PATCH: %d %v", code, m)
	}
	if diff := cmp.Diff(m, want); diff != "" {
		t.Errorf("PATCH reply (-got +want)\n%s", diff)
	}
	if code, m := do("GET", ""); code != 200 || cmp.Diff(m, want) != "" {
		t.Errorf("GET: %d %v", code, m)
	}
	before := r.c.State()
	for _, tc := range []struct {
		body string
		code string
	}{
		{``, "bad_json"},
		{`{`, "bad_json"},
		{`[]`, "bad_request"},
		{`{"mode":1}`, "bad_request"},
		{`{"mode":"disco"}`, "bad_request"},
		{`{"colour":"#ff"}`, "bad_request"},
		{`{"colour":"300,0,0"}`, "bad_request"},
		{`{"colour":7}`, "bad_request"},
		{`{"loop":"yes"}`, "bad_request"},
		{`{"brightness":"50"}`, "bad_request"},
		{`{"brightness":50.5}`, "bad_request"},
		{`{"brightness":0}`, "bad_request"},
		{`{"brightness":101}`, "bad_request"},
		{`{"color":"red"}`, "bad_request"},
		{`{"count":10}`, "bad_request"},
		{`{"mode":"solid","brightness":200}`, "bad_request"},
		{`{"mode":"off"} {}`, "bad_json"},
	} {
		code, m := do("PATCH", tc.body)
		if code != 400 || m["error"] != tc.code || m["message"] == "" {
			t.Errorf("PATCH %s: %d %v, want 400 %s", tc.body, code, m, tc.code)
		}
	}
	if diff := cmp.Diff(r.c.State(), before); diff != "" {
		t.Errorf("state changed by bad requests (-got +want)\n%s", diff)
	}
}

// TestNativeModeRefused: an unknown native mode number reaches the
// controller as a name Patch refuses with ErrLEDMode.
func TestNativeModeRefused(t *testing.T) {
	r := newRig(t, 1)
	p, _ := boardapi.LEDPatchFromNative([]byte{0x09, 0, 0, 0, 0, 0})
	if _, err := r.c.Patch(p); !errors.Is(err, boardapi.ErrLEDMode) {
		t.Errorf("mode 9: %v, want boardapi.ErrLEDMode", err)
	}
}

func BenchmarkRainbowFrame(b *testing.B) {
	px := make([]color.RGBA, 300)
	l := look{mode: boardapi.LEDModeRainbow, loop: true, brightness: 30}
	b.ReportAllocs()
	var e time.Duration
	for b.Loop() {
		l.render(px, e, 1)
		e += FrameInterval
	}
}

func BenchmarkFlickerFrame(b *testing.B) {
	px := make([]color.RGBA, 300)
	l := look{mode: boardapi.LEDModeFlicker, colour: red, brightness: 30}
	b.ReportAllocs()
	var e time.Duration
	for b.Loop() {
		l.render(px, e, 1)
		e += FrameInterval
	}
}

// TestEveryModeScalesByBrightness guards against a mode writing its
// colours unscaled (a wipe without loop once returned before scaling).
func TestEveryModeScalesByBrightness(t *testing.T) {
	for _, mode := range []string{"solid", "wipe", "flicker"} {
		for _, loop := range []bool{false, true} {
			r := newRig(t, 4)
			r.patch(t, boardapi.LEDPatch{Mode: ptr(mode), Colour: ptr("#ff0000"), Loop: ptr(loop), Brightness: ptr(50)})
			r.advance(t, time.Second)
			for i, p := range r.strip.Pixels() {
				if p.R > 128 || p.G != 0 || p.B != 0 {
					t.Errorf("%s loop=%v LED %d = %v, want red at most half bright", mode, loop, i, p)
				}
			}
		}
	}
}
