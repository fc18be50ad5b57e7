package i2creg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/frame"
)

// hx turns a commented hex listing into bytes: everything after // on a
// line is a comment, whitespace is ignored.
func hx(s string) []byte {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		panic(err)
	}
	return out
}

func pad(b []byte, n int) []byte { return append(b, bytes.Repeat([]byte{Pad}, n-len(b))...) }

var commands = []struct {
	name string
	raw  []byte
	cmd  Command
	req  frame.Request
}{
	{"PING", hx(`
		01          // seq 1
		01          // PING
		1F 3E       // crc16
	`), Command{Seq: 1, Type: frame.TypePing}, frame.PingRequest{}},
	{"STATUS", hx(`
		02 03       // seq 2, STATUS
		0E 4B       // crc16
	`), Command{Seq: 2, Type: frame.TypeStatus}, frame.StatusRequest{}},
	{"SCENE", hx(`
		03 10       // seq 3, SCENE
		05          // slot 5
		1A C6       // crc16
	`), Command{Seq: 3, Type: frame.TypeScene, Payload: []byte{5}}, frame.SceneRequest{Slot: 5}},
	{"LEDS", hx(`
		04 30       // seq 4, LEDS
		04          // mode flicker
		FF 00 00    // red
		19          // brightness 25
		02          // flags: new colour
		79 A2       // crc16
	`), Command{Seq: 4, Type: frame.TypeLEDs, Payload: hx("04 FF 00 00 19 02")},
		frame.LEDsRequest{Mode: frame.LEDFlicker, R: 0xFF, Brightness: 25, Flags: frame.LEDNewColour}},
	{"HOLO", hx(`
		05 40       // seq 5, HOLO
		06          // motion scan
		00 00       // x, y: unused
		E8 03       // duration_ms 1000
		1E          // range 30
		02          // count 2
		0C 60       // crc16
	`), Command{Seq: 5, Type: frame.TypeHolo, Payload: hx("06 00 00 E8 03 1E 02")},
		frame.HoloRequest{Motion: frame.MotionScan, DurationMS: 1000, Range: 30, Count: 2}},
	{"EVENTS_SET", hx(`
		06 50       // seq 6, EVENTS_SET
		1F          // kinds: all five
		01          // push (means nothing on I2C)
		FB FE       // crc16
	`), Command{Seq: 6, Type: frame.TypeEventsSet, Payload: hx("1F 01")},
		frame.EventsSetRequest{Kinds: frame.MaskAll, Push: true}},
	{"RESTART", hx(`
		07 7F       // seq 7, RESTART
		E0 0B       // crc16
	`), Command{Seq: 7, Type: frame.TypeRestart}, frame.RestartRequest{}},
	{"unknown type", hx(`
		08 63       // seq 8, type 0x63: the board answers unknown type
		AA BB       // payload
		3D 27       // crc16
	`), Command{Seq: 8, Type: 0x63, Payload: hx("AA BB")}, nil},
}

func TestCommands(t *testing.T) {
	for _, tt := range commands {
		t.Run(tt.name, func(t *testing.T) {
			var got Command
			if err := got.UnmarshalBinary(tt.raw); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(got, tt.cmd, cmpBytes); d != "" {
				t.Errorf("decode (-got +want):\n%s", d)
			}
			enc, err := tt.cmd.AppendBinary([]byte{0xEE})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(enc, append([]byte{0xEE}, tt.raw...)); d != "" {
				t.Errorf("encode (-got +want):\n%s", d)
			}
			if tt.req == nil {
				return
			}
			enc, err = AppendCommand(nil, tt.cmd.Seq, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(enc, tt.raw); d != "" {
				t.Errorf("AppendCommand (-got +want):\n%s", d)
			}
			req, err := frame.ParseRequest(got.Frame(DefaultAddress))
			if err != nil {
				t.Fatal(err)
			}
			if r, ok := req.(frame.Request); !ok || r.Type() != tt.cmd.Type {
				t.Errorf("ParseRequest gave %T", req)
			}
		})
	}
}

var cmpBytes = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

var results = []struct {
	name   string
	raw    []byte // what a read returns, padding included
	result Result
	body   frame.Message // typed body, nil when none
}{
	{"PING", hx(`
		01          // seq 1
		81          // PING reply
		00          // ok
		00          // pending 0
		01          // protocol 1
		3C 00 00 00 // uptime 60 s
		89 80       // crc16
	`), Result{Seq: 1, Type: 0x81, Payload: hx("01 3C 00 00 00")}, &frame.PingReply{Protocol: 1, UptimeS: 60}},
	{"STATUS", hx(`
		02 83       // seq 2, STATUS reply
		00 03       // ok, pending 3
		03 00 FF FF 00 01 64 32 0A 00 00 02 // image, no scene, hold, solid, 100 %, 50 %, seq 10, holo ready
		0B 57       // crc16
	`), Result{Seq: 2, Type: 0x83, Pending: 3, Payload: hx("03 00 FF FF 00 01 64 32 0A 00 00 02")},
		&frame.StatusReply{Block: frame.StatusBlock{Showing: frame.ShowingImage, Remaining: frame.NoRemaining,
			LEDs: frame.LEDSolid, Backlight: 100, Brightness: 50, Seq: 10, Flags: frame.FlagHoloReady}}},
	{"still working", hx(`
		03 90       // seq 3, SCENE reply
		FE          // still working: read again
		00          // pending 0
		EB 57       // crc16
	`), Result{Seq: 3, Type: 0x90, Status: frame.StatusWorking}, nil},
	{"SCENE ok", hx(`
		03 90 00 00 // seq 3, SCENE reply, ok, pending 0
		25 67       // crc16
	`), Result{Seq: 3, Type: 0x90}, &frame.Empty{}},
	{"SCENE not found", hx(`
		03 90 02 01 // seq 3, SCENE reply, not found, pending 1
		66 11       // crc16
	`), Result{Seq: 3, Type: 0x90, Status: frame.StatusNotFound, Pending: 1}, nil},
	{"EVENTS_SET", hx(`
		06 D0 00 00 // seq 6, EVENTS_SET reply, ok, pending 0
		0A 00       // seq 10
		D8 5B       // crc16
	`), Result{Seq: 6, Type: 0xD0, Payload: hx("0A 00")}, &frame.EventsSetReply{Seq: 10}},
	{"VERSION", hx(`
		09 82 00 00 // seq 9, VERSION reply, ok, pending 0
		32 2E 30 2E 31 2D 72 63 31 // "2.0.1-rc1"
		50 97       // crc16
	`), Result{Seq: 9, Type: 0x82, Payload: []byte("2.0.1-rc1")}, &frame.VersionReply{Version: "2.0.1-rc1"}},
	{"unknown type", hx(`
		08 E3 07 00 // seq 8, reply to 0x63, unknown type, pending 0
		F5 61       // crc16
	`), Result{Seq: 8, Type: 0xE3, Status: frame.StatusUnknownType}, nil},
}

func TestResults(t *testing.T) {
	for _, tt := range results {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := tt.result.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(enc, tt.raw); d != "" {
				t.Errorf("encode (-got +want):\n%s", d)
			}
			h := tt.result.Header()
			var body frame.Message
			if tt.body != nil {
				body = tt.body
			}
			enc, err = AppendResult(nil, tt.result.Seq, tt.result.Type.Request(), h, body)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(enc, tt.raw); d != "" {
				t.Errorf("AppendResult (-got +want):\n%s", d)
			}
			// Read back exactly, and as a host reads it: 56 bytes with padding.
			for _, in := range [][]byte{tt.raw, pad(bytes.Clone(tt.raw), MaxResultLen)} {
				var got Result
				if err := got.UnmarshalBinary(in); err != nil {
					t.Fatalf("decode %d bytes: %v", len(in), err)
				}
				if d := cmp.Diff(got, tt.result, cmpBytes); d != "" {
					t.Errorf("decode %d bytes (-got +want):\n%s", len(in), d)
				}
				if tt.body == nil {
					continue
				}
				b, err := frame.NewReplyBody(got.Type)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.UnmarshalBinary(got.Payload); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(b, tt.body); d != "" {
					t.Errorf("body (-got +want):\n%s", d)
				}
			}
		})
	}
}

func TestRegisters(t *testing.T) {
	statusRaw := hx(`
		01                                  // protocol 1
		04 0C 32 00 03 04 5A 14 FF 00 00 03 // clip, scene 12, 5.0 s, wag, flicker, 90 %, 20 %, seq 255, ok, touch + ready
		02                                  // pending 2
	`)
	wantStatus := StatusReg{Protocol: 1, Pending: 2, Block: frame.StatusBlock{
		Showing: frame.ShowingClip, Scene: 12, Remaining: 50, Holo: frame.HoloWag, LEDs: frame.LEDFlicker,
		Backlight: 90, Brightness: 20, Seq: 255, Flags: frame.FlagTouch | frame.FlagHoloReady,
	}}
	var st StatusReg
	if err := st.UnmarshalBinary(statusRaw); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(st, wantStatus); d != "" {
		t.Errorf("STATUS decode (-got +want):\n%s", d)
	}
	if enc, err := wantStatus.AppendBinary(nil); err != nil || !bytes.Equal(enc, statusRaw) {
		t.Errorf("STATUS encode = % X, %v", enc, err)
	}

	versionRaw := hx(`
		31 2E 34 2E 30                // "1.4.0"
		00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 // zero padding to 32
	`)
	var v Version
	if err := v.UnmarshalBinary(versionRaw); err != nil || v != "1.4.0" {
		t.Errorf("VERSION decode = %q, %v", v, err)
	}
	if enc, err := Version("1.4.0").AppendBinary(nil); err != nil || !bytes.Equal(enc, versionRaw) {
		t.Errorf("VERSION encode = % X, %v", enc, err)
	}
	full := Version("0123456789abcdef0123456789abcdef")
	enc, err := full.AppendBinary(nil)
	if err != nil || len(enc) != VersionLen {
		t.Fatalf("32-byte version: % X, %v", enc, err)
	}
	if err := v.UnmarshalBinary(enc); err != nil || v != full {
		t.Errorf("32-byte version back = %q, %v", v, err)
	}

	eventRaw := hx(`
		03          // touch
		10 00       // seq 16
		00 0A 14    // down at 10,20
		00 00       // unused
	`)
	var rec frame.Record
	if err := rec.UnmarshalBinary(eventRaw); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rec, frame.Record{Kind: frame.KindTouch, Seq: 16, X: 10, Y: 20}); d != "" {
		t.Errorf("EVENT (-got +want):\n%s", d)
	}
	if err := rec.UnmarshalBinary(make([]byte, EventLen)); err != nil || rec.Kind != frame.KindNone {
		t.Errorf("empty EVENT register: %+v, %v", rec, err)
	}
}

func TestRegisterErrors(t *testing.T) {
	badCRC := bytes.Clone(commands[0].raw)
	badCRC[2] ^= 0x80
	tests := []struct {
		name string
		m    interface{ UnmarshalBinary([]byte) error }
		in   []byte
		want error
	}{
		{"command short", &Command{}, hx("01 01 00"), frame.ErrShort},
		{"command long", &Command{}, make([]byte, MaxCommandLen+1), frame.ErrTooLong},
		{"command bad crc", &Command{}, badCRC, frame.ErrBadCRC},
		{"command EVENTS_GET", &Command{}, hx("01 51 00 00 8A 9B"), ErrEventsGet},
		{"result short", &Result{}, hx("01 81 00 00 00"), frame.ErrShort},
		{"result not a reply", &Result{}, hx("01 01 00 00 00 00"), ErrNotReply},
		{"result idle bus", &Result{}, pad(nil, MaxResultLen), frame.ErrBadCRC},
		{"result bad crc", &Result{}, pad(hx("01 81 00 00 01 3C 00 00 00 00 00"), MaxResultLen), frame.ErrBadCRC},
		{"status short", &StatusReg{}, make([]byte, StatusLen-1), frame.ErrShort},
		{"status backlight 200", &StatusReg{}, hx("01 00 00 FF FF 00 00 C8 00 00 00 00 00 00"), frame.ErrRange},
		{"version short", new(Version), make([]byte, VersionLen-1), frame.ErrShort},
		{"version not ASCII", new(Version), append([]byte{0x80}, make([]byte, 31)...), frame.ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.UnmarshalBinary(tt.in); !errors.Is(err, tt.want) {
				t.Errorf("UnmarshalBinary(% X) = %v, want %v", tt.in, err, tt.want)
			}
		})
	}

	if _, err := (Command{Type: frame.TypeEventsGet}).AppendBinary(nil); !errors.Is(err, ErrEventsGet) {
		t.Errorf("encode EVENTS_GET = %v", err)
	}
	if _, err := AppendCommand(nil, 1, frame.EventsGetRequest{}); !errors.Is(err, ErrEventsGet) {
		t.Errorf("AppendCommand EVENTS_GET = %v", err)
	}
	if _, err := (Command{Type: frame.TypeColour, Payload: make([]byte, 49)}).AppendBinary(nil); !errors.Is(err, frame.ErrTooLong) {
		t.Errorf("encode 49-byte command = %v", err)
	}
	if _, err := (Result{Type: frame.TypePing}).AppendBinary(nil); !errors.Is(err, ErrNotReply) {
		t.Errorf("encode result without reply bit = %v", err)
	}
	if _, err := (Result{Type: 0x81, Payload: make([]byte, MaxResultBody+1)}).AppendBinary(nil); !errors.Is(err, frame.ErrTooLong) {
		t.Errorf("encode long result = %v", err)
	}
	if _, err := Version("0123456789abcdef0123456789abcdefX").AppendBinary(nil); !errors.Is(err, frame.ErrTooLong) {
		t.Errorf("encode 33-byte version = %v", err)
	}
	if _, err := (StatusReg{Block: frame.StatusBlock{Brightness: 101}}).AppendBinary(nil); !errors.Is(err, frame.ErrRange) {
		t.Errorf("encode bad status = %v", err)
	}
	if RegResult.String() != "RESULT" || Register(0x99).String() != "Register(0x99)" {
		t.Error("register names")
	}
}
