package frame

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/cobs"
	"github.com/holofleet/holofleet/bus/crc16"
)

func TestPackets(t *testing.T) {
	for _, p := range packets {
		t.Run(p.name, func(t *testing.T) {
			f, err := Parse(p.raw)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.Type.IsReply() != (p.req == nil) {
				t.Fatalf("type %v: reply bit does not match the table", f.Type)
			}

			// Decode the payload into its typed form.
			if p.req != nil {
				got, err := ParseRequest(f)
				if err != nil {
					t.Fatalf("ParseRequest: %v", err)
				}
				if d := cmp.Diff(got, p.req); d != "" {
					t.Errorf("request (-got +want):\n%s", d)
				}
			} else {
				h, body, err := ParseReply(f)
				if err != nil {
					t.Fatalf("ParseReply: %v", err)
				}
				if d := cmp.Diff(h, p.hdr); d != "" {
					t.Errorf("header (-got +want):\n%s", d)
				}
				if p.body == nil {
					if body != nil {
						t.Errorf("body = %#v, want none", body)
					}
				} else if d := cmp.Diff(body, p.body); d != "" {
					t.Errorf("body (-got +want):\n%s", d)
				}
			}

			// Encode the typed form and compare with the bytes.
			var wire []byte
			if p.req != nil {
				wire, err = AppendRequest(nil, f.Addr, f.Seq, p.req.(Request))
			} else {
				var body Message
				if p.body != nil {
					body = p.body
				}
				wire, err = AppendReply(nil, f.Addr, f.Seq, f.Type.Request(), p.hdr, body)
			}
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if wire[0] != 0 || wire[len(wire)-1] != 0 || bytes.IndexByte(wire[1:len(wire)-1], 0) >= 0 {
				t.Fatalf("wire % X: zero bytes only at both ends expected", wire)
			}
			raw, err := cobs.Decode(wire[1 : len(wire)-1])
			if err != nil {
				t.Fatalf("cobs: %v", err)
			}
			if d := cmp.Diff(raw, p.raw); d != "" {
				t.Errorf("encoded frame (-got +want):\n%s", d)
			}

			// AppendEncode of the parsed frame gives the same wire form,
			// and Decode gives the frame back.
			wire2, err := AppendEncode(nil, f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(wire2, wire) {
				t.Errorf("AppendEncode = % X, want % X", wire2, wire)
			}
			f2, _, err := Decode(make([]byte, 0, MaxLen), wire)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d := cmp.Diff(f2, f); d != "" {
				t.Errorf("Decode (-got +want):\n%s", d)
			}
		})
	}
}

// Complete wire forms, COBS stuffing worked out by hand.
func TestGoldenWire(t *testing.T) {
	if got := crc16.Checksum([]byte("123456789")); got != 0x29B1 {
		t.Fatalf("CRC check value = %#04x, want 0x29B1", got)
	}
	tests := []struct {
		name  string
		frame Frame
		wire  []byte
	}{
		{"PING request", Frame{Addr: 5, Seq: 1, Type: TypePing}, hx(`
			00                // delimiter
			06 05 01 01 7C 04 // code 6: five bytes, no zero
			00                // delimiter
		`)},
		{"SCENE reply", Frame{Addr: 5, Seq: 4, Type: TypeScene.Reply(), Payload: []byte{0, 0}}, hx(`
			00
			04 05 04 90       // addr, seq, type; then a zero (status ok)
			01                // a zero (pending 0)
			03 93 80          // crc, end of data
			00
		`)},
		{"EVENT ready", Frame{Addr: 5, Type: TypeEvent, Payload: []byte{0x0F, 0, 0, 1, 5, 0, 0, 0}}, hx(`
			00
			02 05             // addr; zero (seq 0)
			03 70 0F          // EVENT, kind ready; zero (seq low)
			01                // zero (seq high)
			03 01 05          // protocol 1, address 5; zero
			01                // zero
			01                // zero
			03 0C 39          // crc
			00
		`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendEncode(nil, tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(got, tt.wire); d != "" {
				t.Errorf("AppendEncode (-got +want):\n%s", d)
			}
			f, _, err := Decode(nil, tt.wire)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(f, tt.frame, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); d != "" {
				t.Errorf("Decode (-got +want):\n%s", d)
			}
		})
	}
}

func TestFrameErrors(t *testing.T) {
	good := packets[0].raw // PING request
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0x01
	to255 := crc16.Append([]byte{0xFF, 1, 1})
	long := crc16.Append(append([]byte{5, 1, 1}, make([]byte, MaxPayload+1)...))

	parse := []struct {
		name string
		raw  []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"four bytes", good[:4], ErrShort},
		{"bad crc", badCRC, ErrBadCRC},
		{"address 255", to255, ErrAddress},
		{"payload of 49", long, ErrTooLong},
	}
	for _, tt := range parse {
		t.Run("Parse "+tt.name, func(t *testing.T) {
			if _, err := Parse(tt.raw); !errors.Is(err, tt.want) {
				t.Errorf("Parse(% X) = %v, want %v", tt.raw, err, tt.want)
			}
		})
	}

	decode := []struct {
		name string
		wire []byte
		want error
	}{
		{"only delimiters", hx("00 00"), ErrShort},
		{"truncated code", hx("00 09 05 01 01 00"), ErrEncoding},
		{"zero inside", hx("06 05 00 01 7C 04"), ErrEncoding},
		{"bad crc", cobs.Append([]byte{0}, badCRC), ErrBadCRC},
		{"too long", cobs.Encode(long), ErrTooLong},
		{"longer than any frame", bytes.Repeat([]byte{1}, 300), ErrTooLong},
	}
	for _, tt := range decode {
		t.Run("Decode "+tt.name, func(t *testing.T) {
			if _, _, err := Decode(nil, tt.wire); !errors.Is(err, tt.want) {
				t.Errorf("Decode(% X) = %v, want %v", tt.wire, err, tt.want)
			}
		})
	}

	if _, err := AppendEncode(nil, Frame{Addr: 1, Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, ErrTooLong) {
		t.Errorf("AppendEncode of 49 bytes = %v, want ErrTooLong", err)
	}
	if _, err := AppendEncode(nil, Frame{Addr: Invalid}); !errors.Is(err, ErrAddress) {
		t.Errorf("AppendEncode to 255 = %v, want ErrAddress", err)
	}
	big, err := AppendEncode(nil, Frame{Addr: 1, Payload: bytes.Repeat([]byte{0}, MaxPayload)})
	if err != nil || len(big) > MaxWireLen {
		t.Errorf("largest frame: %d bytes, %v; want at most %d", len(big), err, MaxWireLen)
	}
}

func TestParseAliases(t *testing.T) {
	raw := bytes.Clone(packets[3].raw) // SCENE slot 7
	f, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[3] = 9
	if f.Payload[0] != 9 {
		t.Error("payload does not alias the input")
	}
	if cap(f.Payload) != len(f.Payload) {
		t.Error("payload capacity reaches into the checksum")
	}
}

func TestDecodeReusesBuffer(t *testing.T) {
	wire, _ := AppendRequest(nil, 5, 1, HoloRequest{Motion: MotionWag})
	buf := make([]byte, 0, MaxLen)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if _, buf, err = Decode(buf, wire); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Decode allocates %v times per run, want 0", allocs)
	}
}

func TestAddress(t *testing.T) {
	tests := []struct {
		a                       Address
		board, group, bcast, ok bool
		groupNo                 int
		str                     string
	}{
		{0, false, false, true, true, 0, "@*"},
		{1, true, false, false, true, 0, "@1"},
		{223, true, false, false, true, 0, "@223"},
		{224, false, true, false, true, 1, "@g1"},
		{254, false, true, false, true, 31, "@g31"},
		{255, false, false, false, false, 0, "@invalid"},
	}
	for _, tt := range tests {
		got := []any{tt.a.IsBoard(), tt.a.IsGroup(), tt.a.IsBroadcast(), tt.a.Valid(), tt.a.Group(), tt.a.String()}
		want := []any{tt.board, tt.group, tt.bcast, tt.ok, tt.groupNo, tt.str}
		if d := cmp.Diff(got, want); d != "" {
			t.Errorf("address %d (-got +want):\n%s", tt.a, d)
		}
	}
	for n := 1; n <= MaxGroup; n++ {
		if a := GroupAddress(n); !a.IsGroup() || a.Group() != n {
			t.Errorf("GroupAddress(%d) = %d", n, a)
		}
	}
	for _, n := range []int{-1, 0, 32} {
		if a := GroupAddress(n); a != Invalid {
			t.Errorf("GroupAddress(%d) = %d, want Invalid", n, a)
		}
	}
	groups := []uint8{2, 31}
	reach := []struct {
		to   Address
		want bool
	}{
		{Broadcast, true}, {7, true}, {8, false}, {GroupAddress(2), true},
		{GroupAddress(31), true}, {GroupAddress(3), false}, {Invalid, false},
	}
	for _, r := range reach {
		if got := r.to.Reaches(7, groups); got != r.want {
			t.Errorf("%v reaches board 7 in groups %v = %v, want %v", r.to, groups, got, r.want)
		}
	}
}

func TestTypeNames(t *testing.T) {
	tests := []struct {
		t    Type
		want string
	}{
		{TypePing, "PING"}, {TypeVersion, "VERSION"}, {TypeStatus, "STATUS"},
		{TypeScene, "SCENE"}, {TypeEnd, "END"}, {TypeScreenOff, "SCREEN_OFF"},
		{TypeColour, "COLOUR"}, {TypeBacklight, "BACKLIGHT"}, {TypeLEDs, "LEDS"},
		{TypeHolo, "HOLO"}, {TypeEventsSet, "EVENTS_SET"}, {TypeEventsGet, "EVENTS_GET"},
		{TypeEvent, "EVENT"}, {TypeRestart, "RESTART"},
		{TypePing.Reply(), "PING_REPLY"}, {0xFF, "RESTART_REPLY"},
		{0x63, "Type(0x63)"}, {TypeEvent.Reply(), "Type(0xF0)"},
	}
	for _, tt := range tests {
		if got := tt.t.String(); got != tt.want {
			t.Errorf("Type(%#x).String() = %q, want %q", uint8(tt.t), got, tt.want)
		}
	}
	if TypeStatus.Reply() != 0x83 || !Type(0x83).IsReply() || Type(0x83).Request() != TypeStatus {
		t.Error("reply bit arithmetic")
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		code string
		want Status
	}{
		{"", StatusOK},
		{"bad_request", StatusBadRequest},
		{"not_found", StatusNotFound},
		{"unknown_scene", StatusNotFound},
		{"not_playable", StatusNotPlayable},
		{"not_ready", StatusNotReady},
		{"busy", StatusBusy},
		{"no_space", StatusFailed},
		{"conflict", StatusFailed},
	}
	for _, tt := range tests {
		if got := StatusForCode(tt.code); got != tt.want {
			t.Errorf("StatusForCode(%q) = %v, want %v", tt.code, got, tt.want)
		}
	}
	back := []struct {
		s    Status
		code string
		http int
		str  string
	}{
		{StatusOK, "", 200, "ok"},
		{StatusBadRequest, "bad_request", 400, "bad request"},
		{StatusNotFound, "not_found", 404, "not found"},
		{StatusNotPlayable, "not_playable", 422, "not playable"},
		{StatusNotReady, "not_ready", 409, "not ready"},
		{StatusBusy, "busy", 409, "busy"},
		{StatusFailed, "failed", 500, "failed"},
		{StatusUnknownType, "unknown_type", 404, "unknown type"},
		{StatusWorking, "still_working", 202, "still working"},
		{0x42, "failed", 500, "Status(0x42)"},
	}
	for _, tt := range back {
		got := []any{tt.s.Code(), tt.s.HTTPStatus(), tt.s.String()}
		if d := cmp.Diff(got, []any{tt.code, tt.http, tt.str}); d != "" {
			t.Errorf("status %d (-got +want):\n%s", tt.s, d)
		}
	}
	// Every status that has a code of the board's API survives the trip.
	for s := StatusOK; s <= StatusBusy; s++ {
		if got := StatusForCode(s.Code()); got != s {
			t.Errorf("StatusForCode(%v.Code()) = %v", s, got)
		}
	}
}

func TestFrameString(t *testing.T) {
	got := Frame{Addr: GroupAddress(2), Seq: 9, Type: TypeColour, Payload: []byte{1, 0xAB, 3}}.String()
	if want := "@g2 #9 COLOUR [01 AB 03]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
