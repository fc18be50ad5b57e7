package boardapi

import (
	"fmt"
	"image/color"
)

// Native LEDS message (type 0x30) payload, 6 bytes:
//
//	0 mode        0 off, 1 solid, 2 wipe, 3 rainbow, 4 flicker, 0xFF leave
//	1 r           \
//	2 g            } a new colour when flags bit 1 is set
//	3 b           /
//	4 brightness  1-100, 0 leaves it
//	5 flags       bit 0 loop, bit 1 r,g,b is a new colour
const (
	LEDNativeLen        = 6
	LEDNativeLeave      = LEDModeUnknown
	LEDNativeFlagLoop   = 1 << 0
	LEDNativeFlagColour = 1 << 1
)

// LEDPatchFromNative turns a native LEDS payload into an LEDPatch, the
// patch a board applies for it. Loop is always set (from flags bit 0). An
// unknown mode number is passed on as a name LEDPatch.Check refuses, so
// the reply is bad request. The payload must be LEDNativeLen bytes.
func LEDPatchFromNative(payload []byte) (LEDPatch, error) {
	if len(payload) != LEDNativeLen {
		return LEDPatch{}, Rulef(ErrLEDMode, ErrBadRequest, "LEDS payload is %d bytes, want %d", len(payload), LEDNativeLen)
	}
	var p LEDPatch
	if m := payload[0]; m != LEDNativeLeave {
		name := fmt.Sprintf("mode %d", m)
		if int(m) < len(LEDModes) {
			name = LEDModes[m]
		}
		p.Mode = &name
	}
	flags := payload[5]
	if flags&LEDNativeFlagColour != 0 {
		s := FormatColour(color.RGBA{payload[1], payload[2], payload[3], 0xff})
		p.Colour = &s
	}
	if b := int(payload[4]); b != 0 {
		p.Brightness = &b
	}
	loop := flags&LEDNativeFlagLoop != 0
	p.Loop = &loop
	return p, nil
}

// Native HOLO message (type 0x40) payload, 7 bytes, little-endian:
//
//	0    motion       0-9, the index in Motions
//	1    x            s8, hundredths: -100..100 for move, -128..127 for nudge
//	2    y            s8, likewise
//	3-4  duration_ms  u16, 0 takes the default
//	5    range        u8 percent, 0 takes the default
//	6    count        u8, 0 takes the default (repeat until replaced)
const MotionNativeLen = 7

// MotionFromNative turns a native HOLO payload into a MotionRequest (x
// and y only for move and nudge). The result still goes through
// Validate where the board applies it.
func MotionFromNative(payload []byte) (MotionRequest, error) {
	if len(payload) != MotionNativeLen {
		return MotionRequest{}, MotionError("HOLO payload is %d bytes, want %d", len(payload), MotionNativeLen)
	}
	n := int(payload[0])
	if n >= len(Motions) {
		return MotionRequest{}, MotionError("motion number %d: want 0-%d", n, len(Motions)-1)
	}
	m := MotionRequest{Motion: Motions[n]}
	x, y := int(int8(payload[1])), int(int8(payload[2]))
	switch m.Motion {
	case MotionMove:
		if x < -100 || x > 100 || y < -100 || y > 100 {
			return MotionRequest{}, MotionError("move x %d, y %d: want -100..100", x, y)
		}
		fallthrough
	case MotionNudge:
		fx, fy := float64(x)/100, float64(y)/100
		m.X, m.Y = &fx, &fy
	}
	if d := int(payload[3]) | int(payload[4])<<8; d != 0 {
		m.DurationMS = &d
	}
	if r := int(payload[5]); r != 0 {
		m.Range = &r
	}
	if c := int(payload[6]); c != 0 {
		m.Count = &c
	}
	return m, nil
}
