package leds

import "fmt"

// Native LEDS message (type 0x30) payload, 6 bytes:
//
//	0 mode        0 off, 1 solid, 2 wipe, 3 rainbow, 4 flicker, 0xFF leave
//	1 r           \
//	2 g            } a new colour when flags bit 1 is set
//	3 b           /
//	4 brightness  1-100, 0 leaves it
//	5 flags       bit 0 loop, bit 1 r,g,b is a new colour
const (
	NativeLeave      = 0xFF
	NativeFlagLoop   = 1 << 0
	NativeFlagColour = 1 << 1
)

// PatchFromNative turns a native LEDS payload into a Patch. Loop is always
// set (from flags bit 0). An unknown mode number is passed on as a name
// Patch refuses, so the reply is bad request. The payload must be 6 bytes.
func PatchFromNative(payload []byte) (Patch, error) {
	if len(payload) != 6 {
		return Patch{}, badRequest(ErrMode, "LEDS payload is %d bytes, want 6", len(payload))
	}
	var p Patch
	if m := payload[0]; m != NativeLeave {
		name := fmt.Sprintf("mode %d", m)
		if int(m) < len(Modes) {
			name = Modes[m]
		}
		p.Mode = &name
	}
	flags := payload[5]
	if flags&NativeFlagColour != 0 {
		s := FormatColour(rgb(payload[1], payload[2], payload[3]))
		p.Colour = &s
	}
	if b := int(payload[4]); b != 0 {
		p.Brightness = &b
	}
	loop := flags&NativeFlagLoop != 0
	p.Loop = &loop
	return p, nil
}
