// Package cobs implements Consistent Overhead Byte Stuffing, which lets the
// host link use 0x00 as an unambiguous frame delimiter.
//
// Encoding splits the input at every zero byte. Each run of up to 254
// non-zero bytes is written after a code byte equal to the run length plus
// one; a code byte of 0xFF means a run of 254 with no zero after it. The
// encoded form never contains 0x00, and its length is at most
// len(src) + len(src)/254 + 1. On the wire a frame is
// 0x00 COBS(bytes) 0x00; the delimiters are not part of what this package
// encodes or decodes.
//
// Invariants, fuzzed in the tests: Decode(Encode(x)) == x for every x, and
// Encode's output contains no zero byte.
package cobs

import "errors"

// Errors returned by Decode.
var (
	// ErrZero means the encoded input contained a 0x00 byte, which only a
	// delimiter may be.
	ErrZero = errors.New("cobs: zero byte inside encoded data")
	// ErrTruncated means a code byte promised more bytes than followed.
	ErrTruncated = errors.New("cobs: code byte runs past the end")
)

// MaxEncodedLen returns the largest encoded size of n input bytes.
func MaxEncodedLen(n int) int { return n + n/254 + 1 }

// Append appends the encoding of src to dst and returns the extended slice.
// It allocates only when dst lacks capacity.
func Append(dst, src []byte) []byte {
	codeAt := len(dst)
	dst = append(dst, 0) // placeholder for the first code byte
	code := byte(1)
	for i, b := range src {
		if b == 0 {
			dst[codeAt] = code
			codeAt = len(dst)
			dst = append(dst, 0)
			code = 1
			continue
		}
		dst = append(dst, b)
		code++
		if code == 0xFF {
			dst[codeAt] = code
			if i == len(src)-1 {
				return dst // a full run ends the data: no code byte follows
			}
			codeAt = len(dst)
			dst = append(dst, 0)
			code = 1
		}
	}
	dst[codeAt] = code
	return dst
}

// Encode returns the encoding of src in a new slice.
func Encode(src []byte) []byte {
	return Append(make([]byte, 0, MaxEncodedLen(len(src))), src)
}

// AppendDecode appends the decoding of src to dst. src is the data between
// two delimiters. On error dst is returned unchanged in length.
func AppendDecode(dst, src []byte) ([]byte, error) {
	start := len(dst)
	for i := 0; i < len(src); {
		code := src[i]
		if code == 0 {
			return dst[:start], ErrZero
		}
		i++
		n := int(code) - 1
		if i+n > len(src) {
			return dst[:start], ErrTruncated
		}
		for _, b := range src[i : i+n] {
			if b == 0 {
				return dst[:start], ErrZero
			}
		}
		dst = append(dst, src[i:i+n]...)
		i += n
		if code != 0xFF && i < len(src) {
			dst = append(dst, 0)
		}
	}
	return dst, nil
}

// Decode returns the decoding of src in a new slice.
func Decode(src []byte) ([]byte, error) {
	return AppendDecode(make([]byte, 0, len(src)), src)
}
