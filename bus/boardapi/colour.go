package boardapi

import (
	"fmt"
	"image/color"
	"strconv"
	"strings"
)

// Colour names accepted wherever a colour is (PATCH /leds, scenes, the
// console). Lookups ignore case, spaces, '-' and '_', so "Warm White",
// "warm-white" and "warmwhite" are one name. The values are tuned for LEDs
// and a small screen rather than copied from CSS: "green" is full green,
// "orange" and "pink" are as they look on a strip.
var colourNames = map[string]color.RGBA{
	"black":     {0x00, 0x00, 0x00, 0xff},
	"off":       {0x00, 0x00, 0x00, 0xff},
	"white":     {0xff, 0xff, 0xff, 0xff},
	"warmwhite": {0xff, 0xb4, 0x6b, 0xff}, // about 2700 K
	"coolwhite": {0xd0, 0xe4, 0xff, 0xff}, // about 8000 K
	"red":       {0xff, 0x00, 0x00, 0xff},
	"green":     {0x00, 0xff, 0x00, 0xff},
	"blue":      {0x00, 0x00, 0xff, 0xff},
	"yellow":    {0xff, 0xff, 0x00, 0xff},
	"cyan":      {0x00, 0xff, 0xff, 0xff},
	"magenta":   {0xff, 0x00, 0xff, 0xff},
	"orange":    {0xff, 0x80, 0x00, 0xff},
	"amber":     {0xff, 0xbf, 0x00, 0xff},
	"gold":      {0xff, 0xd7, 0x00, 0xff},
	"purple":    {0x80, 0x00, 0xff, 0xff},
	"violet":    {0xb0, 0x40, 0xff, 0xff},
	"indigo":    {0x4b, 0x00, 0x82, 0xff},
	"pink":      {0xff, 0x40, 0x80, 0xff},
	"lime":      {0x80, 0xff, 0x00, 0xff},
	"teal":      {0x00, 0x80, 0x80, 0xff},
	"turquoise": {0x40, 0xe0, 0xd0, 0xff},
	"grey":      {0x80, 0x80, 0x80, 0xff},
	"gray":      {0x80, 0x80, 0x80, 0xff},
}

// ColourNames returns the accepted colour names in no particular order
// (for help texts and the openapi description).
func ColourNames() []string {
	out := make([]string, 0, len(colourNames))
	for n := range colourNames {
		out = append(out, n)
	}
	return out
}

// ParseColour reads a colour in one of three forms:
//
//	#rrggbb   six hex digits, either case        "#ff8000"
//	R,G,B     three decimals 0-255, spaces allowed "255, 128, 0"
//	name      a name of the table above           "Warm White"
//
// Alpha is always opaque. Anything else is an error wrapping ErrColour.
func ParseColour(s string) (color.RGBA, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return color.RGBA{}, fmt.Errorf("%w: empty", ErrColour)
	case t[0] == '#':
		if len(t) != 7 {
			return color.RGBA{}, fmt.Errorf("%w: %q: want #rrggbb", ErrColour, s)
		}
		v, err := strconv.ParseUint(t[1:], 16, 32)
		if err != nil {
			return color.RGBA{}, fmt.Errorf("%w: %q: want #rrggbb", ErrColour, s)
		}
		return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}, nil
	case strings.Contains(t, ","):
		parts := strings.Split(t, ",")
		if len(parts) != 3 {
			return color.RGBA{}, fmt.Errorf("%w: %q: want R,G,B", ErrColour, s)
		}
		var rgb [3]uint8
		for i, p := range parts {
			p = strings.TrimSpace(p)
			if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
				return color.RGBA{}, fmt.Errorf("%w: %q: want R,G,B with each 0-255", ErrColour, s)
			}
			v, err := strconv.Atoi(p)
			if err != nil || v > 255 {
				return color.RGBA{}, fmt.Errorf("%w: %q: want R,G,B with each 0-255", ErrColour, s)
			}
			rgb[i] = uint8(v)
		}
		return color.RGBA{rgb[0], rgb[1], rgb[2], 0xff}, nil
	}
	key := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_':
			return -1
		}
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, t)
	if c, ok := colourNames[key]; ok {
		return c, nil
	}
	return color.RGBA{}, fmt.Errorf("%w: %q is not #rrggbb, R,G,B or a known colour name", ErrColour, s)
}

// FormatColour writes c as #rrggbb, the form the board reports.
func FormatColour(c color.RGBA) string {
	return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
}

// FormatColourDecimal writes c in the R,G,B form ParseColour accepts.
func FormatColourDecimal(c color.RGBA) string {
	return fmt.Sprintf("%d,%d,%d", c.R, c.G, c.B)
}
