package strip_test

import (
	"encoding/hex"
	"errors"
	"flag"
	"image/color"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/conn/v3/spi"

	"github.com/holofleet/holofleet/firmware/hal/linux/strip"
	"github.com/holofleet/holofleet/firmware/hal/linux/strip/striptest"
)

var update = flag.Bool("update", false, "rewrite the golden recordings in testdata/")

// colours is the pattern the golden files hold: the primaries, white,
// black, and bytes with every bit position told apart.
var colours = []color.RGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}, {255, 255, 255, 255}, {0, 0, 0, 255}, {0x12, 0x34, 0xAB, 255}, {0x80, 0x01, 0x7E, 255}}

func golden(t *testing.T, name string, b []byte) {
	t.Helper()
	var sb strings.Builder
	for i := 0; i < len(b); i += 16 {
		sb.WriteString(hex.EncodeToString(b[i:min(len(b), i+16)]))
		sb.WriteByte('\n')
	}
	got := sb.String()
	path := "testdata/" + name
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	if diff := cmp.Diff(got, string(want)); diff != "" {
		t.Errorf("%s (-got +want)\n%s", name, diff)
	}
}

// TestPatternOnTheWire: a colour pattern as the encoded bit stream each
// chip receives (golden), and decoded back to the same colours.
func TestPatternOnTheWire(t *testing.T) {
	tests := []struct {
		kind   strip.Kind
		hz     physic.Frequency
		mode   spi.Mode
		decode func([]byte) ([]color.RGBA, error)
	}{
		{strip.WS2812, 2500 * physic.KiloHertz, spi.Mode3, striptest.DecodeWS2812},
		{strip.APA102, 20 * physic.MegaHertz, spi.Mode3, func(b []byte) ([]color.RGBA, error) { return striptest.DecodeAPA102(b, len(colours)) }},
	}
	for _, tc := range tests {
		t.Run(tc.kind.String(), func(t *testing.T) {
			bus := &striptest.Bus{Limit: 4096}
			s := strip.New(tc.kind, bus.Open)
			if err := s.Configure(len(colours), 10); err != nil {
				t.Fatal(err)
			}
			dark, err := tc.decode(bus.Last())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(dark, make([]color.RGBA, len(colours)), cmp.Transformer("rgb", func(c color.RGBA) [3]uint8 { return [3]uint8{c.R, c.G, c.B} })); diff != "" {
				t.Errorf("after Configure the strip is not dark (-got +want)\n%s", diff)
			}
			if err := s.Write(colours); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.kind.String()+"-pattern.golden", bus.Last())
			got, err := tc.decode(bus.Last())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, colours); diff != "" {
				t.Errorf("decoded (-got +want)\n%s", diff)
			}
			if p := bus.Current(); p.Hz != tc.hz || p.Mode != tc.mode {
				t.Errorf("connected at %s %v, want %s %v", p.Hz, p.Mode, tc.hz, tc.mode)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	bus := &striptest.Bus{Limit: 4096}
	s := strip.New(strip.WS2812, bus.Open)
	// 340 LEDs fit spidev's default 4096 bytes; 341 do not.
	if err := s.Configure(340, 10); err != nil {
		t.Fatal(err)
	}
	if got := len(bus.Last()); got != strip.WS2812Bytes(340) {
		t.Errorf("frame of %d bytes, want %d", got, strip.WS2812Bytes(340))
	}
	err := s.Configure(341, 10)
	if !errors.Is(err, strip.ErrRange) || !strings.Contains(err.Error(), "bufsiz") {
		t.Errorf("341 LEDs on 4096 bytes: %v, want ErrRange naming bufsiz", err)
	}
	for _, n := range []int{-1, strip.MaxLEDs + 1} {
		if err := s.Configure(n, 10); !errors.Is(err, strip.ErrRange) {
			t.Errorf("Configure(%d): %v", n, err)
		}
	}
	if err := s.Configure(3, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(colours[:2]); !errors.Is(err, strip.ErrSize) {
		t.Errorf("short frame: %v, want ErrSize", err)
	}
	// Zero LEDs: nothing opened, nothing sent, empty frames accepted.
	opened := bus.Current()
	if err := s.Configure(0, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(nil); err != nil {
		t.Fatal(err)
	}
	if bus.Current() != opened {
		t.Error("a strip of 0 LEDs opened a port")
	}
	failing := strip.New(strip.WS2812, (&striptest.Bus{Fail: errors.New("no /dev/spidev0.0")}).Open)
	if err := failing.Configure(3, 10); !errors.Is(err, strip.ErrBus) {
		t.Errorf("port that does not open: %v, want ErrBus", err)
	}
}

func TestCloseGoesDark(t *testing.T) {
	bus := &striptest.Bus{}
	s := strip.New(strip.APA102, bus.Open)
	if err := s.Configure(2, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(colours[:2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := striptest.DecodeAPA102(bus.Last(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		if c.R|c.G|c.B != 0 {
			t.Errorf("LED %d = %v after Close", i, c)
		}
	}
}

// FuzzDecodeWS2812: the decoder never panics, and what it accepts
// encodes back (through the real driver) to the same bytes.
func FuzzDecodeWS2812(f *testing.F) {
	bus := &striptest.Bus{}
	s := strip.New(strip.WS2812, bus.Open)
	if err := s.Configure(len(colours), 0); err != nil {
		f.Fatal(err)
	}
	if err := s.Write(colours); err != nil {
		f.Fatal(err)
	}
	f.Add(bus.Last())
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		px, err := striptest.DecodeWS2812(b)
		if err != nil || len(px) == 0 || len(px) > 64 {
			return
		}
		bus := &striptest.Bus{}
		s := strip.New(strip.WS2812, bus.Open)
		if err := s.Configure(len(px), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(px); err != nil {
			t.Fatal(err)
		}
		if string(bus.Last()) != string(b) {
			t.Fatalf("re-encoded differs")
		}
	})
}

// FuzzDecodeAPA102: never panics; accepted frames at full brightness
// encode back to the same colours.
func FuzzDecodeAPA102(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0xFF, 1, 2, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 1)
	f.Add([]byte{0, 0, 0, 0}, 0)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		px, err := striptest.DecodeAPA102(b, n%100)
		if err != nil || len(px) == 0 {
			return
		}
		bus := &striptest.Bus{}
		s := strip.New(strip.APA102, bus.Open)
		if err := s.Configure(len(px), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(px); err != nil {
			t.Fatal(err)
		}
		again, err := striptest.DecodeAPA102(bus.Last(), len(px))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(again, px); diff != "" {
			t.Fatalf("round trip (-got +want)\n%s", diff)
		}
	})
}
