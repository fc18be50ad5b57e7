package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Sizes and magic numbers of the format.
const (
	Magic             = 0xE9       // first byte of every image
	DescMagic         = 0xABCD5432 // first word of the application description
	HeaderSize        = 24         // image header
	SegmentHeaderSize = 8          // load address + data length
	DescSize          = 256        // application description
	EarlyCheckSize    = HeaderSize + SegmentHeaderSize + DescSize
	MaxSegments       = 16
	HashSize          = sha256.Size
	ChecksumSeed      = 0xEF
)

// SlotSize is the size of each application slot (ota_0, ota_1) of a
// board's flash, and so the largest image a board accepts. The board's
// partition table (firmware/ota/flash) is built from it; the gateway
// refuses larger images at upload. A slot holds a host executable of
// holo-board (about 15 MB with the race detector), so 48 MiB leaves room
// to grow.
const SlotSize = 48 << 20

// Chip ids and the host layout.
const (
	// ChipHost is the chip id of host builds (holo-board as an executable).
	ChipHost uint16 = 0x484F
	// LoadDesc and LoadPayload are the load addresses host images give
	// their two segments; nothing loads them, they only name the segments.
	LoadDesc    uint32 = 0x3F400020
	LoadPayload uint32 = 0x40080000
	// Entry is the entry address written into host images.
	Entry uint32 = LoadPayload
)

// Field sizes of the application description's strings.
const (
	versionLen = 32
	projectLen = 32
	timeLen    = 16
	dateLen    = 16
	idfLen     = 32
)

// Errors of reading and checking images. Every error returned by this
// package wraps one of them.
var (
	// ErrTruncated means the image ends before its structure says it does.
	ErrTruncated = errors.New("image: truncated")
	// ErrMagic means the first byte is not Magic: not an application image
	// (a bootloader, partition table or otadata file, or anything else).
	ErrMagic = errors.New("image: not an application image")
	// ErrSegments means the segment count or a segment length is impossible.
	ErrSegments = errors.New("image: bad segment table")
	// ErrDesc means the first segment does not begin with an application
	// description.
	ErrDesc = errors.New("image: no application description")
	// ErrChip means the image is built for another chip or chip revision.
	ErrChip = errors.New("image: built for another chip")
	// ErrProject means the image is built for another project.
	ErrProject = errors.New("image: built for another project")
	// ErrChecksum means the XOR checksum of the segment data does not match.
	ErrChecksum = errors.New("image: checksum mismatch")
	// ErrHash means the appended SHA-256 does not match the image.
	ErrHash = errors.New("image: appended SHA-256 mismatch")
	// ErrNoHash means the image carries no appended SHA-256, which the
	// board requires.
	ErrNoHash = errors.New("image: no appended SHA-256")
	// ErrTrailing means bytes follow the end of the image.
	ErrTrailing = errors.New("image: data after the end of the image")
	// ErrTooLarge means the image is larger than the space it must fit.
	ErrTooLarge = errors.New("image: too large")
	// ErrField means a description field is too long to pack.
	ErrField = errors.New("image: description field too long")
)

// Header is the 24-byte image header.
type Header struct {
	Magic          byte
	SegmentCount   byte
	SPIMode        byte
	SPISpeedSize   byte
	Entry          uint32
	WPPin          byte
	SPIPinDrv      [3]byte
	ChipID         uint16
	MinChipRev     byte
	MinChipRevFull uint16
	MaxChipRevFull uint16
	Reserved       [4]byte
	HashAppended   byte
}

// ParseHeader decodes the image header from the first HeaderSize bytes of b
// and checks the magic byte and segment count.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: header needs %d bytes, have %d", ErrTruncated, HeaderSize, len(b))
	}
	h.Magic, h.SegmentCount, h.SPIMode, h.SPISpeedSize = b[0], b[1], b[2], b[3]
	h.Entry = binary.LittleEndian.Uint32(b[4:])
	h.WPPin = b[8]
	copy(h.SPIPinDrv[:], b[9:12])
	h.ChipID = binary.LittleEndian.Uint16(b[12:])
	h.MinChipRev = b[14]
	h.MinChipRevFull = binary.LittleEndian.Uint16(b[15:])
	h.MaxChipRevFull = binary.LittleEndian.Uint16(b[17:])
	copy(h.Reserved[:], b[19:23])
	h.HashAppended = b[23]
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: first byte 0x%02x, want 0x%02x", ErrMagic, h.Magic, Magic)
	}
	if h.SegmentCount == 0 || h.SegmentCount > MaxSegments {
		return h, fmt.Errorf("%w: %d segments, want 1-%d", ErrSegments, h.SegmentCount, MaxSegments)
	}
	return h, nil
}

// Append appends the encoded header to b.
func (h Header) Append(b []byte) []byte {
	b = append(b, h.Magic, h.SegmentCount, h.SPIMode, h.SPISpeedSize)
	b = binary.LittleEndian.AppendUint32(b, h.Entry)
	b = append(b, h.WPPin)
	b = append(b, h.SPIPinDrv[:]...)
	b = binary.LittleEndian.AppendUint16(b, h.ChipID)
	b = append(b, h.MinChipRev)
	b = binary.LittleEndian.AppendUint16(b, h.MinChipRevFull)
	b = binary.LittleEndian.AppendUint16(b, h.MaxChipRevFull)
	b = append(b, h.Reserved[:]...)
	return append(b, h.HashAppended)
}

// Segment is one segment: its load address, and where its data lies in the
// image.
type Segment struct {
	LoadAddr uint32
	Offset   int64 // of the data, from the start of the image
	Len      uint32
}

// parseSegmentHeader decodes an 8-byte segment header.
func parseSegmentHeader(b []byte) (load, n uint32) {
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
}

// Desc is the application description.
type Desc struct {
	SecureVersion uint32
	Version       string
	Project       string
	Time          string
	Date          string
	IDF           string
	ELFSHA256     [32]byte
	// Revoke lists the keys (at most MaxRevoke) this image asks the board
	// to revoke once it has confirmed itself; see the package doc.
	Revoke []KeyDigest
}

// ParseDesc decodes the 256-byte application description.
func ParseDesc(b []byte) (Desc, error) {
	var d Desc
	if len(b) < DescSize {
		return d, fmt.Errorf("%w: description needs %d bytes, have %d", ErrTruncated, DescSize, len(b))
	}
	if m := binary.LittleEndian.Uint32(b); m != DescMagic {
		return d, fmt.Errorf("%w: magic word 0x%08x, want 0x%08x", ErrDesc, m, uint32(DescMagic))
	}
	d.SecureVersion = binary.LittleEndian.Uint32(b[4:])
	d.Version = cstring(b[16 : 16+versionLen])
	d.Project = cstring(b[48 : 48+projectLen])
	d.Time = cstring(b[80 : 80+timeLen])
	d.Date = cstring(b[96 : 96+dateLen])
	d.IDF = cstring(b[112 : 112+idfLen])
	copy(d.ELFSHA256[:], b[144:176])
	for i := range MaxRevoke {
		var k KeyDigest
		copy(k[:], b[revokeOffset+i*len(k):])
		if !k.IsZero() {
			d.Revoke = append(d.Revoke, k)
		}
	}
	return d, nil
}

// Append appends the encoded 256-byte description to b. A string longer
// than its field less the terminating NUL gives ErrField.
func (d Desc) Append(b []byte) ([]byte, error) {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, DescMagic)
	b = binary.LittleEndian.AppendUint32(b, d.SecureVersion)
	b = append(b, make([]byte, 8)...)
	for _, f := range []struct {
		name, v string
		n       int
	}{{"version", d.Version, versionLen}, {"project", d.Project, projectLen}, {"time", d.Time, timeLen},
		{"date", d.Date, dateLen}, {"idf", d.IDF, idfLen}} {
		if len(f.v) >= f.n || bytes.IndexByte([]byte(f.v), 0) >= 0 {
			return b[:start], fmt.Errorf("%w: %s %q (at most %d bytes, no NUL)", ErrField, f.name, f.v, f.n-1)
		}
		field := make([]byte, f.n)
		copy(field, f.v)
		b = append(b, field...)
	}
	b = append(b, d.ELFSHA256[:]...)
	if len(d.Revoke) > MaxRevoke {
		return b[:start], fmt.Errorf("%w: %d keys to revoke, at most %d", ErrField, len(d.Revoke), MaxRevoke)
	}
	b = append(b, make([]byte, revokeOffset-176)...)
	for _, k := range d.Revoke {
		if k.IsZero() {
			return b[:start], fmt.Errorf("%w: a zero key digest cannot be revoked", ErrField)
		}
		b = append(b, k[:]...)
	}
	return append(b, make([]byte, DescSize-(len(b)-start))...), nil
}

// ELFSHA256Hex is the ELF SHA-256 as hex.
func (d Desc) ELFSHA256Hex() string { return hex.EncodeToString(d.ELFSHA256[:]) }

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Expect is what an image must be for the board that takes it.
type Expect struct {
	Chip uint16
	// ChipRev is the board's chip revision (major*100+minor).
	ChipRev uint16
	// Project is the project name the image must carry, unless Force.
	Project string
	// Force accepts an image of another project.
	Force bool
	// MaxSize bounds the whole image (the slot's size); 0 means no bound.
	MaxSize int64
}

// Early is what the first EarlyCheckSize bytes tell.
type Early struct {
	Header Header
	// First is the first segment's header.
	First Segment
	Desc  Desc
}

// EarlyCheck checks the first EarlyCheckSize bytes of an image against
// exp: an application image, for exp's chip and chip revision, of exp's
// project (unless exp.Force), whose first segment holds the description.
func EarlyCheck(b []byte, exp Expect) (Early, error) {
	var e Early
	if len(b) < EarlyCheckSize {
		return e, fmt.Errorf("%w: the early check needs %d bytes, have %d", ErrTruncated, EarlyCheckSize, len(b))
	}
	h, err := ParseHeader(b)
	e.Header = h
	if err != nil {
		return e, err
	}
	if h.ChipID != exp.Chip {
		return e, fmt.Errorf("%w: chip id 0x%04x, this board is 0x%04x", ErrChip, h.ChipID, exp.Chip)
	}
	if h.MinChipRevFull > exp.ChipRev {
		return e, fmt.Errorf("%w: needs chip revision %d or later, this board is %d", ErrChip, h.MinChipRevFull, exp.ChipRev)
	}
	load, n := parseSegmentHeader(b[HeaderSize:])
	e.First = Segment{LoadAddr: load, Offset: HeaderSize + SegmentHeaderSize, Len: n}
	if n < DescSize || n%4 != 0 {
		return e, fmt.Errorf("%w: first segment of %d bytes cannot hold the description", ErrSegments, n)
	}
	if exp.MaxSize > 0 && int64(n) > exp.MaxSize {
		return e, fmt.Errorf("%w: first segment of %d bytes, room for %d", ErrTooLarge, n, exp.MaxSize)
	}
	d, err := ParseDesc(b[HeaderSize+SegmentHeaderSize:])
	if err != nil {
		return e, err
	}
	e.Desc = d
	if !exp.Force && d.Project != exp.Project {
		return e, fmt.Errorf("%w: project %q, this board runs %q (force accepts it)", ErrProject, d.Project, exp.Project)
	}
	return e, nil
}

// Image is a fully checked image.
type Image struct {
	Header   Header
	Segments []Segment
	Desc     Desc
	// Size is the length of the whole image in bytes.
	Size int64
	// Checksum is the XOR checksum byte.
	Checksum byte
	// Appended is the appended SHA-256 (zero when HashAppended is 0).
	Appended [32]byte
	// SHA256 is the SHA-256 of the whole image as stored (what sha256sum
	// prints for the file), signature sector included.
	SHA256 [32]byte
	// Content is the length of the signed content, where the signature
	// sector starts (a multiple of SectorSize); 0 when the image has no
	// signature sector.
	Content int64
	// Digest is the SHA-256 of the signed content (bytes 0 to Content):
	// what every block must claim and sign. Zero when unsigned.
	Digest [32]byte
	// Blocks are the signature sector's blocks, malformed ones with Err
	// set; see Trust.Check for what makes an image trusted.
	Blocks []Block
	// SectorErr is set when the signature sector holds data after its
	// last block (it wraps ErrBadBlock).
	SectorErr error
}

// Signed reports whether the image carries a signature sector.
func (im *Image) Signed() bool { return im.Content > 0 }

// SHA256Hex is the whole image's SHA-256 as hex.
func (im *Image) SHA256Hex() string { return hex.EncodeToString(im.SHA256[:]) }

// Segment returns the data of segment i of the image in r.
func (im *Image) Segment(r io.ReaderAt, i int) *io.SectionReader {
	s := im.Segments[i]
	return io.NewSectionReader(r, s.Offset, int64(s.Len))
}

// Verify reads the image of size bytes from r and checks all of it.
func Verify(r io.ReaderAt, size int64, exp Expect) (*Image, error) {
	v := NewVerifier(exp)
	buf := make([]byte, 256<<10)
	var off int64
	for off < size {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		m, err := r.ReadAt(buf[:n], off)
		if m > 0 {
			if _, werr := v.Write(buf[:m]); werr != nil {
				return nil, werr
			}
			off += int64(m)
		}
		if err != nil && !(errors.Is(err, io.EOF) && int64(m) == n) {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: image ends at %d of %d bytes", ErrTruncated, off, size)
			}
			return nil, err
		}
	}
	return v.Finish()
}

// VerifyAt checks the image at the start of r, a slot of size bytes,
// reading no further than the image's own structure says it ends. A
// signature sector is taken to follow the image when the bytes up to the
// next SectorSize boundary are 0xFF and the sector there begins with
// SigMagic; otherwise the image is unsigned and what follows it is
// whatever the slot held before.
func VerifyAt(r io.ReaderAt, size int64, exp Expect) (*Image, error) {
	if exp.MaxSize == 0 || exp.MaxSize > size {
		exp.MaxSize = size
	}
	v := NewVerifier(exp)
	buf := make([]byte, 256<<10)
	var off int64
	for !v.Done() {
		n := min(v.Need(), int64(len(buf)), size-off)
		if n <= 0 {
			return nil, fmt.Errorf("%w: image runs past the end of its %d bytes", ErrTruncated, size)
		}
		m, err := r.ReadAt(buf[:n], off)
		if int64(m) < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: short read at %d", ErrTruncated, off)
			}
			return nil, err
		}
		if _, err := v.Write(buf[:n]); err != nil {
			return nil, err
		}
		off += n
		if v.Done() && !v.Sectored() {
			tail, ok := sectorAfter(r, off, size)
			if !ok {
				break
			}
			if _, err := v.Write(tail); err != nil {
				return nil, err
			}
			off += int64(len(tail))
		}
	}
	return v.Finish()
}

// sectorAfter returns the padding and signature sector following an
// image that ends at end in a slot of size bytes, when there is one.
func sectorAfter(r io.ReaderAt, end, size int64) ([]byte, bool) {
	n := padTo(end) + SectorSize
	if end+n > size {
		return nil, false
	}
	tail := make([]byte, n)
	if m, _ := r.ReadAt(tail, end); int64(m) < n {
		return nil, false
	}
	pad := tail[:n-SectorSize]
	if slices.IndexFunc(pad, func(c byte) bool { return c != erasedByte }) >= 0 || tail[len(pad)] != SigMagic {
		return nil, false
	}
	return tail, true
}

// VerifyBytes checks a whole image held in memory.
func VerifyBytes(b []byte, exp Expect) (*Image, error) {
	return Verify(bytes.NewReader(b), int64(len(b)), exp)
}

// Read reads just the header, segment table and description of the image
// in r, without checking checksum or hash: enough to describe what a slot
// holds. size bounds the image.
func Read(r io.ReaderAt, size int64) (Early, []Segment, error) {
	var first [EarlyCheckSize]byte
	if _, err := r.ReadAt(first[:], 0); err != nil {
		return Early{}, nil, fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	h, err := ParseHeader(first[:])
	if err != nil {
		return Early{}, nil, err
	}
	e, err := EarlyCheck(first[:], Expect{Chip: h.ChipID, ChipRev: h.MinChipRevFull, Force: true, MaxSize: size})
	if err != nil {
		return e, nil, err
	}
	segs := []Segment{e.First}
	off := e.First.Offset + int64(e.First.Len)
	var sh [SegmentHeaderSize]byte
	for range int(h.SegmentCount) - 1 {
		if off+SegmentHeaderSize > size {
			return e, nil, fmt.Errorf("%w: segment table runs past %d bytes", ErrTruncated, size)
		}
		if _, err := r.ReadAt(sh[:], off); err != nil {
			return e, nil, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		load, n := parseSegmentHeader(sh[:])
		off += SegmentHeaderSize
		if n%4 != 0 || int64(n) > size-off {
			return e, nil, fmt.Errorf("%w: segment of %d bytes at %d", ErrSegments, n, off)
		}
		segs = append(segs, Segment{LoadAddr: load, Offset: off, Len: n})
		off += int64(n)
	}
	return e, segs, nil
}
