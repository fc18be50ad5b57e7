// Package crc16 computes CRC-16/CCITT-FALSE, the checksum that closes every
// native frame and I2C command or result of the host link.
//
// Parameters: polynomial 0x1021, initial value 0xFFFF, input and output not
// reflected, no final XOR. The check value over the ASCII bytes "123456789"
// is 0x29B1. On the wire the checksum is sent little-endian.
package crc16

// Init is the register value a checksum starts from.
const Init uint16 = 0xFFFF

// Poly is the generator polynomial, without its top bit.
const Poly uint16 = 0x1021

var table = makeTable()

func makeTable() *[256]uint16 {
	var t [256]uint16
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ Poly
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return &t
}

// Update continues a checksum over b.
func Update(crc uint16, b []byte) uint16 {
	for _, v := range b {
		crc = crc<<8 ^ table[byte(crc>>8)^v]
	}
	return crc
}

// Checksum returns the CRC-16/CCITT-FALSE of b.
func Checksum(b []byte) uint16 { return Update(Init, b) }

// Append appends the checksum of b to b, little-endian, as frames carry it.
func Append(b []byte) []byte {
	c := Checksum(b)
	return append(b, byte(c), byte(c>>8))
}

// Valid reports whether b ends with the little-endian checksum of the bytes
// before it. A slice shorter than three bytes is never valid.
func Valid(b []byte) bool {
	if len(b) < 3 {
		return false
	}
	n := len(b) - 2
	return Checksum(b[:n]) == uint16(b[n])|uint16(b[n+1])<<8
}
