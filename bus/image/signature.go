package image

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math/big"
	"slices"
	"strings"
)

// Layout of the signature sector and its blocks (see the package doc).
const (
	// SectorSize is the flash sector the signature sector fills, and the
	// alignment of its start.
	SectorSize = 4096
	// SigBlockSize is one signature block.
	SigBlockSize = 1216
	// MaxSigBlocks is how many blocks one signature sector holds.
	MaxSigBlocks = 3
	// SigMagic is the first byte of every signature block.
	SigMagic = 0xE7
	// SigVersionECDSA is the block version of the ECDSA scheme.
	SigVersionECDSA = 0x03
	// SigHashSHA256 is the hash scheme byte of a block over SHA-256.
	SigHashSHA256 = 0x00
	// CurveP256 is the curve id of NIST P-256 (secp256r1).
	CurveP256 = 2
	// MaxRevoke is how many key digests one application description can
	// ask to revoke.
	MaxRevoke = 2

	sigOffDigest  = 4
	sigOffCurve   = 36
	sigOffKey     = 37
	sigOffSig     = 101
	sigOffRsvd    = 165
	sigOffCRC     = 1196
	sigOffPad     = 1200
	coordLen      = 32
	erasedByte    = 0xFF
	revokeOffset  = 184 // in the application description: reserv2
	sigCurveP192  = 1
	sigVersionRSA = 0x02
)

// KeyDigest is the SHA-256 of a public key as a signature block holds it
// (curve id, X, Y: block bytes 36-100), the value ESP-IDF burns into a
// key digest eFuse. It names a key everywhere: trusted keys, revocations,
// signers.
type KeyDigest [32]byte

// String is the digest as 64 hex digits.
func (d KeyDigest) String() string { return hex.EncodeToString(d[:]) }

// Short is the first 16 hex digits, for people.
func (d KeyDigest) Short() string { return d.String()[:16] }

// IsZero reports whether d is all zero (no key).
func (d KeyDigest) IsZero() bool { return d == KeyDigest{} }

// ParseKeyDigest reads 64 hex digits.
func ParseKeyDigest(s string) (KeyDigest, error) {
	var d KeyDigest
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(d) {
		return d, fmt.Errorf("%w: key digest %q is not 64 hex digits", ErrKey, s)
	}
	copy(d[:], b)
	return d, nil
}

// Errors of signatures and keys. Check and CheckBlocks return errors
// wrapping exactly one of ErrUnsigned, ErrUntrustedKey, ErrRevokedKey,
// ErrBadSignature and ErrBadBlock, the strongest reason why no block
// makes the image trusted.
var (
	// ErrUnsigned means the image carries no signature block.
	ErrUnsigned = errors.New("image: not signed")
	// ErrUntrustedKey means the image's blocks are signed only by keys
	// that are not trusted.
	ErrUntrustedKey = errors.New("image: signed by a key that is not trusted")
	// ErrRevokedKey means the only trusted keys that signed the image are
	// revoked.
	ErrRevokedKey = errors.New("image: signed by a revoked key")
	// ErrBadSignature means a block's signature does not verify: the image
	// was changed after it was signed, or the block was made for other
	// content.
	ErrBadSignature = errors.New("image: signature does not verify")
	// ErrBadBlock means a signature block (or the sector holding it) is
	// malformed: wrong magic, version, hash scheme or curve, CRC mismatch,
	// non-zero reserved bytes or padding, a point off the curve, or data
	// after the last block.
	ErrBadBlock = errors.New("image: malformed signature block")
	// ErrKey means a key (PEM file, digest) cannot be used: not ECDSA
	// P-256, or not readable.
	ErrKey = errors.New("image: unusable key")
	// ErrSignatureFull means the image already carries MaxSigBlocks blocks.
	ErrSignatureFull = errors.New("image: no room for another signature block")
	// ErrAlreadySigned means the image already carries a block of the key.
	ErrAlreadySigned = errors.New("image: already signed by this key")
)

// Block is one signature block.
type Block struct {
	// Index is the block's position in the sector, 0-2.
	Index int
	// Version is the block version byte (SigVersionECDSA).
	Version byte
	// ImageDigest is the SHA-256 of the signed content the block claims.
	ImageDigest [32]byte
	// Curve is the curve id (CurveP256).
	Curve byte
	// Key is the public key; nil when the block is malformed.
	Key *ecdsa.PublicKey
	// KeyDigest names the key (SHA-256 of block bytes 36-100), also for a
	// block that is malformed past its CRC check.
	KeyDigest KeyDigest
	// R and S are the signature's integers, big-endian as Go uses them
	// (the block stores them little-endian).
	R, S [coordLen]byte
	// Err is nil for a well-formed block, else wraps ErrBadBlock.
	Err error
}

// parseBlock decodes the SigBlockSize bytes of block index i.
func parseBlock(i int, b []byte) Block {
	blk := Block{Index: i, Version: b[1], Curve: b[sigOffCurve]}
	copy(blk.ImageDigest[:], b[sigOffDigest:sigOffCurve])
	blk.KeyDigest = sha256.Sum256(b[sigOffCurve:sigOffSig])
	bad := func(format string, a ...any) Block {
		blk.Err = fmt.Errorf("%w: block %d: %s", ErrBadBlock, i, fmt.Sprintf(format, a...))
		return blk
	}
	if b[0] != SigMagic {
		return bad("magic 0x%02x, want 0x%02x", b[0], SigMagic)
	}
	if got, want := binary.LittleEndian.Uint32(b[sigOffCRC:]), crc32.ChecksumIEEE(b[:sigOffCRC]); got != want {
		return bad("CRC 0x%08x, the block gives 0x%08x", got, want)
	}
	switch {
	case b[1] == sigVersionRSA:
		return bad("RSA-PSS blocks (version 2) are not supported; only ECDSA (version 3)")
	case b[1] != SigVersionECDSA:
		return bad("version 0x%02x, want 0x%02x (ECDSA)", b[1], SigVersionECDSA)
	case b[2] != SigHashSHA256:
		return bad("hash scheme %d is not supported; only SHA-256 (0)", b[2])
	case b[3] != 0:
		return bad("reserved byte 3 is 0x%02x, not zero", b[3])
	case b[sigOffCurve] == sigCurveP192:
		return bad("curve P-192 is not supported; only P-256 (curve id %d)", CurveP256)
	case b[sigOffCurve] != CurveP256:
		return bad("curve id %d, want %d (P-256)", b[sigOffCurve], CurveP256)
	}
	if i := slices.IndexFunc(b[sigOffRsvd:sigOffCRC], func(c byte) bool { return c != 0 }); i >= 0 {
		return bad("reserved byte %d is not zero", sigOffRsvd+i)
	}
	if i := slices.IndexFunc(b[sigOffPad:SigBlockSize], func(c byte) bool { return c != 0 }); i >= 0 {
		return bad("padding byte %d is not zero", sigOffPad+i)
	}
	pt := make([]byte, 1+2*coordLen)
	pt[0] = 4
	copy(pt[1:], reversed(b[sigOffKey:sigOffKey+coordLen]))
	copy(pt[1+coordLen:], reversed(b[sigOffKey+coordLen:sigOffSig]))
	key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
	if err != nil {
		return bad("public key: %v", err)
	}
	blk.Key = key
	copy(blk.R[:], reversed(b[sigOffSig:sigOffSig+coordLen]))
	copy(blk.S[:], reversed(b[sigOffSig+coordLen:sigOffRsvd]))
	return blk
}

// ParseSector decodes a signature sector: up to MaxSigBlocks blocks, the
// first one whose first byte is 0xFF (erased) ending the list. A block that
// is malformed is returned with Err set and does not end the list. The
// error is about the sector as a whole (wrong length, data after the last
// block) and wraps ErrBadBlock; the blocks read are returned with it.
func ParseSector(sec []byte) ([]Block, error) {
	if len(sec) != SectorSize {
		return nil, fmt.Errorf("%w: signature sector of %d bytes, want %d", ErrBadBlock, len(sec), SectorSize)
	}
	var blocks []Block
	end := MaxSigBlocks * SigBlockSize
	for i := range MaxSigBlocks {
		b := sec[i*SigBlockSize : (i+1)*SigBlockSize]
		if b[0] == erasedByte {
			end = i * SigBlockSize
			break
		}
		blocks = append(blocks, parseBlock(i, b))
	}
	if j := slices.IndexFunc(sec[end:], func(c byte) bool { return c != erasedByte }); j >= 0 {
		return blocks, fmt.Errorf("%w: signature sector byte %d after the last block is 0x%02x, not erased (0xFF)", ErrBadBlock, end+j, sec[end+j])
	}
	return blocks, nil
}

// AppendBlock encodes a block over digest with key's public key and the
// signature (r, s) and appends its SigBlockSize bytes to b.
func AppendBlock(b []byte, digest [32]byte, pub *ecdsa.PublicKey, r, s *big.Int) ([]byte, error) {
	pt, err := pointOf(pub)
	if err != nil {
		return b, err
	}
	if r.Sign() <= 0 || s.Sign() <= 0 || r.BitLen() > 8*coordLen || s.BitLen() > 8*coordLen {
		return b, fmt.Errorf("%w: signature integers out of range", ErrKey)
	}
	start := len(b)
	b = append(b, SigMagic, SigVersionECDSA, SigHashSHA256, 0)
	b = append(b, digest[:]...)
	b = append(b, pt...)
	var n [coordLen]byte
	b = append(b, reversed(r.FillBytes(n[:]))...)
	b = append(b, reversed(s.FillBytes(n[:]))...)
	b = append(b, make([]byte, sigOffCRC-sigOffRsvd)...)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	return append(b, make([]byte, SigBlockSize-sigOffPad)...), nil
}

// pointOf is a P-256 key as a block holds it: curve id, X and Y
// little-endian.
func pointOf(pub *ecdsa.PublicKey) ([]byte, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: only ECDSA P-256 keys are used", ErrKey)
	}
	raw, err := pub.Bytes() // 0x04 || X || Y, big-endian
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	out := []byte{CurveP256}
	out = append(out, reversed(raw[1:1+coordLen])...)
	return append(out, reversed(raw[1+coordLen:])...), nil
}

// DigestOf is the key digest of a P-256 public key, as a block built with
// it gives and as ESP-IDF's espsecure digest_sbv2_public_key computes.
func DigestOf(pub *ecdsa.PublicKey) (KeyDigest, error) {
	pt, err := pointOf(pub)
	if err != nil {
		return KeyDigest{}, err
	}
	return sha256.Sum256(pt), nil
}

func reversed(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = c
	}
	return out
}

// signatureOK reports whether blk is well formed, claims digest, and its
// signature verifies with its own key.
func signatureOK(blk Block, digest [32]byte) error {
	if blk.Err != nil {
		return blk.Err
	}
	if blk.ImageDigest != digest {
		return fmt.Errorf("%w: block %d was made for other content (digest %x, the image gives %x)", ErrBadSignature, blk.Index, blk.ImageDigest[:8], digest[:8])
	}
	r, s := new(big.Int).SetBytes(blk.R[:]), new(big.Int).SetBytes(blk.S[:])
	if !ecdsa.Verify(blk.Key, digest[:], r, s) {
		return fmt.Errorf("%w: block %d (key %s): the ECDSA signature is wrong", ErrBadSignature, blk.Index, blk.KeyDigest.Short())
	}
	return nil
}

// Trust is what a board (or the gateway, on its behalf) trusts: the key
// digests burned into its eFuses, and those revoked since. A revoked key
// is never trusted, whatever Keys says.
type Trust struct {
	Keys    []KeyDigest
	Revoked []KeyDigest
	// MinSecureVersion is the highest secure version a confirmed image
	// had on this board (anti-rollback): an image below it is refused,
	// whether or not keys are burned (CheckSecureVersion).
	MinSecureVersion uint32
}

// ErrSecureVersion means an image's secure version is below the board's
// (anti-rollback): it is an older release the board no longer runs.
var ErrSecureVersion = errors.New("image: secure version below the board's")

// CheckSecureVersion refuses a description whose secure version is below
// t.MinSecureVersion.
func (t Trust) CheckSecureVersion(d Desc) error {
	if d.SecureVersion < t.MinSecureVersion {
		return fmt.Errorf("%w: %s has secure version %d, the board requires at least %d", ErrSecureVersion, d.Version, d.SecureVersion, t.MinSecureVersion)
	}
	return nil
}

// Enabled reports whether any key is burned: a Trust without keys checks
// nothing (the board is open).
func (t Trust) Enabled() bool { return len(t.Keys) > 0 }

// Trusted reports whether d is one of the keys and not revoked.
func (t Trust) Trusted(d KeyDigest) bool {
	return slices.Contains(t.Keys, d) && !slices.Contains(t.Revoked, d)
}

// BlockCheck is what Trust.CheckBlocks found about one block.
type BlockCheck struct {
	Block Block
	// SignatureOK is true when the block is well formed, was made for
	// this image's content and its signature verifies with its key,
	// trusted or not.
	SignatureOK bool
	// Trusted is true when the block's key is trusted (and not revoked).
	Trusted bool
	// Revoked is true when the block's key is revoked.
	Revoked bool
	// Err is nil when the block makes the image trusted; otherwise it
	// wraps ErrBadBlock, ErrBadSignature, ErrRevokedKey or ErrUntrustedKey.
	Err error
}

// CheckBlocks checks every block of im against t: each block's shape,
// digest and signature, then its key. It reads nothing: im comes from a
// Verifier that has seen every byte.
func (t Trust) CheckBlocks(im *Image) []BlockCheck {
	out := make([]BlockCheck, 0, len(im.Blocks))
	for _, blk := range im.Blocks {
		c := BlockCheck{Block: blk}
		sigErr := signatureOK(blk, im.Digest)
		c.SignatureOK = sigErr == nil
		c.Revoked = blk.Err == nil && slices.Contains(t.Revoked, blk.KeyDigest)
		c.Trusted = blk.Err == nil && t.Trusted(blk.KeyDigest)
		switch {
		case blk.Err != nil:
			c.Err = blk.Err
		case c.Revoked:
			c.Err = fmt.Errorf("%w: block %d: key %s is revoked", ErrRevokedKey, blk.Index, blk.KeyDigest.Short())
		case !c.Trusted:
			c.Err = fmt.Errorf("%w: block %d: key %s is not trusted", ErrUntrustedKey, blk.Index, blk.KeyDigest.Short())
		case sigErr != nil:
			c.Err = sigErr
		}
		out = append(out, c)
	}
	return out
}

// Signers lists the keys whose blocks verify over im's content, trusted
// or not, in block order: who signed the image.
func Signers(im *Image) []KeyDigest {
	var out []KeyDigest
	for _, blk := range im.Blocks {
		if signatureOK(blk, im.Digest) == nil && !slices.Contains(out, blk.KeyDigest) {
			out = append(out, blk.KeyDigest)
		}
	}
	return out
}

// Check decides whether im may run under t: it must carry a well-formed
// signature sector with at least one block whose key is trusted and not
// revoked and whose signature verifies over the image's content. It
// returns those keys (the trusted signers), or an error wrapping the
// strongest reason none qualifies, in this order: ErrBadSignature (a
// trusted key's block does not verify: the image was changed),
// ErrBadBlock, ErrRevokedKey, ErrUntrustedKey, ErrUnsigned. A sector with
// data after its last block is refused (ErrBadBlock) even when a block
// verifies. With no keys (t not Enabled) nothing is trusted.
func (t Trust) Check(im *Image) ([]KeyDigest, error) {
	if im.Content == 0 {
		return nil, fmt.Errorf("%w: the image has no signature sector", ErrUnsigned)
	}
	checks := t.CheckBlocks(im)
	var signers []KeyDigest
	var reasons []string
	for _, c := range checks {
		if c.Err == nil {
			signers = append(signers, c.Block.KeyDigest)
			continue
		}
		reasons = append(reasons, detail(c.Err))
	}
	if im.SectorErr != nil {
		return nil, im.SectorErr
	}
	if len(signers) > 0 {
		return signers, nil
	}
	if len(checks) == 0 {
		return nil, fmt.Errorf("%w: the signature sector holds no block", ErrUnsigned)
	}
	for _, sentinel := range []error{ErrBadSignature, ErrBadBlock, ErrRevokedKey, ErrUntrustedKey} {
		for _, c := range checks {
			if errors.Is(c.Err, sentinel) {
				return nil, fmt.Errorf("%w (%s)", sentinel, strings.Join(reasons, "; "))
			}
		}
	}
	return nil, fmt.Errorf("%w (%s)", ErrUntrustedKey, strings.Join(reasons, "; "))
}

// detail is err's text after its sentinel's: what it adds.
func detail(err error) string {
	for _, s := range []error{ErrBadSignature, ErrBadBlock, ErrRevokedKey, ErrUntrustedKey, ErrUnsigned} {
		if errors.Is(err, s) {
			return strings.TrimPrefix(err.Error(), s.Error()+": ")
		}
	}
	return err.Error()
}

// Sign returns img with one more signature block, made with key. An
// unsigned image is first padded with 0xFF to a SectorSize boundary (the
// padding is signed content); a signed one keeps its blocks, which must
// be well formed and made for the same content. The image's structure is
// checked first (any chip, any project).
func Sign(img []byte, key *ecdsa.PrivateKey) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: no key", ErrKey)
	}
	d, err := DigestOf(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	im, err := Inspect(img)
	if err != nil {
		return nil, err
	}
	var content, sector []byte
	if im.Content == 0 {
		content = append(bytes.Clone(img), bytes.Repeat([]byte{erasedByte}, int(padTo(int64(len(img)))))...)
	} else {
		if im.SectorErr != nil {
			return nil, im.SectorErr
		}
		for _, blk := range im.Blocks {
			if blk.Err != nil {
				return nil, blk.Err
			}
			if blk.ImageDigest != im.Digest {
				return nil, fmt.Errorf("%w: block %d was made for other content", ErrBadSignature, blk.Index)
			}
			if blk.KeyDigest == d {
				return nil, fmt.Errorf("%w: block %d, key %s", ErrAlreadySigned, blk.Index, d.Short())
			}
		}
		if len(im.Blocks) >= MaxSigBlocks {
			return nil, fmt.Errorf("%w: it carries %d", ErrSignatureFull, len(im.Blocks))
		}
		content = img[:im.Content:im.Content]
		sector = bytes.Clone(img[im.Content : im.Content+int64(len(im.Blocks))*SigBlockSize])
	}
	digest := sha256.Sum256(content)
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return nil, fmt.Errorf("%w: signing: %v", ErrKey, err)
	}
	if sector, err = AppendBlock(sector, digest, &key.PublicKey, r, s); err != nil {
		return nil, err
	}
	sector = append(sector, bytes.Repeat([]byte{erasedByte}, SectorSize-len(sector))...)
	out := make([]byte, 0, len(content)+SectorSize)
	return append(append(out, content...), sector...), nil
}

// padTo is the 0xFF padding after end that brings the signature sector to
// a SectorSize boundary.
func padTo(end int64) int64 { return (SectorSize - end%SectorSize) % SectorSize }

// Inspect checks the structure of an image in memory for whatever chip
// its header names, of any project: what tools use to look at an image
// before they know which board takes it.
func Inspect(b []byte) (*Image, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	return VerifyBytes(b, Expect{Chip: h.ChipID, ChipRev: h.MinChipRevFull, Force: true})
}
