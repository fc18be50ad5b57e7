package linux_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/hal/linux"
	"github.com/holofleet/holofleet/firmware/hal/linux/linuxtest"
	"github.com/holofleet/holofleet/firmware/hal/sim"
)

// target is a whole board (every firmware feature, over HTTP) on one HAL,
// with observers of what its parts do.
type target struct {
	hw          *board.Hardware
	noI2C       string
	glass       func() *image.RGBA
	leds        func() ([]color.RGBA, error)
	pan         func() (int, bool)
	colourStep  int
	pulseStep   int
	refusesI2C  bool
	description string
}

func simTarget(*testing.T) target {
	hw := board.SimHardware(clock.Real)
	d, s, p := hw.Display.(*sim.Display), hw.Strip.(*sim.LEDStrip), hw.Pan.(*sim.Servo)
	return target{hw: hw, glass: d.Snapshot, leds: func() ([]color.RGBA, error) { return s.Pixels(), nil },
		pan: func() (int, bool) { _, on := p.Position(); return p.Target(), on }, description: "sim"}
}

func linuxTarget(t *testing.T) target {
	h := linuxtest.New()
	d := open(t, h, clock.Real)
	return target{
		hw:    &board.Hardware{Display: d.Display, Touch: d.Touch, Strip: d.Strip, Pan: d.Pan, Tilt: d.Tilt, LEDGPIO: d.LEDGPIO, Attn: d.Attn},
		noI2C: "no target mode", glass: h.Glass, leds: h.LEDColours,
		pan:        func() (int, bool) { return h.Pulse(linuxtest.PanCh) },
		colourStep: 8, pulseStep: 3, refusesI2C: true, description: "linux",
	}
}

// TestFeaturesOnBothHALs runs the same requests on a whole board over the
// simulator and over the Linux HAL on periph's fakes, and checks what the
// parts do through the same observers.
func TestFeaturesOnBothHALs(t *testing.T) {
	for _, mk := range []func(*testing.T) target{simTarget, linuxTarget} {
		tg := mk(t)
		t.Run(tg.description, func(t *testing.T) {
			b := boardtest.StartInProcess(t, boardtest.InProcOptions{Hardware: tg.hw, NoI2CTarget: tg.noI2C})
			do := func(method, path, body string, want int) {
				t.Helper()
				req, _ := http.NewRequest(method, b.URL+"/api/v1"+path, bytes.NewReader([]byte(body)))
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				rb, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, rb, want)
				}
			}
			eventually := func(what string, ok func() (bool, string)) {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for {
					good, got := ok()
					if good {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: %s", what, got)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			centre := func(want color.RGBA) func() (bool, string) {
				return func() (bool, string) {
					g := tg.glass()
					c, corner := g.RGBAAt(120, 120), g.RGBAAt(2, 2)
					return nearColour(c, want, tg.colourStep) && corner == (color.RGBA{A: 255}),
						fmt.Sprintf("centre %v corner %v, want %v and black", c, corner, want)
				}
			}

			do("PATCH", "/screen", `{"backlight":100}`, 200)
			do("POST", "/screen/show", `{"colour":"#ff8000"}`, 200)
			eventually("colour on the glass", centre(color.RGBA{255, 128, 0, 255}))
			do("PATCH", "/screen", `{"backlight":50}`, 200)
			eventually("half backlight", centre(color.RGBA{128, 64, 0, 255}))
			do("DELETE", "/screen", "", 200)
			eventually("screen off", centre(color.RGBA{A: 255}))

			do("PATCH", "/leds", `{"mode":"solid","colour":"#00ff40","brightness":20}`, 200)
			eventually("strip solid", func() (bool, string) {
				px, err := tg.leds()
				if err != nil || len(px) != 24 {
					return false, fmt.Sprintf("%d LEDs, %v", len(px), err)
				}
				for _, c := range px {
					if c.R != 0 || c.G == 0 || c.G != px[0].G || c.G > 255*20/100+1 || c.B == 0 {
						return false, fmt.Sprintf("LEDs %v", px)
					}
				}
				return true, ""
			})

			do("POST", "/servos/move", `{"id":"pan","us":1800}`, 200)
			eventually("pan pulse", func() (bool, string) {
				us, on := tg.pan()
				return on && us >= 1800-tg.pulseStep && us <= 1800+tg.pulseStep, fmt.Sprintf("%d µs on %v", us, on)
			})
			do("POST", "/servos/release", `{"id":"all"}`, 200)
			eventually("pan limp", func() (bool, string) { _, on := tg.pan(); return !on, "still pulsing" })

			want := 200
			if tg.refusesI2C {
				want = 400
			}
			do("PATCH", "/link", `{"mode":"i2c","address":66}`, want)
		})
	}
}

func nearColour(a, b color.RGBA, step int) bool {
	n := func(x, y uint8) bool { d := int(x) - int(y); return d <= step && d >= -step }
	return n(a.R, b.R) && n(a.G, b.G) && n(a.B, b.B)
}

// TestLinkI2CFeature: /info lists the extension link-i2c (in extensions,
// beside the feature link) only on a board that can be an I2C target (a
// simulated board on a simulated bus), never on the Linux HAL, which
// cannot.
func TestLinkI2CFeature(t *testing.T) {
	features := func(o boardtest.InProcOptions) (features, extensions []string) {
		b := boardtest.StartInProcess(t, o)
		defer b.Stop()
		resp, err := http.Get(b.URL + "/api/v1/info")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var info struct{ Features, Extensions []string }
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
			t.Fatal(err)
		}
		return info.Features, info.Extensions
	}
	lt := linuxTarget(t)
	for _, tc := range []struct {
		name string
		o    boardtest.InProcOptions
		want bool
	}{
		{"sim on an I2C bus", boardtest.InProcOptions{I2C: i2creg.NewBus()}, true},
		{"sim without a bus", boardtest.InProcOptions{}, false},
		{"linux", boardtest.InProcOptions{Hardware: lt.hw, NoI2CTarget: lt.noI2C}, false},
	} {
		f, e := features(tc.o)
		if slices.Contains(e, "link-i2c") != tc.want || !slices.Contains(f, "link") || slices.Contains(f, "link-i2c") {
			t.Errorf("%s: features %v, extensions %v, want link in features and link-i2c %v in extensions", tc.name, f, e, tc.want)
		}
	}
}

// TestNoSimEndpointsOnRealBoards: a board on the Linux HAL that leaves
// every part out runs them on simulated stand-ins, but never serves the
// simulator's endpoints (a power cut, a BOOT press or touches for anyone
// on the network); the simulator's own board does.
func TestNoSimEndpointsOnRealBoards(t *testing.T) {
	d, err := linux.Open(linux.Description{}, linuxtest.New(), linux.Options{Sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	bare := &board.Hardware{Display: d.Display, Touch: d.Touch, Strip: d.Strip, Pan: d.Pan, Tilt: d.Tilt, LEDGPIO: d.LEDGPIO}
	for _, tc := range []struct {
		name string
		hw   *board.Hardware
		want int
	}{
		{"sim", board.SimHardware(clock.Real), http.StatusNoContent},
		{"linux, every part a stand-in", bare, http.StatusNotFound},
	} {
		b := boardtest.StartInProcess(t, boardtest.InProcOptions{Hardware: tc.hw, NoI2CTarget: "no target mode"})
		for _, p := range []string{"/sim/boot", "/sim/power", "/sim/touch", "/sim/screen.png", "/sim/leds"} {
			method := http.MethodPost
			if p == "/sim/screen.png" || p == "/sim/leds" {
				method = http.MethodGet
			}
			body := ""
			if p == "/sim/touch" {
				body = `{"action":"tap","x":120,"y":120}`
			}
			req, _ := http.NewRequest(method, b.URL+"/api/v1"+p, bytes.NewReader([]byte(body)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tc.want == http.StatusNotFound && resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s: %s %s answered %d, want 404", tc.name, method, p, resp.StatusCode)
			}
			if tc.want != http.StatusNotFound && p == "/sim/leds" && resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %s %s answered %d, want 200", tc.name, method, p, resp.StatusCode)
			}
		}
		b.Stop()
	}
}
