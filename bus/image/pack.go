package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
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

// PackTo writes to w the image Pack(d, exe) returns, reading the
// executable's size bytes from exe as it goes, and returns the number of
// bytes written and the SHA-256 of the whole image. It holds one small
// buffer, not the image: a board packs its own executable (tens of
// megabytes) at every start to know its factory image. A zero
// d.ELFSHA256 costs one more pass over exe.
func PackTo(w io.Writer, d Desc, exe io.ReaderAt, size int64) (int64, [HashSize]byte, error) {
	var sum [HashSize]byte
	if size < 0 || size > 1<<32-4 {
		return 0, sum, fmt.Errorf("%w: executable of %d bytes", ErrTooLarge, size)
	}
	if d.ELFSHA256 == ([32]byte{}) {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(exe, 0, size)); err != nil {
			return 0, sum, err
		}
		h.Sum(d.ELFSHA256[:0])
	}
	desc, err := d.Append(nil)
	if err != nil {
		return 0, sum, err
	}
	h := HostHeader()
	h.SegmentCount = 2
	pw := &packWriter{w: w, h: sha256.New()}
	pw.write(h.Append(nil))
	var acc uint64
	seg := func(load uint32, n int64) {
		pw.write(binary.LittleEndian.AppendUint32(nil, load))
		pw.write(binary.LittleEndian.AppendUint32(nil, uint32((n+3)&^3)))
	}
	seg(LoadDesc, int64(len(desc)))
	pw.write(desc)
	pw.write(make([]byte, (len(desc)+3)&^3-len(desc)))
	acc = xorFold(acc, desc)
	seg(LoadPayload, size)
	buf := make([]byte, 256<<10)
	for off := int64(0); off < size && pw.err == nil; {
		k, err := exe.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if k == 0 && err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return pw.n, sum, err
		}
		acc = xorFold(acc, buf[:k])
		pw.write(buf[:k])
		off += int64(k)
	}
	pw.write(make([]byte, (size+3)&^3-size))
	pw.write(make([]byte, padLen(pw.n)))
	pw.write([]byte{fold(acc) ^ ChecksumSeed})
	if h.HashAppended == 1 {
		pw.write(pw.h.Sum(nil)) // the running state goes on: the whole image's hash follows
	}
	if pw.err != nil {
		return pw.n, sum, pw.err
	}
	pw.h.Sum(sum[:0])
	return pw.n, sum, nil
}

// packWriter writes to w and hashes what it wrote, keeping the first
// error.
type packWriter struct {
	w   io.Writer
	h   hash.Hash
	n   int64
	err error
}

func (p *packWriter) write(b []byte) {
	if p.err != nil || len(b) == 0 {
		return
	}
	p.h.Write(b)
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.err = err
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
