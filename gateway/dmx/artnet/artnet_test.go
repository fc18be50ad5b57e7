package artnet

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Vectors laid out field by field from the package doc's tables.
const (
	artID   = "4172742d4e657400"
	dmxVec  = artID + "|0050|000e|07 00 12 03|0004|ff 10 20 30"
	pollVec = artID + "|0020|000e|02 10"
	syncVec = artID + "|0052|000e|00 00"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Packet
		err  error
	}{
		{"dmx", dmxVec, Packet{Op: OpDmx, Dmx: &Dmx{Sequence: 7, PortAddress: 0x0312, Slots: []byte{0xff, 0x10, 0x20, 0x30}}}, nil},
		{"dmx with trailing bytes", dmxVec + "0000", Packet{Op: OpDmx, Dmx: &Dmx{Sequence: 7, PortAddress: 0x0312, Slots: []byte{0xff, 0x10, 0x20, 0x30}}}, nil},
		{"poll", pollVec, Packet{Op: OpPoll, Poll: &Poll{Flags: 2, DiagPriority: 0x10}}, nil},
		{"poll of a newer version, longer", pollVec + "0000000000", Packet{Op: OpPoll, Poll: &Poll{Flags: 2, DiagPriority: 0x10}}, nil},
		{"sync", syncVec, Packet{Op: OpSync}, nil},
		{"odd length", artID + "|0050|000e|07 00 12 03|0003|ff 10 20 30", Packet{}, ErrMalformed},
		{"length beyond", artID + "|0050|000e|07 00 12 03|0006|ff 10 20 30", Packet{}, ErrMalformed},
		{"net high bit", artID + "|0050|000e|07 00 12 83|0002|ff 10", Packet{}, ErrMalformed},
		{"old version", artID + "|0050|000d|07 00 12 03|0002|ff 10", Packet{}, ErrMalformed},
		{"not art-net", "4172742d4e657401|0050|000e", Packet{}, ErrMalformed},
		{"other op", artID + "|0060|000e|00", Packet{}, ErrIgnored},
		{"poll reply", artID + "|0021|7f000001", Packet{}, ErrIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Dmx
			var p Poll
			got, err := Decode(hx(t, tt.in), &d, &p)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	b, err := AppendDmx(nil, Dmx{Sequence: 7, PortAddress: 0x0312, Slots: []byte{0xff, 0x10, 0x20, 0x30}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, hx(t, dmxVec)); diff != "" {
		t.Error(diff)
	}
	odd, _ := AppendDmx(nil, Dmx{Slots: []byte{1, 2, 3}})
	if n := len(odd) - dmxHeader; n != 4 || odd[17] != 4 {
		t.Errorf("odd slots padded to %d", n)
	}
	if diff := cmp.Diff(AppendPoll(nil, Poll{Flags: 2, DiagPriority: 0x10}), hx(t, pollVec)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff(AppendSync(nil), hx(t, syncVec)); diff != "" {
		t.Error(diff)
	}
}

func TestPollReply(t *testing.T) {
	r := PollReply{IP: netip.MustParseAddr("10.1.2.3"), Firmware: 3, ShortName: "holo-gateway",
		LongName: "holofleet gateway demo", Report: "#0001 [0001] ok", Ports: []uint16{0x0120, 0x0121}, MAC: [6]byte{1, 2, 3, 4, 5, 6}}
	b := AppendPollReply(nil, r)
	if len(b) != PollReplyLen {
		t.Fatalf("%d bytes", len(b))
	}
	// Fixed fields at their offsets.
	for _, f := range []struct {
		off  int
		want string
	}{{0, artID + "0021"}, {10, "0a010203"}, {14, "3619"}, {18, "0102"}, {26, hex.EncodeToString([]byte("holo-gateway"))},
		{172, "0002"}, {174, "8080"}, {190, "0001"}, {201, "010203040506"}, {212, "08"}} {
		want := hx(t, f.want)
		if got := b[f.off : f.off+len(want)]; !cmp.Equal(got, want) {
			t.Errorf("offset %d: %x, want %x", f.off, got, want)
		}
	}
	got, err := DecodePollReply(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, r, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{dmxVec, pollVec, syncVec} {
		f.Add(hx(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Dmx
		var p Poll
		pk, err := Decode(b, &d, &p)
		if err != nil || pk.Dmx == nil {
			return
		}
		again, err := AppendDmx(nil, *pk.Dmx)
		if err != nil {
			t.Fatal(err)
		}
		var d2 Dmx
		pk2, err := Decode(again, &d2, &p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pk2, pk); diff != "" {
			t.Fatalf("(-got +want)\n%s", diff)
		}
	})
}

func FuzzDecodePollReply(f *testing.F) {
	f.Add(AppendPollReply(nil, PollReply{ShortName: "x", Ports: []uint16{1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodePollReply(b)
		if err != nil {
			return
		}
		if _, err := DecodePollReply(AppendPollReply(nil, r)); err != nil {
			t.Fatal(err)
		}
	})
}
