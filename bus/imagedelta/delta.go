// Package imagedelta makes and applies delta images: the bytes that turn
// one firmware image (the base, what a board runs) into the next (the
// target), far fewer than the target itself when the two builds are
// close. It lives in bus/ because it is a contract of both sides: the
// gateway (and holoctl image delta) makes deltas, the board rebuilds the
// target from its running slot and a delta (PUT /ota/image?base=...).
//
// # Format
//
//	offset  size  field
//	0       8     magic "HOLODLT1"
//	8       32    the base image's SHA-256 (the whole image, signature sector included)
//	40      32    the target image's SHA-256
//	72      4     the target image's length in bytes, little-endian
//	76      ...   one zstd frame whose decoded content is the whole target
//	              image, compressed with the base image as a raw dictionary
//	              (dictionary id DictID), content checksum on
//
// The target's signature sector travels inside the frame like the rest of
// the image, so the rebuilt image is byte for byte the signed image: a
// board checks it exactly as a full upload (hash, signature, keys,
// anti-rollback) and trust never depends on the delta. The header's target
// SHA-256 is what the rebuilt image must hash to; a frame that decodes to
// more or fewer bytes than the header's length, or fails its checksum, is
// ErrCorrupt.
//
// Why zstd with a raw dictionary rather than bsdiff: docs/rollouts.md
// ("Delta images") gives the measurements on our own images.
package imagedelta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Layout and limits of the format.
const (
	HeaderSize = 76
	// DictID is the dictionary id the zstd frame names for the base.
	DictID = 0x484f4c4f // "HOLO"
	// MaxImage bounds the base and the target (the image format's slot).
	MaxImage = 48 << 20
	// MaxWindow bounds the zstd window a delta may ask for.
	MaxWindow = 128 << 20
)

// Magic opens every delta.
var Magic = [8]byte{'H', 'O', 'L', 'O', 'D', 'L', 'T', '1'}

// Errors of the package.
var (
	// ErrFormat: the bytes are not a delta (bad magic, short header,
	// impossible length).
	ErrFormat = errors.New("imagedelta: not a delta")
	// ErrCorrupt: the delta does not decode into the image its header
	// promises (bad frame, checksum, length or hash).
	ErrCorrupt = errors.New("imagedelta: corrupt delta")
	// ErrBase: the base given is not the image the delta was made from.
	ErrBase = errors.New("imagedelta: wrong base image")
	// ErrTooLarge: an image exceeds MaxImage.
	ErrTooLarge = errors.New("imagedelta: image too large")
)

// Header is the fixed part of a delta.
type Header struct {
	Base   [32]byte
	Target [32]byte
	Size   int64
}

// Append appends h in its wire form to b.
func (h Header) Append(b []byte) []byte {
	b = append(b, Magic[:]...)
	b = append(b, h.Base[:]...)
	b = append(b, h.Target[:]...)
	return binary.LittleEndian.AppendUint32(b, uint32(h.Size))
}

// ParseHeader reads the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, the header needs %d", ErrFormat, len(b), HeaderSize)
	}
	if !bytes.Equal(b[:8], Magic[:]) {
		return Header{}, fmt.Errorf("%w: bad magic %q", ErrFormat, b[:8])
	}
	var h Header
	copy(h.Base[:], b[8:40])
	copy(h.Target[:], b[40:72])
	h.Size = int64(binary.LittleEndian.Uint32(b[72:76]))
	if h.Size == 0 || h.Size > MaxImage {
		return Header{}, fmt.Errorf("%w: target of %d bytes (1 to %d)", ErrFormat, h.Size, MaxImage)
	}
	return h, nil
}

// ReadHeader reads the header from the start of r.
func ReadHeader(r io.Reader) (Header, error) {
	var b [HeaderSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Header{}, fmt.Errorf("%w: reading the header: %v", ErrFormat, err)
	}
	return ParseHeader(b[:])
}

// window is the zstd window for a delta from a base of n bytes to a
// target of m: every byte of the base stays reachable while the whole
// target is written, so a byte that did not move is always a match.
func window(n, m int) int {
	w := zstd.MinWindowSize
	for w < n+m && w < MaxWindow {
		w <<= 1
	}
	return w
}

// Make returns the delta from base to target.
func Make(base, target []byte) ([]byte, error) {
	if len(base) > MaxImage || len(target) > MaxImage {
		return nil, fmt.Errorf("%w: %d and %d bytes (at most %d)", ErrTooLarge, len(base), len(target), MaxImage)
	}
	if len(target) == 0 {
		return nil, fmt.Errorf("%w: empty target", ErrFormat)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(window(len(base), len(target))), zstd.WithEncoderDictRaw(DictID, base), zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	h := Header{Base: sha256.Sum256(base), Target: sha256.Sum256(target), Size: int64(len(target))}
	return enc.EncodeAll(target, h.Append(make([]byte, 0, HeaderSize+len(target)/8))), nil
}

// Reader yields the target image rebuilt from a base and a delta's frame:
// exactly the header's Size bytes, then io.EOF. Any fault of the frame
// (bad block, checksum, too few or too many bytes) is ErrCorrupt, reported
// no later than with the image's last bytes. The target's SHA-256 is the
// caller's to check (a board checks the whole image as it arrives).
type Reader struct {
	dec  *zstd.Decoder
	left int64
	err  error
}

// NewReader returns the reader of the target that h describes, decoding
// frame (the delta after its header) against base, which must be the
// image h names (the caller checks its SHA-256: ErrBase otherwise).
// Memory: the base, plus the zstd window's history (about the target's
// length; bounded by MaxWindow). The decoder's low-memory mode is off: it
// saved a sixth of the memory and cost three to five times the time
// (BenchmarkDeltaRebuild in firmware/ota).
func NewReader(base []byte, h Header, frame io.Reader) (*Reader, error) {
	dec, err := zstd.NewReader(frame, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(false),
		zstd.WithDecoderMaxWindow(MaxWindow), zstd.WithDecoderDictRaw(DictID, base))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &Reader{dec: dec, left: h.Size}, nil
}

// Read reads the rebuilt image.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		r.fail(io.EOF)
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.dec.Read(p)
	r.left -= int64(n)
	switch {
	case err == io.EOF && r.left > 0:
		r.fail(fmt.Errorf("%w: the frame ends %d bytes before the image does", ErrCorrupt, r.left))
	case err != nil && err != io.EOF:
		r.fail(fmt.Errorf("%w: %v", ErrCorrupt, err))
	case r.left == 0:
		r.end()
	}
	if r.err != nil && r.err != io.EOF {
		return n, r.err
	}
	return n, nil
}

// end checks, once every byte of the image is out, that the frame ends
// there and its checksum holds.
func (r *Reader) end() {
	var one [1]byte
	for {
		m, err := r.dec.Read(one[:])
		switch {
		case m > 0:
			r.fail(fmt.Errorf("%w: the frame decodes past the image's %d bytes", ErrCorrupt, r.left))
			return
		case err == io.EOF:
			r.fail(io.EOF)
			return
		case err != nil:
			r.fail(fmt.Errorf("%w: %v", ErrCorrupt, err))
			return
		}
	}
}

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
		r.dec.Close()
	}
}

// Close releases the decoder (a Reader read to its end releases itself).
func (r *Reader) Close() error {
	r.fail(io.ErrClosedPipe)
	return nil
}

// Apply rebuilds the target from base and a whole delta, checking the
// base (ErrBase) and the target's length and SHA-256 (ErrCorrupt).
func Apply(base, delta []byte) ([]byte, error) {
	h, err := ParseHeader(delta)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(base) != h.Base {
		return nil, fmt.Errorf("%w: the delta is from %x", ErrBase, h.Base[:8])
	}
	r, err := NewReader(base, h, bytes.NewReader(delta[HeaderSize:]))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([]byte, 0, h.Size)
	buf := bytes.NewBuffer(out)
	if _, err := io.Copy(buf, r); err != nil {
		return nil, err
	}
	if sha256.Sum256(buf.Bytes()) != h.Target {
		return nil, fmt.Errorf("%w: the rebuilt image's SHA-256 is not the delta's target %x", ErrCorrupt, h.Target[:8])
	}
	return buf.Bytes(), nil
}
