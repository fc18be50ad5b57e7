package boardapi

import (
	"errors"
	"image/color"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var colourTests = []struct {
	in      string
	want    color.RGBA
	wantErr bool
}{
	{in: "#ff8000", want: color.RGBA{0xff, 0x80, 0x00, 0xff}},
	{in: "#FF8000", want: color.RGBA{0xff, 0x80, 0x00, 0xff}},
	{in: "#000000", want: color.RGBA{0, 0, 0, 0xff}},
	{in: " #0a0B0c ", want: color.RGBA{0x0a, 0x0b, 0x0c, 0xff}},
	{in: "255,128,0", want: color.RGBA{0xff, 0x80, 0x00, 0xff}},
	{in: "1, 2 , 3", want: color.RGBA{1, 2, 3, 0xff}},
	{in: "000,010,255", want: color.RGBA{0, 10, 255, 0xff}},
	{in: "red", want: color.RGBA{0xff, 0, 0, 0xff}},
	{in: "RED", want: color.RGBA{0xff, 0, 0, 0xff}},
	{in: "Green", want: color.RGBA{0, 0xff, 0, 0xff}},
	{in: "blue", want: color.RGBA{0, 0, 0xff, 0xff}},
	{in: "white", want: color.RGBA{0xff, 0xff, 0xff, 0xff}},
	{in: "black", want: color.RGBA{0, 0, 0, 0xff}},
	{in: "warm white", want: color.RGBA{0xff, 0xb4, 0x6b, 0xff}},
	{in: "Warm-White", want: color.RGBA{0xff, 0xb4, 0x6b, 0xff}},
	{in: "warm_white", want: color.RGBA{0xff, 0xb4, 0x6b, 0xff}},
	{in: "orange", want: color.RGBA{0xff, 0x80, 0x00, 0xff}},
	{in: "purple", want: color.RGBA{0x80, 0x00, 0xff, 0xff}},
	{in: "pink", want: color.RGBA{0xff, 0x40, 0x80, 0xff}},
	{in: "cyan", want: color.RGBA{0, 0xff, 0xff, 0xff}},
	{in: "magenta", want: color.RGBA{0xff, 0, 0xff, 0xff}},
	{in: "yellow", want: color.RGBA{0xff, 0xff, 0, 0xff}},
	{in: "", wantErr: true},
	{in: "   ", wantErr: true},
	{in: "#", wantErr: true},
	{in: "#fff", wantErr: true},
	{in: "#ff800", wantErr: true},
	{in: "#ff80000", wantErr: true},
	{in: "#gg0000", wantErr: true},
	{in: "#+f0000", wantErr: true},
	{in: "ff8000", wantErr: true},
	{in: "256,0,0", wantErr: true},
	{in: "-1,0,0", wantErr: true},
	{in: "1,2", wantErr: true},
	{in: "1,2,3,4", wantErr: true},
	{in: "1,,3", wantErr: true},
	{in: "1.5,2,3", wantErr: true},
	{in: "+1,2,3", wantErr: true},
	{in: "0001,2,3", wantErr: true},
	{in: "chartreuse", wantErr: true},
	{in: "re d", want: color.RGBA{0xff, 0, 0, 0xff}}, // spaces are ignored inside names
}

func TestParseColour(t *testing.T) {
	for _, tc := range colourTests {
		got, err := ParseColour(tc.in)
		if tc.wantErr {
			if !errors.Is(err, ErrColour) {
				t.Errorf("ParseColour(%q) = %v, %v; want ErrColour", tc.in, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseColour(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("ParseColour(%q) (-got +want)\n%s", tc.in, diff)
		}
	}
}

func TestColourNamesParse(t *testing.T) {
	for _, n := range ColourNames() {
		if _, err := ParseColour(n); err != nil {
			t.Errorf("name %q: %v", n, err)
		}
	}
}

func TestFormatColour(t *testing.T) {
	if got := FormatColour(color.RGBA{0x0a, 0xbc, 0xff, 0xff}); got != "#0abcff" {
		t.Errorf("FormatColour = %q, want #0abcff", got)
	}
}

func FuzzParseColour(f *testing.F) {
	for _, tc := range colourTests {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseColour(s)
		if err != nil {
			if !errors.Is(err, ErrColour) {
				t.Fatalf("error %v does not wrap ErrColour", err)
			}
			return
		}
		if c.A != 0xff {
			t.Fatalf("alpha %d", c.A)
		}
		hex := FormatColour(c)
		back, err := ParseColour(hex)
		if err != nil || back != c {
			t.Fatalf("round trip %q -> %v -> %q -> %v, %v", s, c, hex, back, err)
		}
		dec := FormatColourDecimal(c)
		back, err = ParseColour(dec)
		if err != nil || back != c {
			t.Fatalf("round trip %q -> %q -> %v, %v", s, dec, back, err)
		}
	})
}
