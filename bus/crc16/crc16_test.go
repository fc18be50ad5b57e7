package crc16

import (
	"encoding/hex"
	"testing"
)

// bitwise is the textbook bit-at-a-time definition, used as the reference.
func bitwise(b []byte) uint16 {
	crc := Init
	for _, v := range b {
		crc ^= uint16(v) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ Poly
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestChecksum(t *testing.T) {
	tests := []struct {
		name string
		in   string // hex
		want uint16
	}{
		{"check value 123456789", hex.EncodeToString([]byte("123456789")), 0x29B1},
		{"empty", "", 0xFFFF},
		{"one zero byte", "00", 0xE1F0},
		{"ping to board 5 seq 1", "050101", bitwise([]byte{5, 1, 1})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := hex.DecodeString(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := Checksum(in); got != tt.want {
				t.Errorf("Checksum(%s) = %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendValid(t *testing.T) {
	b := Append([]byte("123456789"))
	if b[9] != 0xB1 || b[10] != 0x29 {
		t.Fatalf("little-endian trailer: got % x", b[9:])
	}
	if !Valid(b) {
		t.Fatal("Valid rejected a good trailer")
	}
	b[3] ^= 0x10
	if Valid(b) {
		t.Fatal("Valid accepted a flipped bit")
	}
	if Valid([]byte{1, 2}) {
		t.Fatal("Valid accepted a two-byte slice")
	}
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte("123456789"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Checksum(b), bitwise(b); got != want {
			t.Fatalf("table %#04x != bitwise %#04x", got, want)
		}
		if !Valid(Append(append([]byte(nil), b...))) && len(b) > 0 {
			t.Fatal("Append then Valid failed")
		}
	})
}

func BenchmarkChecksum64(b *testing.B) {
	buf := make([]byte, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Checksum(buf)
	}
}
