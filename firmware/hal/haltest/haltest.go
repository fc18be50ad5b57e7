// Package haltest is the conformance suite of the hal interfaces: one set
// of tests every implementation passes, run against the simulator
// (hal/sim) and against the Linux HAL on periph.io's fakes (hal/linux), so
// the two cannot drift apart.
//
// A [Rig] is an implementation's devices plus observers that tell what
// the hardware really does, read from outside the driver: for the
// simulator, its own state; for the Linux HAL, the bytes on the fake
// buses decoded back (the panel's memory and backlight pin, the LED
// strip's bit stream, the PCA9685's registers). The suite checks each
// device through its interface and then checks the observers agree, within
// the steps the hardware has (RGB565's 5 and 6 bits a channel, the PCA9685's
// 4.9 µs tick).
package haltest

import (
	"image"
	"image/color"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Rig is one implementation's devices and observers.
type Rig struct {
	Display hal.Display
	Strip   hal.LEDStrip
	Servo   hal.Servo
	// Clock drives the servo's motion.
	Clock *clock.Fake
	// LEDGPIO is a data pin the strip accepts.
	LEDGPIO int

	// Glass is what a person would see on the panel.
	Glass func() *image.RGBA
	// LEDs are the colours the strip's LEDs show.
	LEDs func() ([]color.RGBA, error)
	// Pulse is what the servo's wire carries: the pulse width and whether
	// there are pulses at all.
	Pulse func() (us int, on bool)

	// ColourStep is how far a channel on the glass may be from the colour
	// shown (0 when exact).
	ColourStep int
	// PulseStep is how far the pulse on the wire may be from the one
	// driven, in µs.
	PulseStep int
}

// T0 is the fake clock's start.
var T0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Run runs the suite, one fresh rig per test.
func Run(t *testing.T, newRig func(t *testing.T) Rig) {
	tests := []struct {
		name string
		f    func(t *testing.T, r Rig)
	}{
		{"display/fill", displayFill},
		{"display/show", displayShow},
		{"display/backlight", displayBacklight},
		{"display/power", displayPower},
		{"display/errors", displayErrors},
		{"strip/frames", stripFrames},
		{"strip/errors", stripErrors},
		{"servo/drive", servoDrive},
		{"servo/errors", servoErrors},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, newRig(t)) })
	}
}

func near(a, b uint8, step int) bool {
	d := int(a) - int(b)
	return d <= step && d >= -step
}

func nearColour(a, b color.RGBA, step int) bool {
	return near(a.R, b.R, step) && near(a.G, b.G, step) && near(a.B, b.B, step)
}

// onGlass is the round mask the spec's panel has.
func onGlass(x, y int) bool {
	dx, dy := 2*x+1-hal.ScreenWidth, 2*y+1-hal.ScreenHeight
	return dx*dx+dy*dy <= hal.ScreenWidth*hal.ScreenWidth
}

// checkGlass compares the glass with want (black off the glass) and the
// display's own Snapshot with the glass.
func checkGlass(t *testing.T, r Rig, what string, want func(x, y int) color.RGBA) {
	t.Helper()
	glass, snap := r.Glass(), r.Display.Snapshot()
	for y := range hal.ScreenHeight {
		for x := range hal.ScreenWidth {
			w := color.RGBA{A: 0xFF}
			if onGlass(x, y) {
				w = want(x, y)
			}
			if g := glass.RGBAAt(x, y); !nearColour(g, w, r.ColourStep) {
				t.Fatalf("%s: glass at (%d,%d) = %v, want %v (±%d)", what, x, y, g, w, r.ColourStep)
			}
			if s, g := snap.RGBAAt(x, y), glass.RGBAAt(x, y); s != g {
				t.Fatalf("%s: Snapshot at (%d,%d) = %v, the glass shows %v", what, x, y, s, g)
			}
		}
	}
}

func uniform(c color.RGBA) func(x, y int) color.RGBA { return func(int, int) color.RGBA { return c } }

func displayFill(t *testing.T, r Rig) {
	checkGlass(t, r, "at start", uniform(color.RGBA{A: 0xFF}))
	for _, c := range []color.RGBA{{200, 100, 50, 255}, {255, 255, 255, 255}, {0, 0, 255, 255}} {
		if err := r.Display.Fill(c); err != nil {
			t.Fatal(err)
		}
		checkGlass(t, r, "fill", uniform(c))
	}
}

func picture(seed int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, hal.ScreenWidth, hal.ScreenHeight))
	for y := range hal.ScreenHeight {
		for x := range hal.ScreenWidth {
			img.SetRGBA(x, y, color.RGBA{uint8(x + seed), uint8(y * seed), uint8((x ^ y) + seed), 255})
		}
	}
	return img
}

func displayShow(t *testing.T, r Rig) {
	for _, seed := range []int{1, 2, 3} {
		img := picture(seed)
		if err := r.Display.Show(img); err != nil {
			t.Fatal(err)
		}
		checkGlass(t, r, "picture", img.RGBAAt)
	}
	// A picture whose origin is not (0,0) shows the same.
	img := picture(5)
	moved := image.NewRGBA(image.Rect(10, 20, 10+hal.ScreenWidth, 20+hal.ScreenHeight))
	copy(moved.Pix, img.Pix)
	if err := r.Display.Show(moved); err != nil {
		t.Fatal(err)
	}
	checkGlass(t, r, "moved origin", img.RGBAAt)
}

func scale(c color.RGBA, pct int) color.RGBA {
	f := func(v uint8) uint8 { return uint8((int(v)*pct + 50) / 100) }
	return color.RGBA{f(c.R), f(c.G), f(c.B), 255}
}

func displayBacklight(t *testing.T, r Rig) {
	c := color.RGBA{200, 160, 80, 255}
	if err := r.Display.Fill(c); err != nil {
		t.Fatal(err)
	}
	for _, pct := range []int{50, 10, 0, 100} {
		if err := r.Display.SetBacklight(pct); err != nil {
			t.Fatal(err)
		}
		checkGlass(t, r, "backlight", uniform(scale(c, pct)))
	}
}

func displayPower(t *testing.T, r Rig) {
	c := color.RGBA{10, 200, 30, 255}
	if err := r.Display.Fill(c); err != nil {
		t.Fatal(err)
	}
	if err := r.Display.SetPower(false); err != nil {
		t.Fatal(err)
	}
	checkGlass(t, r, "asleep", uniform(color.RGBA{A: 255}))
	// What is shown while asleep appears on waking.
	img := picture(7)
	if err := r.Display.Show(img); err != nil {
		t.Fatal(err)
	}
	checkGlass(t, r, "shown while asleep", uniform(color.RGBA{A: 255}))
	if err := r.Display.SetPower(true); err != nil {
		t.Fatal(err)
	}
	checkGlass(t, r, "awake", img.RGBAAt)
}

func displayErrors(t *testing.T, r Rig) {
	if err := r.Display.Fill(color.RGBA{1, 2, 3, 255}); err != nil {
		t.Fatal(err)
	}
	for _, img := range []*image.RGBA{nil, image.NewRGBA(image.Rect(0, 0, 10, 10)), image.NewRGBA(image.Rect(0, 0, 240, 241))} {
		if err := r.Display.Show(img); err == nil {
			t.Errorf("Show of a %v picture: no error", img)
		}
	}
	for _, p := range []int{-1, 101} {
		if err := r.Display.SetBacklight(p); err == nil {
			t.Errorf("SetBacklight(%d): no error", p)
		}
	}
	checkGlass(t, r, "after refused calls", uniform(color.RGBA{1, 2, 3, 255}))
}

var colours = []color.RGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}, {12, 34, 56, 255}, {255, 255, 255, 255}}

func checkLEDs(t *testing.T, r Rig, want []color.RGBA) {
	t.Helper()
	got, err := r.LEDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d LEDs show, want %d", len(got), len(want))
	}
	for i := range got {
		if g, w := got[i], want[i]; g.R != w.R || g.G != w.G || g.B != w.B {
			t.Fatalf("LED %d shows %v, want %v", i, g, w)
		}
	}
}

func stripFrames(t *testing.T, r Rig) {
	if err := r.Strip.Configure(len(colours), r.LEDGPIO); err != nil {
		t.Fatal(err)
	}
	checkLEDs(t, r, make([]color.RGBA, len(colours)))
	if err := r.Strip.Write(colours); err != nil {
		t.Fatal(err)
	}
	checkLEDs(t, r, colours)
	rev := make([]color.RGBA, len(colours))
	for i, c := range colours {
		rev[len(colours)-1-i] = c
	}
	if err := r.Strip.Write(rev); err != nil {
		t.Fatal(err)
	}
	checkLEDs(t, r, rev)
	// A new count starts dark.
	if err := r.Strip.Configure(2, r.LEDGPIO); err != nil {
		t.Fatal(err)
	}
	checkLEDs(t, r, make([]color.RGBA, 2))
}

func stripErrors(t *testing.T, r Rig) {
	if err := r.Strip.Configure(3, r.LEDGPIO); err != nil {
		t.Fatal(err)
	}
	if err := r.Strip.Write(colours[:3]); err != nil {
		t.Fatal(err)
	}
	for _, px := range [][]color.RGBA{colours[:2], colours, nil} {
		if err := r.Strip.Write(px); err == nil {
			t.Errorf("frame of %d on a strip of 3: no error", len(px))
		}
	}
	checkLEDs(t, r, colours[:3])
	if err := r.Strip.Configure(-1, r.LEDGPIO); err == nil {
		t.Error("Configure(-1): no error")
	}
}

func checkPulse(t *testing.T, r Rig, want int, on bool) {
	t.Helper()
	us, gotOn := r.Pulse()
	if gotOn != on || (on && (us-want > r.PulseStep || want-us > r.PulseStep)) {
		t.Fatalf("wire carries %d µs (pulsing %v), want %d (±%d, pulsing %v)", us, gotOn, want, r.PulseStep, on)
	}
}

func servoDrive(t *testing.T, r Rig) {
	if us, driven := r.Servo.Position(); us != 1500 || driven {
		t.Errorf("at start: %d driven %v, want 1500 limp", us, driven)
	}
	if _, on := r.Pulse(); on {
		t.Error("pulses at start")
	}
	if err := r.Servo.Drive(2100); err != nil {
		t.Fatal(err)
	}
	checkPulse(t, r, 2100, true)
	// The horn travels at the modelled speed: 1000 µs in 300 ms.
	r.Clock.Advance(90 * time.Millisecond)
	if us, driven := r.Servo.Position(); us != 1800 || !driven {
		t.Errorf("90 ms after Drive(2100) from 1500: %d driven %v, want 1800 driven", us, driven)
	}
	r.Clock.Advance(time.Second)
	if us, _ := r.Servo.Position(); us != 2100 {
		t.Errorf("settled at %d, want 2100", us)
	}
	if err := r.Servo.Drive(900); err != nil {
		t.Fatal(err)
	}
	checkPulse(t, r, 900, true)
	r.Clock.Advance(150 * time.Millisecond)
	if err := r.Servo.Release(); err != nil {
		t.Fatal(err)
	}
	checkPulse(t, r, 0, false)
	r.Clock.Advance(time.Second)
	if us, driven := r.Servo.Position(); us != 1600 || driven {
		t.Errorf("released on the way: %d driven %v, want 1600 limp", us, driven)
	}
}

func servoErrors(t *testing.T, r Rig) {
	if err := r.Servo.Drive(1200); err != nil {
		t.Fatal(err)
	}
	for _, us := range []int{0, 499, 2501, -1500} {
		if err := r.Servo.Drive(us); err == nil {
			t.Errorf("Drive(%d): no error", us)
		}
	}
	checkPulse(t, r, 1200, true)
}
