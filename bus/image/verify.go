package image

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
)

type phase uint8

const (
	phEarly   phase = iota // collecting the first EarlyCheckSize bytes
	phSegHdr               // collecting a segment header
	phSegData              // inside a segment's data
	phPad                  // padding before the checksum byte
	phSum                  // the checksum byte
	phDigest               // the appended SHA-256
	phDone                 // the image ended; a signature sector may follow
	phSigPad               // 0xFF padding up to the signature sector
	phSector               // the signature sector
	phSigned               // the signature sector ended
)

// Verifier checks an image as its bytes stream by, in one pass: the early
// check once EarlyCheckSize bytes are in, each segment header as it
// arrives, the XOR checksum and the appended SHA-256 at the end, and the
// SHA-256 of the whole image. Write returns the first problem as soon as
// the bytes that show it arrive, and every later Write returns the same
// error. A Verifier is not safe for concurrent use.
type Verifier struct {
	exp   Expect
	h     hash.Hash
	ph    phase
	off   int64 // bytes taken so far
	err   error
	early [EarlyCheckSize]byte
	eN    int
	e     Early
	segs  []Segment
	buf   [HashSize]byte // segment header or digest being collected
	bufN  int
	left  int64 // bytes left in the current segment or padding
	xor   uint64
	sum   byte
	app   [HashSize]byte // the hash of everything before the digest
	// The signature sector: where it starts, the digest of what precedes
	// it, and its bytes as they arrive.
	content int64
	digest  [HashSize]byte
	sector  []byte
}

// NewVerifier returns a Verifier checking against exp.
func NewVerifier(exp Expect) *Verifier {
	return &Verifier{exp: exp, h: sha256.New()}
}

// Early returns the early check's result once EarlyCheckSize bytes have
// passed it (ok false before, or after a failed early check).
func (v *Verifier) Early() (e Early, ok bool) {
	return v.e, v.eN == EarlyCheckSize && v.e.Header.Magic == Magic
}

// Need returns how many bytes the Verifier can take next without reading
// past the end of the image as known so far (0 once the image is
// complete). Readers of a slot, where the image is followed by whatever
// the slot held before, read at most this much at a time.
func (v *Verifier) Need() int64 {
	switch v.ph {
	case phEarly:
		return int64(EarlyCheckSize - v.eN)
	case phSegHdr:
		return int64(SegmentHeaderSize - v.bufN)
	case phSegData, phPad:
		return v.left
	case phSum:
		return 1
	case phDigest:
		return int64(HashSize - v.bufN)
	case phSigPad:
		return v.left
	case phSector:
		return int64(SectorSize - len(v.sector))
	}
	return 0
}

// Done reports whether the whole image has been taken: the image proper
// (a signature sector may still follow), or the image and its signature
// sector.
func (v *Verifier) Done() bool { return v.ph == phDone || v.ph == phSigned }

// Sectored reports whether the Verifier has begun a signature sector.
func (v *Verifier) Sectored() bool { return v.ph >= phSigPad }

// Written returns how many bytes the Verifier has taken.
func (v *Verifier) Written() int64 { return v.off }

// Err returns the sticky error, if any.
func (v *Verifier) Err() error { return v.err }

// Write takes the next bytes of the image. It returns len(p) and nil, or
// 0 and an error that wraps one of the package's sentinels.
func (v *Verifier) Write(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n := len(p)
	for len(p) > 0 {
		k, err := v.step(p)
		v.off += int64(k)
		p = p[k:]
		if err == nil && v.exp.MaxSize > 0 && v.off > v.exp.MaxSize {
			err = fmt.Errorf("%w: over %d bytes", ErrTooLarge, v.exp.MaxSize)
		}
		if err != nil {
			v.err = err
			return 0, err
		}
	}
	return n, nil
}

// Finish reports the checked image once every byte has been written, or
// why it is not a complete, good image.
func (v *Verifier) Finish() (*Image, error) {
	if v.err != nil {
		return nil, v.err
	}
	if !v.Done() {
		return nil, fmt.Errorf("%w: image ends after %d bytes, inside its %s", ErrTruncated, v.off, v.ph)
	}
	if v.e.Header.HashAppended != 1 {
		return nil, fmt.Errorf("%w", ErrNoHash)
	}
	im := &Image{Header: v.e.Header, Segments: v.segs, Desc: v.e.Desc, Size: v.off, Checksum: v.sum, Appended: v.app}
	copy(im.SHA256[:], v.h.Sum(nil))
	if v.ph == phSigned {
		im.Content, im.Digest = v.content, v.digest
		im.Blocks, im.SectorErr = ParseSector(v.sector)
	}
	return im, nil
}

func (p phase) String() string {
	return [...]string{"header", "segment header", "segment data", "padding", "checksum", "appended hash", "end",
		"padding before the signature sector", "signature sector", "end of the signature sector"}[p]
}

// step consumes and hashes a prefix of p (never empty) within the current
// phase and returns its length; v.off is the offset of p[0].
func (v *Verifier) step(p []byte) (int, error) {
	switch v.ph {
	case phEarly:
		k := copy(v.early[v.eN:], p)
		v.h.Write(p[:k])
		before := v.eN
		v.eN += k
		if v.eN < EarlyCheckSize {
			if before < HeaderSize && v.eN >= HeaderSize { // fail fast on the header alone
				if _, err := ParseHeader(v.early[:]); err != nil {
					return k, err
				}
			}
			return k, nil
		}
		e, err := EarlyCheck(v.early[:], v.exp)
		if err != nil {
			return k, err
		}
		v.e = e
		v.segs = append(v.segs, e.First)
		v.xor = xorFold(v.xor, v.early[HeaderSize+SegmentHeaderSize:])
		v.left = int64(e.First.Len) - DescSize
		v.ph = phSegData
		v.afterData(v.off + int64(k))
		return k, nil
	case phSegData:
		k := int(min(v.left, int64(len(p))))
		v.xor = xorFold(v.xor, p[:k])
		v.h.Write(p[:k])
		v.left -= int64(k)
		v.afterData(v.off + int64(k))
		return k, nil
	case phSegHdr:
		k := copy(v.buf[v.bufN:SegmentHeaderSize], p)
		v.h.Write(p[:k])
		v.bufN += k
		if v.bufN < SegmentHeaderSize {
			return k, nil
		}
		v.bufN = 0
		load, n := parseSegmentHeader(v.buf[:])
		dataOff := v.off + int64(k)
		if n%4 != 0 {
			return k, fmt.Errorf("%w: segment %d length %d is not a multiple of 4", ErrSegments, len(v.segs), n)
		}
		if v.exp.MaxSize > 0 && dataOff+int64(n) > v.exp.MaxSize {
			return k, fmt.Errorf("%w: segment %d of %d bytes ends past %d bytes", ErrTooLarge, len(v.segs), n, v.exp.MaxSize)
		}
		v.segs = append(v.segs, Segment{LoadAddr: load, Offset: dataOff, Len: n})
		v.left = int64(n)
		v.ph = phSegData
		v.afterData(dataOff)
		return k, nil
	case phPad:
		k := int(min(v.left, int64(len(p))))
		v.h.Write(p[:k])
		v.left -= int64(k)
		if v.left == 0 {
			v.ph = phSum
		}
		return k, nil
	case phSum:
		v.sum = p[0]
		v.h.Write(p[:1])
		if want := fold(v.xor) ^ ChecksumSeed; v.sum != want {
			return 1, fmt.Errorf("%w: checksum byte 0x%02x, data gives 0x%02x", ErrChecksum, v.sum, want)
		}
		v.ph = phDone
		if v.e.Header.HashAppended == 1 {
			v.ph = phDigest
			// Sum leaves the running state alone: the appended hash covers
			// what came before it, and hashing on gives the whole file's.
			copy(v.app[:], v.h.Sum(nil))
		}
		return 1, nil
	case phDigest:
		k := copy(v.buf[v.bufN:], p)
		v.h.Write(p[:k])
		v.bufN += k
		if v.bufN == HashSize {
			v.bufN = 0
			if v.buf != v.app {
				return k, fmt.Errorf("%w: appended %x, image gives %x", ErrHash, v.buf, v.app)
			}
			v.ph = phDone
		}
		return k, nil
	case phDone:
		// More bytes after the image: 0xFF padding to a SectorSize
		// boundary, then the signature sector.
		v.left = padTo(v.off)
		v.ph = phSigPad
		if v.left == 0 {
			v.startSector(v.off)
		}
		return 0, nil
	case phSigPad:
		k := int(min(v.left, int64(len(p))))
		for i, c := range p[:k] {
			if c != erasedByte {
				return i, fmt.Errorf("%w: byte %d after the image is 0x%02x; only 0xFF padding up to a signature sector may follow", ErrTrailing, v.off+int64(i), c)
			}
		}
		v.h.Write(p[:k])
		v.left -= int64(k)
		if v.left == 0 {
			v.startSector(v.off + int64(k))
		}
		return k, nil
	case phSector:
		k := min(SectorSize-len(v.sector), len(p))
		v.sector = append(v.sector, p[:k]...)
		v.h.Write(p[:k])
		if len(v.sector) == SectorSize {
			v.ph = phSigned
		}
		return k, nil
	default:
		return 0, fmt.Errorf("%w: %d more bytes after %d", ErrTrailing, len(p), v.off)
	}
}

// startSector begins the signature sector at offset at, a multiple of
// SectorSize: everything hashed so far is the signed content.
func (v *Verifier) startSector(at int64) {
	v.content = at
	copy(v.digest[:], v.h.Sum(nil))
	v.sector = make([]byte, 0, SectorSize)
	v.ph = phSector
}

// afterData moves on when the current segment's data is complete; end is
// the image offset just past the bytes consumed.
func (v *Verifier) afterData(end int64) {
	if v.left > 0 {
		return
	}
	if len(v.segs) < int(v.e.Header.SegmentCount) {
		v.ph = phSegHdr
		return
	}
	v.left = padLen(end)
	v.ph = phPad
	if v.left == 0 {
		v.ph = phSum
	}
}

// padLen is the zero padding after offset end so that the checksum byte
// ends the image on a 16-byte boundary.
func padLen(end int64) int64 { return (15 - end%16) % 16 }

// xorFold XORs p into the accumulator eight bytes at a time. Which lane a
// byte lands in does not matter: fold XORs the lanes together at the end.
//
// It is not instrumented for the race detector (go:norace): in a -race
// build every byte load would be checked, tens of millions per image,
// which made most of a board's start in the -race builds tests run (it
// packs and checks its own executable). It only reads p, and its callers'
// accesses to p are checked as usual.
//
//go:norace
func xorFold(acc uint64, p []byte) uint64 {
	for len(p) >= 32 {
		acc ^= binary.LittleEndian.Uint64(p) ^ binary.LittleEndian.Uint64(p[8:]) ^
			binary.LittleEndian.Uint64(p[16:]) ^ binary.LittleEndian.Uint64(p[24:])
		p = p[32:]
	}
	for len(p) >= 8 {
		acc ^= binary.LittleEndian.Uint64(p)
		p = p[8:]
	}
	for _, b := range p {
		acc ^= uint64(b)
	}
	return acc
}

func fold(acc uint64) byte {
	acc ^= acc >> 32
	acc ^= acc >> 16
	acc ^= acc >> 8
	return byte(acc)
}
