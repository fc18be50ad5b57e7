package sim

import (
	"errors"
	"image"
	"image/color"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/hal/haltest"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDisplaySnapshot(t *testing.T) {
	d := NewDisplay()
	if err := d.Fill(color.RGBA{200, 100, 50, 255}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		power     bool
		backlight int
		x, y      int
		want      color.RGBA
	}{
		{"centre full", true, 100, 120, 120, color.RGBA{200, 100, 50, 255}},
		{"corner masked", true, 100, 0, 0, color.RGBA{0, 0, 0, 255}},
		{"edge top middle", true, 100, 120, 0, color.RGBA{200, 100, 50, 255}},
		{"just outside the diagonal", true, 100, 34, 34, color.RGBA{0, 0, 0, 255}},
		{"just inside the diagonal", true, 100, 35, 35, color.RGBA{200, 100, 50, 255}},
		{"half backlight", true, 50, 120, 120, color.RGBA{100, 50, 25, 255}},
		{"backlight 0", true, 0, 120, 120, color.RGBA{0, 0, 0, 255}},
		{"asleep", false, 100, 120, 120, color.RGBA{0, 0, 0, 255}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.SetPower(tc.power); err != nil {
				t.Fatal(err)
			}
			if err := d.SetBacklight(tc.backlight); err != nil {
				t.Fatal(err)
			}
			got := d.Snapshot().RGBAAt(tc.x, tc.y)
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("pixel (%d,%d) (-got +want)\n%s", tc.x, tc.y, diff)
			}
		})
	}
}

func TestDisplayMaskSymmetric(t *testing.T) {
	n := 0
	for y := range hal.ScreenHeight {
		for x := range hal.ScreenWidth {
			v := Visible(x, y)
			if v != Visible(hal.ScreenWidth-1-x, y) || v != Visible(x, hal.ScreenHeight-1-y) || v != Visible(y, x) {
				t.Fatalf("mask not symmetric at (%d,%d)", x, y)
			}
			if v {
				n++
			}
		}
	}
	// About pi*120^2 = 45239 pixels are on the glass.
	if n < 45000 || n > 45500 {
		t.Errorf("visible pixels = %d, want about 45239", n)
	}
}

func TestDisplayShowAndErrors(t *testing.T) {
	d := NewDisplay()
	img := image.NewRGBA(image.Rect(0, 0, 240, 240))
	img.SetRGBA(120, 60, color.RGBA{1, 2, 3, 255})
	if err := d.Show(img); err != nil {
		t.Fatal(err)
	}
	if got := d.Snapshot().RGBAAt(120, 60); got != (color.RGBA{1, 2, 3, 255}) {
		t.Errorf("shown pixel = %v", got)
	}
	if err := d.Show(image.NewRGBA(image.Rect(0, 0, 10, 10))); !errors.Is(err, ErrSize) {
		t.Errorf("small image: err = %v, want ErrSize", err)
	}
	if err := d.Show(nil); !errors.Is(err, ErrSize) {
		t.Errorf("nil image: err = %v, want ErrSize", err)
	}
	for _, p := range []int{-1, 101} {
		if err := d.SetBacklight(p); !errors.Is(err, ErrRange) {
			t.Errorf("backlight %d: err = %v, want ErrRange", p, err)
		}
	}
	if d.Shown() != 1 {
		t.Errorf("Shown = %d, want 1", d.Shown())
	}
}

func TestDisplayTouch(t *testing.T) {
	d := NewDisplay()
	d.Touch(true, 10, 300)
	d.Touch(false, -5, 20)
	want := []hal.TouchEvent{{Down: true, X: 10, Y: 239}, {Down: false, X: 0, Y: 20}}
	var got []hal.TouchEvent
	for range 2 {
		got = append(got, <-d.Events())
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("touches (-got +want)\n%s", diff)
	}
	for range TouchBuffer + 3 {
		d.Touch(true, 1, 1) // never blocks
	}
	if d.Dropped() != 3 {
		t.Errorf("Dropped = %d, want 3", d.Dropped())
	}
}

func TestLEDStrip(t *testing.T) {
	s := NewLEDStrip()
	if err := s.Configure(3, 18); err != nil {
		t.Fatal(err)
	}
	px := []color.RGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}}
	if err := s.Write(px); err != nil {
		t.Fatal(err)
	}
	px[0] = color.RGBA{} // the strip keeps its own copy
	got := s.Pixels()
	if diff := cmp.Diff(got[0], color.RGBA{255, 0, 0, 255}); diff != "" {
		t.Errorf("pixel 0 (-got +want)\n%s", diff)
	}
	got[1] = color.RGBA{} // and hands out copies
	if s.Pixels()[1] != (color.RGBA{0, 255, 0, 255}) {
		t.Error("Pixels returned the strip's own slice")
	}
	if err := s.Write(px[:2]); !errors.Is(err, ErrSize) {
		t.Errorf("short frame: err = %v, want ErrSize", err)
	}
	if s.Frames() != 1 || s.Count() != 3 || s.GPIO() != 18 {
		t.Errorf("frames/count/gpio = %d/%d/%d", s.Frames(), s.Count(), s.GPIO())
	}
	for _, c := range [][2]int{{-1, 1}, {MaxLEDs + 1, 1}, {1, -1}, {1, MaxGPIO + 1}} {
		if err := s.Configure(c[0], c[1]); !errors.Is(err, ErrRange) {
			t.Errorf("Configure(%d,%d): err = %v, want ErrRange", c[0], c[1], err)
		}
	}
}

func TestServoMotion(t *testing.T) {
	clk := clock.NewFake(t0)
	s := NewServo(clk)
	if us, driven := s.Position(); us != ServoRest || driven {
		t.Fatalf("start = %d %v", us, driven)
	}
	if err := s.Drive(2500); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		after  time.Duration
		wantUS int
		moving bool
	}{
		{0, 1500, true},
		{150 * time.Millisecond, 2000, true},
		{150 * time.Millisecond, 2500, false},
		{time.Second, 2500, false},
	}
	for i, st := range steps {
		clk.Advance(st.after)
		us, driven := s.Position()
		if us != st.wantUS || !driven || s.Moving() != st.moving {
			t.Errorf("step %d: position %d driven %v moving %v, want %d true %v", i, us, driven, s.Moving(), st.wantUS, st.moving)
		}
	}
	// Turn round mid-way, then release: the horn stays where it is.
	if err := s.Drive(500); err != nil {
		t.Fatal(err)
	}
	clk.Advance(90 * time.Millisecond)
	if us, _ := s.Position(); us != 2200 {
		t.Errorf("after 90 ms back: %d, want 2200", us)
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if us, driven := s.Position(); us != 2200 || driven {
		t.Errorf("released: %d %v, want 2200 false", us, driven)
	}
	if s.Target() != 500 || s.Drives() != 2 {
		t.Errorf("target %d drives %d", s.Target(), s.Drives())
	}
	for _, us := range []int{0, 499, 2501} {
		if err := s.Drive(us); !errors.Is(err, ErrRange) {
			t.Errorf("Drive(%d): err = %v, want ErrRange", us, err)
		}
	}
	if got := TravelTime(-1000); got != ServoSpeedTime {
		t.Errorf("TravelTime(1000) = %v, want %v", got, ServoSpeedTime)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	d := NewDisplay()
	b.ReportAllocs()
	for b.Loop() {
		d.Snapshot()
	}
}

// TestTouchPendingUntilHandled: a touch counts as pending until the
// firmware says it handled it, not merely until it was read: between the
// read and the handling, a change of what touches do (reporting on) must
// not overtake a touch made before it (POST /sim/touch waits on Pending).
func TestTouchPendingUntilHandled(t *testing.T) {
	d := NewDisplay()
	d.Touch(true, 5, 5)
	if got := d.Pending(); got != 1 {
		t.Fatalf("after a touch: Pending %d, want 1", got)
	}
	<-d.Events()
	if got := d.Pending(); got != 1 {
		t.Fatalf("read but not handled: Pending %d, want 1", got)
	}
	d.Handled()
	if got := d.Pending(); got != 0 {
		t.Fatalf("handled: Pending %d, want 0", got)
	}
}

// TestConformance runs the hal conformance suite on the simulator; the
// Linux HAL runs the same suite on periph's fakes.
func TestConformance(t *testing.T) {
	haltest.Run(t, func(t *testing.T) haltest.Rig {
		clk := clock.NewFake(haltest.T0)
		d, strip, servo := NewDisplay(), NewLEDStrip(), NewServo(clk)
		return haltest.Rig{Display: d, Strip: strip, Servo: servo, Clock: clk, LEDGPIO: 18,
			Glass: d.Snapshot,
			LEDs:  func() ([]color.RGBA, error) { return strip.Pixels(), nil },
			Pulse: func() (int, bool) { _, on := servo.Position(); return servo.Target(), on },
		}
	})
}
