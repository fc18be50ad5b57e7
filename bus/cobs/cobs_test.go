package cobs

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

var vectors = []struct {
	name      string
	raw, wire []byte
}{
	{"empty", nil, h("01")},
	{"one zero", h("00"), h("01 01")},
	{"two zeros", h("00 00"), h("01 01 01")},
	{"zero inside", h("11 22 00 33"), h("03 11 22 02 33")},
	{"no zero", h("11 22 33 44"), h("05 11 22 33 44")},
	{"trailing zero", h("11 00"), h("02 11 01")},
	{"254 non-zero", bytes.Repeat([]byte{1}, 254), append(h("ff"), bytes.Repeat([]byte{1}, 254)...)},
	{"255 non-zero", bytes.Repeat([]byte{1}, 255), append(append(h("ff"), bytes.Repeat([]byte{1}, 254)...), 0x02, 0x01)},
	{"254 then zero", append(bytes.Repeat([]byte{1}, 254), 0), append(append(h("ff"), bytes.Repeat([]byte{1}, 254)...), 0x01, 0x01)},
}

func TestEncodeDecode(t *testing.T) {
	for _, tt := range vectors {
		t.Run(tt.name, func(t *testing.T) {
			got := Encode(tt.raw)
			if diff := cmp.Diff(got, tt.wire); diff != "" {
				t.Errorf("Encode (-got +want)\n%s", diff)
			}
			back, err := Decode(tt.wire)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(back, tt.raw, cmpBytes); diff != "" {
				t.Errorf("Decode (-got +want)\n%s", diff)
			}
		})
	}
}

var cmpBytes = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"zero code", h("00"), ErrZero},
		{"zero in run", h("03 11 00"), ErrZero},
		{"short run", h("05 11 22"), ErrTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte{9}
			got, err := AppendDecode(dst, tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if len(got) != 1 {
				t.Fatalf("dst grew on error: % x", got)
			}
		})
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, v := range vectors {
		f.Add(v.raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		enc := Encode(raw)
		if bytes.IndexByte(enc, 0) >= 0 {
			t.Fatalf("encoded form has a zero: % x", enc)
		}
		if len(enc) > MaxEncodedLen(len(raw)) {
			t.Fatalf("encoded %d bytes, bound %d", len(enc), MaxEncodedLen(len(raw)))
		}
		dec, err := Decode(enc)
		if err != nil || !bytes.Equal(dec, raw) {
			t.Fatalf("round trip: % x -> % x (%v)", raw, dec, err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, v := range vectors {
		f.Add(v.wire)
	}
	f.Add(h("00"))
	f.Fuzz(func(t *testing.T, wire []byte) {
		dec, err := Decode(wire)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode to something that decodes the same.
		again, err := Decode(Encode(dec))
		if err != nil || !bytes.Equal(again, dec) {
			t.Fatalf("re-encode mismatch for % x", wire)
		}
	})
}

func BenchmarkEncodeDecode(b *testing.B) {
	raw := h("05 01 03 00 00 11 22 33 44 55 66 77 88 99 aa bb")
	enc := make([]byte, 0, 64)
	dec := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		enc = Append(enc[:0], raw)
		var err error
		dec, err = AppendDecode(dec[:0], enc)
		if err != nil {
			b.Fatal(err)
		}
	}
}
