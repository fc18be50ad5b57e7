package sacn

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hexPacket joins hex fields (spaces and | are decoration).
func hexPacket(t testing.TB, fields ...string) []byte {
	t.Helper()
	s := strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(strings.Join(fields, ""))
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var cid = "00112233445566778899aabbccddeeff"

func name64(s string) string {
	return hex.EncodeToString([]byte(s)) + strings.Repeat("00", 64-len(s))
}

// dataVector is a data packet of 4 slots laid out field by field from
// the standard's table (package doc).
func dataVector(t testing.TB, prio, seq, opts string, slots string) []byte {
	n := (len(slots) / 2)
	total := 126 + n
	return hexPacket(t,
		"0010", "0000", "4153432d45312e3137000000", // preamble, postamble, ACN id
		pduHex(total-16), "00000004", cid, // root
		pduHex(total-38), "00000002", name64("desk"), prio, "0007", seq, opts, "0001", // framing: sync addr 7, universe 1
		pduHex(total-115), "02", "a1", "0000", "0001", hex16(1+n), "00", slots) // DMP
}

func pduHex(n int) string { return hex16(0x7000 | n) }
func hex16(n int) string {
	return hex.EncodeToString([]byte{byte(n >> 8), byte(n)})
}

var syncVector = "0010 0000 4153432d45312e3137000000 | 7021 00000008 " + cid + "| 700b 00000001 | 2a 0007 0000"

func TestDecode(t *testing.T) {
	var c [16]byte
	copy(c[:], hexPacket(t, cid))
	tests := []struct {
		name string
		in   []byte
		want Packet
		err  error
	}{
		{"data", dataVector(t, "64", "05", "00", "ff102030"), Packet{Data: &Data{CID: c, SourceName: "desk", Priority: 100,
			SyncAddr: 7, Sequence: 5, Universe: 1, Slots: []byte{0xff, 0x10, 0x20, 0x30}}}, nil},
		{"terminated preview", dataVector(t, "c8", "ff", "c0", ""), Packet{Data: &Data{CID: c, SourceName: "desk", Priority: 200,
			SyncAddr: 7, Sequence: 255, Options: 0xc0, Universe: 1, Slots: []byte{}}}, nil},
		{"sync", hexPacket(t, syncVector), Packet{Sync: &Sync{CID: c, Sequence: 0x2a, SyncAddr: 7}}, nil},
		{"priority 201", dataVector(t, "c9", "00", "00", "00"), Packet{}, ErrMalformed},
		{"short", hexPacket(t, "0010"), Packet{}, ErrMalformed},
		{"truncated", dataVector(t, "64", "00", "00", "0102")[:127], Packet{}, ErrMalformed},
		{"not acn", hexPacket(t, strings.Replace(syncVector, "4153", "4154", 1)), Packet{}, ErrMalformed},
		{"discovery", hexPacket(t, strings.Replace(syncVector, "700b 00000001", "700b 00000002", 1)), Packet{}, ErrIgnored},
		{"bad root length", hexPacket(t, strings.Replace(syncVector, "7021", "7022", 1)), Packet{}, ErrMalformed},
		{"bad flags", hexPacket(t, strings.Replace(syncVector, "700b", "600b", 1)), Packet{}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Data
			var s Sync
			got, err := Decode(tt.in, &d, &s)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
			if err != nil {
				return
			}
			var again []byte
			if got.Data != nil {
				again, _ = AppendData(nil, *got.Data)
			} else {
				again = AppendSync(nil, *got.Sync)
			}
			if diff := cmp.Diff(again, tt.in); diff != "" {
				t.Errorf("encode (-got +want)\n%s", diff)
			}
		})
	}
}

func TestSequenceOK(t *testing.T) {
	for _, tt := range []struct {
		last, next uint8
		ok         bool
	}{{0, 1, true}, {255, 0, true}, {10, 10, false}, {10, 9, false}, {10, 246, true}, {10, 247, false}, {10, 200, true}} {
		if got := SequenceOK(tt.last, tt.next); got != tt.ok {
			t.Errorf("SequenceOK(%d, %d) = %v", tt.last, tt.next, got)
		}
	}
}

func TestMulticastAddr(t *testing.T) {
	if got := MulticastAddr(0x0102).String(); got != "239.255.1.2" {
		t.Error(got)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(dataVector(f, "64", "05", "00", "ff102030"))
	f.Add(hexPacket(f, syncVector))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Data
		var s Sync
		p, err := Decode(b, &d, &s)
		if err != nil {
			return
		}
		var again []byte
		if p.Data != nil {
			again, err = AppendData(nil, *p.Data)
			if err != nil {
				t.Fatal(err)
			}
			var d2 Data
			var s2 Sync
			p2, err := Decode(again, &d2, &s2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(p2, p); diff != "" {
				t.Fatalf("round trip (-got +want)\n%s", diff)
			}
			return
		}
		again = AppendSync(nil, *p.Sync)
		var d2 Data
		var s2 Sync
		if p2, err := Decode(again, &d2, &s2); err != nil || *p2.Sync != *p.Sync {
			t.Fatalf("sync round trip: %v", err)
		}
	})
}
