package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Raw is a segment to build: its load address and data. Data whose length
// is not a multiple of 4 is zero-padded.
type Raw struct {
	LoadAddr uint32
	Data     []byte
}

// Build lays out an image from a header and segments: it sets the segment
// count, pads each segment to 4 bytes, adds the padding and checksum, and
// appends the SHA-256 when h.HashAppended is 1. The header's other fields
// are written as given, so tests can build wrong images on purpose.
func Build(h Header, segs []Raw) ([]byte, error) {
	if len(segs) == 0 || len(segs) > MaxSegments {
		return nil, fmt.Errorf("%w: %d segments", ErrSegments, len(segs))
	}
	h.SegmentCount = byte(len(segs))
	size := HeaderSize + HashSize + 16
	for _, s := range segs {
		size += SegmentHeaderSize + len(s.Data) + 3
	}
	b := h.Append(make([]byte, 0, size))
	var acc uint64
	for _, s := range segs {
		n := (len(s.Data) + 3) &^ 3
		b = binary.LittleEndian.AppendUint32(b, s.LoadAddr)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		b = append(b, s.Data...)
		b = append(b, make([]byte, n-len(s.Data))...)
		acc = xorFold(acc, s.Data)
	}
	b = append(b, make([]byte, padLen(int64(len(b))))...)
	b = append(b, fold(acc)^ChecksumSeed)
	if h.HashAppended == 1 {
		sum := sha256.Sum256(b)
		b = append(b, sum[:]...)
	}
	return b, nil
}

// HostHeader is the header of a host image: chip ChipHost, revision 0 and
// later, SHA-256 appended.
func HostHeader() Header {
	return Header{Magic: Magic, SPIMode: 2, SPISpeedSize: 0x20, Entry: Entry, WPPin: 0xEE,
		ChipID: ChipHost, MaxChipRevFull: 0xFFFF, HashAppended: 1}
}

// Pack builds a host image carrying the executable exe, described by d. A
// zero d.ELFSHA256 is filled with the executable's SHA-256.
func Pack(d Desc, exe []byte) ([]byte, error) {
	if d.ELFSHA256 == ([32]byte{}) {
		d.ELFSHA256 = sha256.Sum256(exe)
	}
	desc, err := d.Append(nil)
	if err != nil {
		return nil, err
	}
	return Build(HostHeader(), []Raw{{LoadAddr: LoadDesc, Data: desc}, {LoadAddr: LoadPayload, Data: exe}})
}

// PayloadIndex is the segment of a host image that holds the executable.
const PayloadIndex = 1

// WithRevoke returns img with its description asking to revoke keys (at
// most MaxRevoke; none clears the request), the checksum and appended
// SHA-256 made again. The image must not be signed yet: the request is
// part of the signed content.
func WithRevoke(img []byte, keys []KeyDigest) ([]byte, error) {
	return withDesc(img, "revocations", func(d *Desc) { d.Revoke = keys })
}

// WithSecureVersion returns img with secure version v in its description
// (anti-rollback), as WithRevoke does: only before the first signature.
func WithSecureVersion(img []byte, v uint32) ([]byte, error) {
	return withDesc(img, "the secure version", func(d *Desc) { d.SecureVersion = v })
}

func withDesc(img []byte, what string, edit func(*Desc)) ([]byte, error) {
	im, err := Inspect(img)
	if err != nil {
		return nil, err
	}
	if im.Signed() {
		return nil, fmt.Errorf("%w: the image is signed already; %s go in before the first signature", ErrField, what)
	}
	d := im.Desc
	edit(&d)
	desc, err := d.Append(nil)
	if err != nil {
		return nil, err
	}
	segs := make([]Raw, len(im.Segments))
	for i, s := range im.Segments {
		segs[i] = Raw{LoadAddr: s.LoadAddr, Data: img[s.Offset : s.Offset+int64(s.Len)]}
	}
	first := bytes.Clone(segs[0].Data)
	copy(first, desc)
	segs[0].Data = first
	return Build(im.Header, segs)
}
