package frame

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPayloadErrors(t *testing.T) {
	tests := []struct {
		name string
		m    Message
		in   []byte
		want error
	}{
		{"SCENE empty", &SceneRequest{}, nil, ErrShort},
		{"SCENE slot 0", &SceneRequest{}, hx("00"), ErrRange},
		{"COLOUR short", &ColourRequest{}, hx("01 02"), ErrShort},
		{"BACKLIGHT empty", &BacklightRequest{}, nil, ErrShort},
		{"BACKLIGHT 101", &BacklightRequest{}, hx("65"), ErrRange},
		{"LEDS short", &LEDsRequest{}, hx("01 00 00 00 00"), ErrShort},
		{"LEDS mode 5", &LEDsRequest{}, hx("05 00 00 00 00 00"), ErrRange},
		{"LEDS mode 0xFE", &LEDsRequest{}, hx("FE 00 00 00 00 00"), ErrRange},
		{"LEDS brightness 101", &LEDsRequest{}, hx("01 00 00 00 65 00"), ErrRange},
		{"LEDS flag bit 2", &LEDsRequest{}, hx("01 00 00 00 10 04"), ErrRange},
		{"HOLO short", &HoloRequest{}, hx("00 00 00 00 00 00"), ErrShort},
		{"HOLO motion 10", &HoloRequest{}, hx("0A 00 00 00 00 00 00"), ErrRange},
		{"HOLO move x 101", &HoloRequest{}, hx("01 65 00 00 00 00 00"), ErrRange},
		{"HOLO move y -101", &HoloRequest{}, hx("01 00 9B 00 00 00 00"), ErrRange},
		{"EVENTS_SET short", &EventsSetRequest{}, hx("01"), ErrShort},
		{"EVENTS_SET push 2", &EventsSetRequest{}, hx("01 02"), ErrRange},
		{"EVENTS_GET short", &EventsGetRequest{}, hx("01"), ErrShort},
		{"header short", &Header{}, hx("00"), ErrShort},
		{"PING reply short", &PingReply{}, hx("01 00 00 00"), ErrShort},
		{"VERSION reply of 33 bytes", &VersionReply{}, []byte("0123456789abcdef0123456789abcdefX"), ErrTooLong},
		{"VERSION reply with a zero", &VersionReply{}, hx("31 00"), ErrRange},
		{"VERSION reply not ASCII", &VersionReply{}, hx("C3 A9"), ErrRange},
		{"STATUS reply short", &StatusReply{}, make([]byte, 11), ErrShort},
		{"status block backlight 101", &StatusBlock{}, hx("00 00 FF FF 00 00 65 00 00 00 00 00"), ErrRange},
		{"status block brightness 101", &StatusBlock{}, hx("00 00 FF FF 00 00 00 65 00 00 00 00"), ErrRange},
		{"EVENTS_SET reply short", &EventsSetReply{}, hx("01"), ErrShort},
		{"EVENTS_GET reply short", &EventsGetReply{}, hx("00"), ErrShort},
		{"EVENTS_GET reply count 6", &EventsGetReply{}, append(hx("00 06"), make([]byte, 48)...), ErrTooLong},
		{"EVENTS_GET reply records missing", &EventsGetReply{}, append(hx("00 02"), make([]byte, 15)...), ErrShort},
		{"EVENTS_GET reply bad record", &EventsGetReply{}, hx("00 01  03 01 00 00 F0 00 00 00"), ErrRange},
		{"record short", &Record{}, hx("01 00 00 00 00 00 00"), ErrShort},
		{"record touch x 240", &Record{}, hx("03 01 00 00 F0 00 00 00"), ErrRange},
		{"record touch y 255", &Record{}, hx("03 01 00 01 00 FF 00 00"), ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.UnmarshalBinary(tt.in); !errors.Is(err, tt.want) {
				t.Errorf("UnmarshalBinary(% X) = %v, want %v", tt.in, err, tt.want)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		m    interface {
			AppendBinary([]byte) ([]byte, error)
		}
		want error
	}{
		{"SCENE slot 0", SceneRequest{}, ErrRange},
		{"BACKLIGHT 101", BacklightRequest{Percent: 101}, ErrRange},
		{"LEDS mode 7", LEDsRequest{Mode: 7}, ErrRange},
		{"LEDS brightness 200", LEDsRequest{Brightness: 200}, ErrRange},
		{"LEDS flags 0x80", LEDsRequest{Flags: 0x80}, ErrRange},
		{"HOLO motion 12", HoloRequest{Motion: 12}, ErrRange},
		{"HOLO move -128", HoloRequest{Motion: MotionMove, X: -128}, ErrRange},
		{"VERSION 33 bytes", VersionReply{Version: "0123456789abcdef0123456789abcdefX"}, ErrTooLong},
		{"VERSION line feed", VersionReply{Version: "1.0\n"}, ErrRange},
		{"status block backlight", StatusBlock{Backlight: 101}, ErrRange},
		{"EVENTS_GET 6 records", EventsGetReply{Records: make([]Record, 6)}, ErrTooLong},
		{"EVENTS_GET bad record", EventsGetReply{Records: []Record{{Kind: KindTouch, X: 240}}}, ErrRange},
		{"touch y 240", Record{Kind: KindTouch, Y: 240}, ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.m.AppendBinary([]byte{0xAA})
			if !errors.Is(err, tt.want) {
				t.Errorf("AppendBinary = %v, want %v", err, tt.want)
			}
			if !slices.Equal(b, []byte{0xAA}) {
				t.Errorf("AppendBinary left % X, want the input unchanged", b)
			}
		})
	}
}

// Later revisions may append fields; decoders read what they know.
func TestTrailingBytesIgnored(t *testing.T) {
	var blk StatusBlock
	long := hx("04 07 2C 01 02 03 50 1E 39 30 00 03  AA BB CC") // a block with three future bytes
	if err := blk.UnmarshalBinary(long); err != nil {
		t.Fatal(err)
	}
	want := StatusBlock{Showing: ShowingClip, Scene: 7, Remaining: 300, Holo: HoloTwitch, LEDs: LEDRainbow,
		Backlight: 80, Brightness: 30, Seq: 12345, Flags: FlagTouch | FlagHoloReady}
	if d := cmp.Diff(blk, want); d != "" {
		t.Errorf("long block (-got +want):\n%s", d)
	}
	var ping PingReply
	if err := ping.UnmarshalBinary(hx("01 10 0E 00 00 FF")); err != nil || ping != (PingReply{Protocol: 1, UptimeS: 3600}) {
		t.Errorf("PING reply with an extra byte: %+v, %v", ping, err)
	}
	var scene SceneRequest
	if err := scene.UnmarshalBinary(hx("03 FF")); err != nil || scene.Slot != 3 {
		t.Errorf("SCENE with an extra byte: %+v, %v", scene, err)
	}
	// Fewer than the clip start's eight bytes are a later field's, not a
	// clip start.
	if err := scene.UnmarshalBinary(hx("03 01 02 03 04 05 06 07")); err != nil || scene != (SceneRequest{Slot: 3}) {
		t.Errorf("SCENE with seven extra bytes: %+v, %v", scene, err)
	}
	if err := scene.UnmarshalBinary(hx("03 40 12 61 01 8B 60 06 00 FF")); err != nil || scene != (SceneRequest{Slot: 3, ClipStartUS: 1795000000123456}) {
		t.Errorf("SCENE with a clip start and an extra byte: %+v, %v", scene, err)
	}
	// Status block enumerations from a later revision are kept.
	if err := blk.UnmarshalBinary(hx("09 00 FF FF 07 05 00 00 00 00 08 F0")); err != nil {
		t.Fatal(err)
	}
	if blk.Showing != 9 || blk.Holo != 7 || blk.LEDs != 5 || blk.LastStatus != 8 || blk.Flags != 0xF0 {
		t.Errorf("unknown values not kept: %+v", blk)
	}
}

// Unused record bytes are ignored on decode and zero on encode.
func TestRecordUnusedBytes(t *testing.T) {
	in := hx("01 05 00  01 EE EE EE EE") // clip_ended, finished, noise in unused bytes
	var r Record
	if err := r.UnmarshalBinary(in); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, Record{Kind: KindClipEnded, Seq: 5, Finished: true}); d != "" {
		t.Errorf("(-got +want):\n%s", d)
	}
	out, _ := r.AppendBinary(nil)
	if d := cmp.Diff(out, hx("01 05 00 01 00 00 00 00")); d != "" {
		t.Errorf("re-encoded (-got +want):\n%s", d)
	}
	// Fields of other kinds are not encoded.
	out, _ = Record{Kind: KindReady, Protocol: 1, Address: 9, X: 50, Finished: true, Raw: [5]byte{1, 1, 1, 1, 1}}.AppendBinary(nil)
	if d := cmp.Diff(out, hx("0F 00 00 01 09 00 00 00")); d != "" {
		t.Errorf("ready (-got +want):\n%s", d)
	}
	// Kind 0, the empty I2C EVENT register, is eight zero bytes.
	out, _ = Record{}.AppendBinary(nil)
	if d := cmp.Diff(out, make([]byte, 8)); d != "" {
		t.Errorf("none (-got +want):\n%s", d)
	}
}

func TestKinds(t *testing.T) {
	names := []string{"clip_ended", "scene_ended", "touch", "clip_started", "scene_started"}
	for i, n := range names {
		k, err := ParseKind(n)
		if err != nil || k != Kind(i+1) || k.Name() != n || k.String() != n || k.Bit() != KindMask(1<<i) {
			t.Errorf("kind %q: %d, %v, bit %#x", n, k, err, k.Bit())
		}
	}
	if k, err := ParseKind("ready"); err != nil || k != KindReady || KindReady.Bit() != 0 {
		t.Errorf("ready: %d, %v", k, err)
	}
	if _, err := ParseKind("screen"); !errors.Is(err, ErrUnknownName) {
		t.Errorf("ParseKind(screen) = %v", err)
	}
	if Kind(9).String() != "Kind(9)" || Kind(0).Name() != "" {
		t.Error("unnamed kinds")
	}

	m, err := MaskOf([]string{"touch", "clip_ended", "touch"})
	if err != nil || m != MaskTouch|MaskClipEnded {
		t.Errorf("MaskOf = %#x, %v", m, err)
	}
	if d := cmp.Diff(m.Names(), []string{"clip_ended", "touch"}); d != "" {
		t.Errorf("Names (-got +want):\n%s", d)
	}
	if d := cmp.Diff(MaskAll.Names(), names); d != "" {
		t.Errorf("MaskAll.Names (-got +want):\n%s", d)
	}
	if got := KindMask(0xE0).Names(); got == nil || len(got) != 0 {
		t.Errorf("undefined bits name %v, want an empty list", got)
	}
	if m, err := MaskOf(nil); err != nil || m != 0 {
		t.Errorf("MaskOf(nil) = %#x, %v", m, err)
	}
	for _, bad := range []string{"ready", "system", ""} {
		if _, err := MaskOf([]string{bad}); !errors.Is(err, ErrUnknownName) {
			t.Errorf("MaskOf(%q) = %v, want ErrUnknownName", bad, err)
		}
	}
	if MaskAll.Has(KindReady) || !MaskAll.Has(KindSceneStarted) || MaskTouch.Has(KindClipEnded) {
		t.Error("Has")
	}
}

func TestEnumNames(t *testing.T) {
	type enum struct {
		names  []string
		str    func(uint8) string
		parse  func(string) (uint8, error)
		extra  map[uint8]string // values outside 0..len-1 that have a name
		parsed bool             // whether extra names parse back
	}
	enums := map[string]enum{
		"LEDMode": {
			names: []string{"off", "solid", "wipe", "rainbow", "flicker"},
			str:   func(v uint8) string { return LEDMode(v).String() },
			parse: func(s string) (uint8, error) { v, err := ParseLEDMode(s); return uint8(v), err },
			extra: map[uint8]string{0xFF: "keep"},
		},
		"Motion": {
			names: []string{"center", "move", "nudge", "twitch", "wag", "nod", "scan", "circle", "stop", "off"},
			str:   func(v uint8) string { return Motion(v).String() },
			parse: func(s string) (uint8, error) { v, err := ParseMotion(s); return uint8(v), err },
		},
		"HoloState": {
			names:  []string{"hold", "move", "twitch", "wag", "nod", "scan", "circle"},
			str:    func(v uint8) string { return HoloState(v).String() },
			parse:  func(s string) (uint8, error) { v, err := ParseHoloState(s); return uint8(v), err },
			extra:  map[uint8]string{0xFF: "cannot_move"},
			parsed: true,
		},
		"Showing": {
			names: []string{"nothing", "colour", "calibration", "image", "clip"},
			str:   func(v uint8) string { return Showing(v).String() },
			parse: func(s string) (uint8, error) { v, err := ParseShowing(s); return uint8(v), err },
		},
		"Then": {
			names: []string{"stay", "restore", "off"},
			str:   func(v uint8) string { return Then(v).String() },
			parse: func(s string) (uint8, error) { v, err := ParseThen(s); return uint8(v), err },
		},
		"EndedBy": {
			names: []string{"clip", "time", "end", "replaced"},
			str:   func(v uint8) string { return EndedBy(v).String() },
			parse: func(s string) (uint8, error) { v, err := ParseEndedBy(s); return uint8(v), err },
		},
		"TouchAction": {
			names: []string{"down", "up"},
			str:   func(v uint8) string { return TouchAction(v).String() },
			parse: func(s string) (uint8, error) { v, err := ParseTouchAction(s); return uint8(v), err },
		},
	}
	for typ, e := range enums {
		for i, n := range e.names {
			if got := e.str(uint8(i)); got != n {
				t.Errorf("%s(%d).String() = %q, want %q", typ, i, got, n)
			}
			if v, err := e.parse(n); err != nil || v != uint8(i) {
				t.Errorf("Parse%s(%q) = %d, %v", typ, n, v, err)
			}
		}
		for v, n := range e.extra {
			if got := e.str(v); got != n {
				t.Errorf("%s(%d).String() = %q, want %q", typ, v, got, n)
			}
			if got, err := e.parse(n); e.parsed && (err != nil || got != v) {
				t.Errorf("Parse%s(%q) = %d, %v", typ, n, got, err)
			}
		}
		if got := e.str(200); got != typ+"(200)" {
			t.Errorf("%s(200).String() = %q", typ, got)
		}
		if _, err := e.parse("no-such"); !errors.Is(err, ErrUnknownName) {
			t.Errorf("Parse%s(no-such) = %v", typ, err)
		}
	}
}

func TestDispatch(t *testing.T) {
	for t8 := range 256 {
		typ := Type(t8)
		req, reqErr := NewRequest(typ)
		body, bodyErr := NewReplyBody(typ)
		known := typ.Known() && !typ.IsReply()
		if (reqErr == nil) != known {
			t.Errorf("NewRequest(%v) = %T, %v", typ, req, reqErr)
		}
		wantBody := typ.Known() && typ.Request() != TypeEvent
		if (bodyErr == nil) != wantBody {
			t.Errorf("NewReplyBody(%v) = %T, %v", typ, body, bodyErr)
		}
		if reqErr == nil {
			if r, ok := req.(Request); !ok || r.Type() != typ {
				t.Errorf("NewRequest(%v) gives a %T that does not report its type", typ, req)
			}
		} else if !errors.Is(reqErr, ErrUnknownType) {
			t.Errorf("NewRequest(%v) error %v", typ, reqErr)
		}
	}
	if _, _, err := ParseReply(Frame{Type: TypePing}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("ParseReply of a request = %v", err)
	}
	if _, err := ParseRequest(Frame{Type: 0x63}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("ParseRequest of type 0x63 = %v", err)
	}
	if _, err := AppendReplyPayload(nil, Header{}, VersionReply{Version: "0123456789abcdef0123456789abcdef"}); err != nil {
		t.Errorf("32-byte version: %v", err)
	}
	big := EventsGetReply{Records: make([]Record, MaxRecords)}
	p, err := AppendReplyPayload(nil, Header{}, big)
	if err != nil || len(p) != 2+2+MaxRecords*RecordLen {
		t.Errorf("five records: %d bytes, %v", len(p), err)
	}
	p, err = AppendReplyPayload(nil, Header{Status: StatusBusy}, big)
	if err != nil || len(p) != 2 {
		t.Errorf("busy reply carries % X, %v; want the header only", p, err)
	}
	if b, err := Marshal(ColourRequest{R: 1, G: 2, B: 3}); err != nil || !slices.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("Marshal = % X, %v", b, err)
	}
}
