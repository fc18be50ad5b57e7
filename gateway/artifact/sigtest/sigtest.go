// Package sigtest makes signing keys and signed firmware images for tests
// of the gateway's trust checks: good ones, and the ways a signed image
// goes wrong (no block, an unknown or revoked key, a bit flipped in the
// image or in a block, a cut block, several blocks of which one counts).
// The images are real: built with bus/image's Pack and Sign, and
// broken the way a bad copy or a forger would break them.
package sigtest

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
)

// Key is a signing key with its digest and its public half as PEM.
type Key struct {
	Priv   *ecdsa.PrivateKey
	Digest image.KeyDigest
	PubPEM []byte
}

// NewKey makes a fresh P-256 key.
func NewKey(t testing.TB) Key {
	t.Helper()
	k, err := image.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	d, err := image.DigestOf(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := image.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Priv: k, Digest: d, PubPEM: pub}
}

// WritePub writes the public key as PEM into dir and returns the path.
func (k Key) WritePub(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, k.PubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// WritePriv writes the private key as PEM into dir and returns the path.
func (k Key) WritePriv(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := image.MarshalPrivateKey(k.Priv)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Image packs a host image of holo-board with version and size bytes of
// payload, unsigned.
func Image(t testing.TB, version string, size int) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), size/(len(version)+1)+1)[:size]
	b, err := image.Pack(image.Desc{Version: version, Project: image.HostExpect().Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sign adds one block per key, in order.
func Sign(t testing.TB, img []byte, keys ...Key) []byte {
	t.Helper()
	for _, k := range keys {
		var err error
		if img, err = image.Sign(img, k.Priv); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// Offsets inside a block (bus/image's package doc).
const (
	offSig = 101
	offCRC = 1196
)

// sector is where the signature sector of a signed image starts.
func sector(img []byte) int { return len(img) - image.SectorSize }

// FlipSignature flips a bit of block i's signature and mends the block's
// CRC, as a forger would: the block is well formed, its signature wrong.
func FlipSignature(img []byte, i int) []byte {
	b := bytes.Clone(img)
	at := sector(b) + i*image.SigBlockSize
	b[at+offSig+3] ^= 0x01
	binary.LittleEndian.PutUint32(b[at+offCRC:], crc32.ChecksumIEEE(b[at:at+offCRC]))
	return b
}

// FlipBlock flips a bit inside block i (its key), leaving the CRC: the
// block is malformed.
func FlipBlock(img []byte, i int) []byte {
	b := bytes.Clone(img)
	b[sector(b)+i*image.SigBlockSize+40] ^= 0x01
	return b
}

// FlipPayload flips a bit of the executable inside the image: the image's
// own checksum and hash no longer match.
func FlipPayload(img []byte) []byte {
	b := bytes.Clone(img)
	b[image.EarlyCheckSize+64] ^= 0x10
	return b
}

// CutBlock ends the image in the middle of its first block.
func CutBlock(img []byte) []byte {
	return bytes.Clone(img[:sector(img)+image.SigBlockSize/2])
}

// Case is one image and what becomes of it.
type Case struct {
	Name  string
	Image []byte
	// Structural is true when the image itself is broken: every gateway
	// and every board refuses it, keys or not (Want is then nil).
	Structural bool
	// Want is the image sentinel a board (or gateway) trusting Trusted
	// and having revoked Revoked refuses it with; nil: it is accepted.
	Want error
	// Valid is how many blocks verify (trusted or not).
	Valid int
}

// Keys are the three keys of the cases: Trusted is trusted, Unknown is
// not, Revoked is trusted but revoked.
type Keys struct{ Trusted, Unknown, Revoked Key }

// NewKeys makes three fresh keys.
func NewKeys(t testing.TB) Keys {
	return Keys{Trusted: NewKey(t), Unknown: NewKey(t), Revoked: NewKey(t)}
}

// Burned are the keys a secure board of the cases burns, in slot order:
// Revoked first, so that Trusted (burned later) may revoke it.
func (ks Keys) Burned() []image.KeyDigest {
	return []image.KeyDigest{ks.Revoked.Digest, ks.Trusted.Digest}
}

// Trust is what such a board sees once Revoked is revoked.
func (ks Keys) Trust() image.Trust {
	return image.Trust{Keys: ks.Burned(), Revoked: []image.KeyDigest{ks.Revoked.Digest}}
}

// Cases are the images of version made for a board trusting ks.Trust().
// The last is good (three blocks, only the last trusted); so is
// "trusted".
func Cases(t testing.TB, ks Keys, version string) []Case {
	t.Helper()
	base := Image(t, version, 3000)
	good := Sign(t, base, ks.Trusted)
	return []Case{
		{Name: "unsigned", Image: base, Want: image.ErrUnsigned},
		{Name: "unknown-key", Image: Sign(t, base, ks.Unknown), Want: image.ErrUntrustedKey, Valid: 1},
		{Name: "revoked-key", Image: Sign(t, base, ks.Revoked), Want: image.ErrRevokedKey, Valid: 1},
		{Name: "flipped-image-bit", Image: FlipPayload(good), Structural: true},
		{Name: "flipped-signature-bit", Image: FlipSignature(good, 0), Want: image.ErrBadSignature},
		{Name: "flipped-block-bit", Image: FlipBlock(good, 0), Want: image.ErrBadBlock},
		{Name: "truncated-block", Image: CutBlock(good), Structural: true},
		{Name: "trusted", Image: good, Valid: 1},
		{Name: "three-blocks-last-trusted", Image: Sign(t, base, ks.Unknown, ks.Revoked, ks.Trusted), Valid: 3},
	}
}
