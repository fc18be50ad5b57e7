package linux_test

import (
	"context"
	"encoding/json"
	"errors"
	"image/color"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal/haltest"
	"github.com/holofleet/holofleet/firmware/hal/linux"
	"github.com/holofleet/holofleet/firmware/hal/linux/linuxtest"
)

func noSleep(time.Duration) {}

func open(t *testing.T, h *linuxtest.Host, clk clock.Clock) *linux.Devices {
	t.Helper()
	d, err := linux.Open(linuxtest.Description(), h, linux.Options{Clock: clk, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestConformance runs the hal conformance suite (the simulator runs the
// same) on the Linux HAL over periph's fakes, reading back the panel's
// memory and backlight pin, the strip's bit stream and the PCA9685's
// registers.
func TestConformance(t *testing.T) {
	haltest.Run(t, func(t *testing.T) haltest.Rig {
		h := linuxtest.New()
		clk := clock.NewFake(haltest.T0)
		d := open(t, h, clk)
		return haltest.Rig{Display: d.Display, Strip: d.Strip, Servo: d.Pan, Clock: clk, LEDGPIO: d.LEDGPIO,
			Glass:      h.Glass,
			LEDs:       h.LEDColours,
			Pulse:      func() (int, bool) { return h.Pulse(linuxtest.PanCh) },
			ColourStep: 8, // RGB565: 5 bits of red and blue
			PulseStep:  3, // half of the PCA9685's 4.9 µs tick, rounded up
		}
	})
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string // part of the error; "" for none
	}{
		{"example", `{"display":{"spi":"/dev/spidev0.0","dc":"GPIO25","reset":"GPIO27","backlight":"GPIO18"},
			"leds":{"spi":"/dev/spidev1.0","gpio":20},"servos":{"i2c":"/dev/i2c-1","pan":0,"tilt":1},
			"touch":{"i2c":"/dev/i2c-1","interrupt":"GPIO17"},"boot_button":"GPIO21","attn":"GPIO4",
			"link":"serial:///dev/ttyAMA0?baud=115200&rs485=1"}`, ""},
		{"empty is a board of stand-ins", `{}`, ""},
		{"unknown field", `{"display":{"spi":"x","dc":"GPIO1","colour":"red"}}`, `unknown field "colour"`},
		{"no dc", `{"display":{"spi":"/dev/spidev0.0"}}`, "display.dc: a pin is required"},
		{"bad controller", `{"display":{"controller":"ili9341","spi":"a","dc":"GPIO1"}}`, `display.controller "ili9341"`},
		{"too fast", `{"display":{"spi":"a","dc":"GPIO1","hz":80000000}}`, "display.hz 80000000"},
		{"pin twice", `{"display":{"spi":"a","dc":"GPIO1"},"attn":"GPIO1"}`, "attn: pin GPIO1 is display.dc already"},
		{"shared spi", `{"display":{"spi":"a","dc":"GPIO1"},"leds":{"spi":"a"}}`, "a strip needs its own SPI port"},
		{"bad chip", `{"leds":{"spi":"a","chip":"neopixel9"}}`, `leds.chip "neopixel9"`},
		{"channel", `{"servos":{"i2c":"b","pan":16,"tilt":1}}`, "servos.pan channel 16"},
		{"same channel", `{"servos":{"i2c":"b","pan":2,"tilt":2}}`, "pan and tilt are both channel 2"},
		{"pulse range", `{"servos":{"i2c":"b","pan":0,"tilt":1,"min_us":2000,"max_us":1000}}`, "pulse range 2000-1000"},
		{"touch on the servo address", `{"servos":{"i2c":"b","pan":0,"tilt":1,"address":21},"touch":{"i2c":"b"}}`, "touch.address 0x15 is the servo chip's"},
		{"touch controller", `{"touch":{"i2c":"b","controller":"ft6236"}}`, "only cst816s"},
		{"bad link", `{"link":"carrier-pigeon://x"}`, `link "carrier-pigeon://x"`},
		{"two values", `{} {}`, "more than one JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := linux.Parse([]byte(tc.json))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, linux.ErrDescription)):
				t.Fatalf("error %v, want ErrDescription with %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hardware.json")
	if err := os.WriteFile(path, []byte(`{"attn":"GPIO4"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := linux.Load(path)
	if err != nil || d.Attn != "GPIO4" {
		t.Fatalf("Load: %+v %v", d, err)
	}
	if _, err := linux.Load(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, linux.ErrDescription) {
		t.Errorf("missing file: %v", err)
	}
}

// TestMissingParts: every part that does not open is named, with its
// device, in one error; nothing stays open.
func TestMissingParts(t *testing.T) {
	h := linuxtest.New()
	h.Missing[linuxtest.DisplaySPI] = true
	h.Missing[linuxtest.I2CBus] = true
	h.Missing[linuxtest.PinBoot] = true
	_, err := linux.Open(linuxtest.Description(), h, linux.Options{Sleep: noSleep})
	if !errors.Is(err, linux.ErrMissing) {
		t.Fatalf("err %v, want ErrMissing", err)
	}
	for _, want := range []string{"display (/dev/spidev0.0)", "servos (/dev/i2c-1)", "boot_button (GPIO21)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "leds") {
		t.Errorf("error %q names the LEDs, which are there", err)
	}

	// A servo chip that does not answer at its address.
	h = linuxtest.New()
	desc := linuxtest.Description()
	desc.Servos.Address = 0x41
	if _, err := linux.Open(desc, h, linux.Options{Sleep: noSleep}); err == nil || !strings.Contains(err.Error(), "servos (/dev/i2c-1 at 0x41)") {
		t.Errorf("no chip at 0x41: %v", err)
	}
	// A touch controller described but not there.
	desc = linuxtest.Description()
	desc.Touch = &linux.TouchDesc{I2C: linuxtest.I2CBus}
	if _, err := linux.Open(desc, linuxtest.New(), linux.Options{Sleep: noSleep}); err == nil || !strings.Contains(err.Error(), "touch (/dev/i2c-1 at 0x15)") {
		t.Errorf("no touch controller: %v", err)
	}
}

func TestAbsentParts(t *testing.T) {
	d, err := linux.Open(linux.Description{}, linuxtest.New(), linux.Options{Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := strings.Join(d.Absent, ","); got != "display,leds,servos,touch" {
		t.Errorf("absent %q", got)
	}
	if d.Display == nil || d.Strip == nil || d.Pan == nil || d.Tilt == nil || d.Touch == nil {
		t.Error("a stand-in is missing")
	}
	if d.Attn != nil || d.Boot != nil {
		t.Error("pins not described were opened")
	}
	full := open(t, linuxtest.New(), clock.Real)
	if got := strings.Join(full.Absent, ","); got != "touch" {
		t.Errorf("the full description leaves absent %q, want touch", got)
	}
}

// TestAttnOpenDrain: high lets go of the line (input, pull-up), low
// drives it.
func TestAttnOpenDrain(t *testing.T) {
	h := linuxtest.New()
	d := open(t, h, clock.Real)
	p := h.FakePin(linuxtest.PinAttn)
	if p.P != gpio.PullUp || p.Read() != gpio.High {
		t.Errorf("at start: pull %v level %v, want released high", p.P, p.Read())
	}
	if err := d.Attn.Set(false); err != nil || p.Read() != gpio.Low {
		t.Errorf("low: %v %v", p.Read(), err)
	}
	if err := d.Attn.Set(true); err != nil || p.Read() != gpio.High {
		t.Errorf("released: %v %v", p.Read(), err)
	}
}

// TestBootButton: a press (falling edge, still low after the debounce)
// counts once; a bounce that is high again does not.
func TestBootButton(t *testing.T) {
	h := linuxtest.New()
	d := open(t, h, clock.Real)
	p := h.FakePin(linuxtest.PinBoot)
	presses := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Boot.Run(ctx, func() { presses <- struct{}{} }); close(done) }()
	p.EdgesChan <- gpio.Low // WaitForEdge sets the level it delivers
	select {
	case <-presses:
	case <-time.After(5 * time.Second):
		t.Fatal("press not seen")
	}
	p.EdgesChan <- gpio.High // a release is no press
	select {
	case <-presses:
		t.Fatal("a release counted as a press")
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	<-done
}

func TestStripCountLimit(t *testing.T) {
	d := open(t, linuxtest.New(), clock.Real)
	if err := d.Strip.Configure(341, d.LEDGPIO); err == nil || !strings.Contains(err.Error(), "bufsiz") {
		t.Errorf("341 WS2812 on a 4096-byte spidev: %v", err)
	}
	if err := d.Strip.Configure(3, d.LEDGPIO); err != nil {
		t.Fatal(err)
	}
	if err := d.Strip.Write([]color.RGBA{{1, 2, 3, 255}, {}, {}}); err != nil {
		t.Fatal(err)
	}
}

// TestExampleDescription: the description docs/hardware.md shows (kept in
// deploy/) is valid, and opens on the fakes but for the parts the fakes
// do not have (the touch controller).
func TestExampleDescription(t *testing.T) {
	d, err := linux.Load("../../../deploy/hardware.example.json")
	if err != nil {
		t.Fatal(err)
	}
	d.Touch = nil
	if _, err := linux.Open(d, linuxtest.New(), linux.Options{Sleep: noSleep}); err != nil {
		t.Fatal(err)
	}
}

// FuzzParse: the description parser never panics, and what it accepts
// survives a round trip through JSON unchanged.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../../../deploy/hardware.example.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"display":{"spi":"a","dc":"GPIO1"},"attn":"GPIO1"}`))
	f.Add([]byte(`{"servos":{"i2c":"b","pan":0,"tilt":1,"min_us":600}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := linux.Parse(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := linux.Parse(again)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", again, err)
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip changed %+v to %+v", d, d2)
		}
	})
}
