package image

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixedKey is a P-256 key from a fixed scalar, so vectors do not change.
func fixedKey(t testing.TB, seed byte) *ecdsa.PrivateKey {
	t.Helper()
	scalar := bytes.Repeat([]byte{seed}, 32)
	scalar[0] = 0x11 // below the group order
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func digestOf(t testing.TB, k *ecdsa.PrivateKey) KeyDigest {
	t.Helper()
	d, err := DigestOf(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustSign(t testing.TB, img []byte, keys ...*ecdsa.PrivateKey) []byte {
	t.Helper()
	for _, k := range keys {
		var err error
		if img, err = Sign(img, k); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// fixCRC recomputes the CRC of block i of a signed image, as someone
// editing a block on purpose would.
func fixCRC(img []byte, i int) {
	at := len(img) - SectorSize + i*SigBlockSize
	binary.LittleEndian.PutUint32(img[at+sigOffCRC:], crc32.ChecksumIEEE(img[at:at+sigOffCRC]))
}

// TestBlockVector pins the block layout byte by byte for a fixed key and
// signature.
func TestBlockVector(t *testing.T) {
	k := fixedKey(t, 0x22)
	digest := sha256.Sum256([]byte("content"))
	r, s := big.NewInt(0x0102), new(big.Int).SetBytes(bytes.Repeat([]byte{0xAB}, 32))
	b, err := AppendBlock(nil, digest, &k.PublicKey, r, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != SigBlockSize {
		t.Fatalf("block of %d bytes", len(b))
	}
	raw, _ := k.PublicKey.Bytes()
	want := unhex(t, "e7 03 00 00")
	want = append(want, digest[:]...)
	want = append(want, CurveP256)
	want = append(want, reversed(raw[1:33])...)
	want = append(want, reversed(raw[33:65])...)
	want = append(want, unhex(t, "0201")...)
	want = append(want, make([]byte, 30)...)
	want = append(want, bytes.Repeat([]byte{0xAB}, 32)...)
	want = append(want, make([]byte, 1031)...)
	want = binary.LittleEndian.AppendUint32(want, crc32.ChecksumIEEE(want))
	want = append(want, make([]byte, 16)...)
	if diff := cmp.Diff(b, want); diff != "" {
		t.Fatalf("block (-got +want):\n%s", diff)
	}
	blk := parseBlock(0, b)
	if blk.Err != nil || blk.ImageDigest != digest || blk.KeyDigest != sha256.Sum256(b[36:101]) || !blk.Key.Equal(&k.PublicKey) {
		t.Fatalf("parsed %+v", blk)
	}
	if new(big.Int).SetBytes(blk.R[:]).Cmp(r) != 0 || new(big.Int).SetBytes(blk.S[:]).Cmp(s) != 0 {
		t.Fatalf("r, s %x %x", blk.R, blk.S)
	}
	if d := digestOf(t, k); d != blk.KeyDigest {
		t.Fatalf("DigestOf %s, block %s", d, blk.KeyDigest)
	}
}

// TestInteropVector verifies an image signed by testdata/make_vector.py,
// an independent Python implementation of the documented block layout
// (python3-cryptography), and its key digest.
func TestInteropVector(t *testing.T) {
	img, err := os.ReadFile("testdata/python-signed.bin")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/python-signed.digest")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseKeyDigest(string(want))
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile("testdata/python-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := DigestOf(pub); got != d {
		t.Fatalf("DigestOf %s, python says %s", got, d)
	}
	im, err := VerifyBytes(img, hostExpect)
	if err != nil {
		t.Fatal(err)
	}
	signers, err := Trust{Keys: []KeyDigest{d}}.Check(im)
	if err != nil || len(signers) != 1 || signers[0] != d {
		t.Fatalf("check: %v %v", signers, err)
	}
}

func TestSignAndCheck(t *testing.T) {
	a, b, c := fixedKey(t, 1), fixedKey(t, 2), fixedKey(t, 3)
	da, db, dc := digestOf(t, a), digestOf(t, b), digestOf(t, c)
	plain := mustPack(t, testDesc(), bytes.Repeat([]byte("sig"), 2000))
	one := mustSign(t, plain, a)
	three := mustSign(t, plain, a, b, c)
	mod := func(src []byte, f func(b []byte)) []byte { b := bytes.Clone(src); f(b); return b }
	sector := func(b []byte) int { return len(b) - SectorSize }
	// A payload changed with its checksum and appended hash repaired:
	// only the signature can tell.
	tampered := func() []byte {
		im, err := VerifyBytes(one, hostExpect)
		if err != nil {
			t.Fatal(err)
		}
		b := bytes.Clone(one)
		at := im.Segments[1].Offset
		b[at] ^= 0x01
		b[at+1] ^= 0x01 // two flips in one byte lane keep the XOR checksum
		end := im.Size - SectorSize - padTo(int64(len(plain)))
		h := sha256.Sum256(b[:end-HashSize])
		copy(b[end-HashSize:], h[:])
		return b
	}()
	other := mustSign(t, mustPack(t, testDesc(), []byte("other")), a)
	stolen := append(bytes.Clone(one[:sector(one)]), other[sector(other):]...)
	tests := []struct {
		name    string
		img     []byte
		trust   Trust
		verr    error // from the structure check
		want    error
		signers []KeyDigest
	}{
		{"signed, trusted", one, Trust{Keys: []KeyDigest{da}}, nil, nil, []KeyDigest{da}},
		{"unsigned", plain, Trust{Keys: []KeyDigest{da}}, nil, ErrUnsigned, nil},
		{"unknown key", one, Trust{Keys: []KeyDigest{db}}, nil, ErrUntrustedKey, nil},
		{"revoked key", one, Trust{Keys: []KeyDigest{da, db}, Revoked: []KeyDigest{da}}, nil, ErrRevokedKey, nil},
		{"three blocks, last trusted", three, Trust{Keys: []KeyDigest{dc}}, nil, nil, []KeyDigest{dc}},
		{"three blocks, two trusted", three, Trust{Keys: []KeyDigest{dc, da}}, nil, nil, []KeyDigest{da, dc}},
		{"three blocks, first revoked", three, Trust{Keys: []KeyDigest{da, db}, Revoked: []KeyDigest{da}}, nil, nil, []KeyDigest{db}},
		{"tampered payload", tampered, Trust{Keys: []KeyDigest{da}}, nil, ErrBadSignature, nil},
		{"block of another image", stolen, Trust{Keys: []KeyDigest{da}}, nil, ErrBadSignature, nil},
		{"flipped image digest, CRC kept", mod(one, func(b []byte) { b[sector(b)+4] ^= 1 }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped image digest, CRC fixed", mod(one, func(b []byte) { b[sector(b)+4] ^= 1; fixCRC(b, 0) }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadSignature, nil},
		{"flipped signature, CRC fixed", mod(one, func(b []byte) { b[sector(b)+120] ^= 0x80; fixCRC(b, 0) }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadSignature, nil},
		{"flipped key, CRC fixed", mod(one, func(b []byte) { b[sector(b)+40] ^= 1; fixCRC(b, 0) }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped magic", mod(one, func(b []byte) { b[sector(b)] ^= 1 }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped CRC", mod(one, func(b []byte) { b[sector(b)+sigOffCRC] ^= 1 }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped block padding", mod(one, func(b []byte) { b[sector(b)+SigBlockSize-1] ^= 1 }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped reserved byte, CRC fixed", mod(one, func(b []byte) { b[sector(b)+500] ^= 1; fixCRC(b, 0) }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped erased tail", mod(one, func(b []byte) { b[len(b)-1] ^= 1 }), Trust{Keys: []KeyDigest{da}}, nil, ErrBadBlock, nil},
		{"flipped padding before the sector", mod(one, func(b []byte) { b[sector(b)-1] ^= 1 }), Trust{}, ErrTrailing, nil, nil},
		{"flipped payload bit", mod(one, func(b []byte) { b[400] ^= 0x10 }), Trust{}, ErrChecksum, nil, nil},
		{"truncated block", one[:len(one)-SectorSize+100], Trust{}, ErrTruncated, nil, nil},
		{"sector without its last byte", one[:len(one)-1], Trust{}, ErrTruncated, nil, nil},
		{"no keys trusts nothing", one, Trust{}, nil, ErrUntrustedKey, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, err := VerifyBytes(tt.img, hostExpect)
			if !errors.Is(err, tt.verr) || (err == nil) != (tt.verr == nil) {
				t.Fatalf("structure: %v, want %v", err, tt.verr)
			}
			if err != nil {
				return
			}
			signers, err := tt.trust.Check(im)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("check: %v, want %v", err, tt.want)
			}
			if diff := cmp.Diff(signers, tt.signers); diff != "" {
				t.Fatalf("signers (-got +want):\n%s", diff)
			}
			for _, s := range []error{ErrUnsigned, ErrUntrustedKey, ErrRevokedKey, ErrBadSignature, ErrBadBlock} {
				if err != nil && s != tt.want && errors.Is(err, s) {
					t.Errorf("error %v also wraps %v", err, s)
				}
			}
		})
	}
}

func TestSignLayout(t *testing.T) {
	a, b := fixedKey(t, 1), fixedKey(t, 2)
	plain := mustPack(t, testDesc(), []byte("layout"))
	one := mustSign(t, plain, a)
	if len(one)%SectorSize != 0 || len(one) != int(int64(len(plain))+padTo(int64(len(plain))))+SectorSize {
		t.Fatalf("signed size %d from %d", len(one), len(plain))
	}
	if !bytes.Equal(one[:len(plain)], plain) || bytes.Count(one[len(plain):len(one)-SectorSize], []byte{0xFF}) != len(one)-SectorSize-len(plain) {
		t.Fatal("the image is not kept, then 0xFF padding")
	}
	two := mustSign(t, one, b)
	if !bytes.Equal(two[:len(one)-SectorSize+SigBlockSize], one[:len(one)-SectorSize+SigBlockSize]) || len(two) != len(one) {
		t.Fatal("a second signature must keep the content and the first block")
	}
	im, err := VerifyBytes(two, hostExpect)
	if err != nil {
		t.Fatal(err)
	}
	if im.Content != int64(len(one)-SectorSize) || im.Digest != sha256.Sum256(one[:im.Content]) || len(im.Blocks) != 2 {
		t.Fatalf("content %d digest %x blocks %d", im.Content, im.Digest, len(im.Blocks))
	}
	if got := Signers(im); len(got) != 2 || got[0] != digestOf(t, a) || got[1] != digestOf(t, b) {
		t.Fatalf("signers %v", got)
	}
	if im.SHA256 != sha256.Sum256(two) || im.Size != int64(len(two)) {
		t.Fatal("whole-image SHA-256 and size must cover the sector")
	}
	if _, err := Sign(two, a); !errors.Is(err, ErrAlreadySigned) {
		t.Fatalf("same key twice: %v", err)
	}
	full := mustSign(t, two, fixedKey(t, 3))
	if _, err := Sign(full, fixedKey(t, 4)); !errors.Is(err, ErrSignatureFull) {
		t.Fatalf("fourth block: %v", err)
	}
	bad := bytes.Clone(one)
	bad[len(bad)-SectorSize+sigOffCRC] ^= 1
	if _, err := Sign(bad, b); !errors.Is(err, ErrBadBlock) {
		t.Fatalf("signing over a bad block: %v", err)
	}
	// An image whose end is already on a sector boundary takes no padding.
	for n := 1; n < 40; n++ {
		p := mustPack(t, testDesc(), bytes.Repeat([]byte{7}, 4096-352+16*n-16))
		if len(p)%SectorSize == 0 {
			s := mustSign(t, p, a)
			if len(s) != len(p)+SectorSize {
				t.Fatalf("aligned image grew by %d", len(s)-len(p))
			}
			return
		}
	}
	t.Fatal("no aligned image made")
}

// TestVerifyAtSigned: a slot holding a signed image followed by old bytes,
// and an unsigned image followed by bytes that merely look like a sector.
func TestVerifyAtSigned(t *testing.T) {
	a := fixedKey(t, 1)
	signed := mustSign(t, mustPack(t, testDesc(), bytes.Repeat([]byte("slot"), 3000)), a)
	slot := append(bytes.Clone(signed), bytes.Repeat([]byte{0xAB}, 5000)...)
	im, err := VerifyAt(bytes.NewReader(slot), int64(len(slot)), hostExpect)
	if err != nil || im.Size != int64(len(signed)) || len(im.Blocks) != 1 {
		t.Fatalf("%v %+v", err, im)
	}
	if _, err := (Trust{Keys: []KeyDigest{digestOf(t, a)}}).Check(im); err != nil {
		t.Fatal(err)
	}
	plain := mustPack(t, testDesc(), []byte("short"))
	junk := append(bytes.Clone(plain), bytes.Repeat([]byte{0x00}, 9000)...)
	im, err = VerifyAt(bytes.NewReader(junk), int64(len(junk)), hostExpect)
	if err != nil || im.Signed() || im.Size != int64(len(plain)) {
		t.Fatalf("unsigned in a zeroed slot: %v %+v", err, im)
	}
	// A signed image in a slot too short for its sector reads as unsigned.
	im, err = VerifyAt(bytes.NewReader(signed[:len(signed)-1]), int64(len(signed)-1), hostExpect)
	if err != nil || im.Signed() {
		t.Fatalf("cut sector: %v %+v", err, im)
	}
}

func TestParseSector(t *testing.T) {
	k := fixedKey(t, 5)
	digest := sha256.Sum256([]byte("x"))
	good, err := AppendBlock(nil, digest, &k.PublicKey, big.NewInt(5), big.NewInt(6))
	if err != nil {
		t.Fatal(err)
	}
	sector := func(blocks ...[]byte) []byte {
		var s []byte
		for _, b := range blocks {
			s = append(s, b...)
		}
		return append(s, bytes.Repeat([]byte{0xFF}, SectorSize-len(s))...)
	}
	edit := func(f func(b []byte), crc bool) []byte {
		b := bytes.Clone(good)
		f(b)
		if crc {
			binary.LittleEndian.PutUint32(b[sigOffCRC:], crc32.ChecksumIEEE(b[:sigOffCRC]))
		}
		return b
	}
	tests := []struct {
		name   string
		sec    []byte
		blocks int
		bad    []string // per block: "" for good, else a word of the error
		secErr string
	}{
		{"empty", sector(), 0, nil, ""},
		{"one", sector(good), 1, []string{""}, ""},
		{"three", sector(good, good, good), 3, []string{"", "", ""}, ""},
		{"magic", sector(edit(func(b []byte) { b[0] = 0xE6 }, true)), 1, []string{"magic"}, ""},
		{"rsa", sector(edit(func(b []byte) { b[1] = 2 }, true)), 1, []string{"RSA"}, ""},
		{"version", sector(edit(func(b []byte) { b[1] = 9 }, true)), 1, []string{"version"}, ""},
		{"sha384", sector(edit(func(b []byte) { b[2] = 1 }, true)), 1, []string{"hash scheme"}, ""},
		{"reserved 3", sector(edit(func(b []byte) { b[3] = 1 }, true)), 1, []string{"reserved byte 3"}, ""},
		{"p192", sector(edit(func(b []byte) { b[36] = 1 }, true)), 1, []string{"P-192"}, ""},
		{"curve", sector(edit(func(b []byte) { b[36] = 7 }, true)), 1, []string{"curve id"}, ""},
		{"reserved", sector(edit(func(b []byte) { b[1000] = 1 }, true)), 1, []string{"reserved byte 1000"}, ""},
		{"padding", sector(edit(func(b []byte) { b[1210] = 1 }, false)), 1, []string{"padding"}, ""},
		{"crc", sector(edit(func(b []byte) { b[50] ^= 1 }, false)), 1, []string{"CRC"}, ""},
		{"off curve", sector(edit(func(b []byte) { b[40] ^= 1 }, true)), 1, []string{"public key"}, ""},
		{"bad then good", sector(edit(func(b []byte) { b[50] ^= 1 }, false), good), 2, []string{"CRC", ""}, ""},
		{"data after the last block", func() []byte { s := sector(good); s[3000] = 0; return s }(), 1, []string{""}, "after the last block"},
		{"data after three blocks", func() []byte { s := sector(good, good, good); s[4000] = 1; return s }(), 3, []string{"", "", ""}, "after the last block"},
		{"erased then data", func() []byte { s := sector(good); s[SigBlockSize+5] = 0; return s }(), 1, []string{""}, "after the last block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks, err := ParseSector(tt.sec)
			if len(blocks) != tt.blocks {
				t.Fatalf("%d blocks, want %d", len(blocks), tt.blocks)
			}
			for i, b := range blocks {
				switch {
				case tt.bad[i] == "" && b.Err != nil:
					t.Errorf("block %d: %v", i, b.Err)
				case tt.bad[i] != "" && (!errors.Is(b.Err, ErrBadBlock) || !strings.Contains(b.Err.Error(), tt.bad[i])):
					t.Errorf("block %d: %v, want %q", i, b.Err, tt.bad[i])
				}
			}
			if tt.secErr == "" && err != nil || tt.secErr != "" && (!errors.Is(err, ErrBadBlock) || !strings.Contains(err.Error(), tt.secErr)) {
				t.Errorf("sector error %v, want %q", err, tt.secErr)
			}
		})
	}
	if _, err := ParseSector(good); !errors.Is(err, ErrBadBlock) {
		t.Errorf("short sector: %v", err)
	}
}

// FuzzParseSector feeds sectors made of the fuzzer's bytes followed by
// erased flash (a whole sector of input slows the fuzzer to a crawl; the
// length rule is TestParseSector's).
func FuzzParseSector(f *testing.F) {
	k := fixedKey(f, 5)
	good, err := AppendBlock(nil, sha256.Sum256(nil), &k.PublicKey, big.NewInt(1), big.NewInt(2))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{})
	f.Add(good)
	f.Add(append(bytes.Clone(good), good...))
	bad := bytes.Clone(good)
	bad[36] = 1
	f.Add(bad)
	f.Add(append(bytes.Clone(good), 0))
	f.Fuzz(func(t *testing.T, head []byte) {
		if len(head) > SectorSize {
			head = head[:SectorSize]
		}
		sec := append(bytes.Clone(head), bytes.Repeat([]byte{0xFF}, SectorSize-len(head))...)
		blocks, err := ParseSector(sec)
		if len(blocks) > MaxSigBlocks {
			t.Fatalf("%d blocks", len(blocks))
		}
		if err != nil && !errors.Is(err, ErrBadBlock) {
			t.Fatalf("sector error %v", err)
		}
		for i, b := range blocks {
			if b.Index != i {
				t.Fatalf("block %d has index %d", i, b.Index)
			}
			if b.Err != nil {
				if !errors.Is(b.Err, ErrBadBlock) || b.Key != nil {
					t.Fatalf("bad block %d: %v, key %v", i, b.Err, b.Key)
				}
				continue
			}
			// A good block encodes back to its bytes.
			again, err := AppendBlock(nil, b.ImageDigest, b.Key, new(big.Int).SetBytes(b.R[:]), new(big.Int).SetBytes(b.S[:]))
			if err != nil {
				continue // r or s of zero: well formed, yet no signature could hold them
			}
			if !bytes.Equal(again, sec[i*SigBlockSize:(i+1)*SigBlockSize]) {
				t.Fatalf("block %d does not round-trip", i)
			}
		}
	})
}

func TestKeysPEM(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := MarshalPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := MarshalPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParsePrivateKey(priv)
	if err != nil || !k2.Equal(k) {
		t.Fatalf("private round trip: %v", err)
	}
	for _, src := range [][]byte{pub, priv} {
		p, err := ParsePublicKey(src)
		if err != nil || !p.Equal(&k.PublicKey) {
			t.Fatalf("public from %q: %v", src[:20], err)
		}
	}
	line, err := LinkKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := ParseLinkKey(line); err != nil || !p.Equal(&k.PublicKey) {
		t.Fatalf("link key: %v", err)
	}
	for _, bad := range []string{"", "not pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if _, err := ParsePublicKey([]byte(bad)); !errors.Is(err, ErrKey) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), nil)
	if _, err := DigestOf(&p384.PublicKey); !errors.Is(err, ErrKey) {
		t.Errorf("P-384: %v", err)
	}
	d := digestOf(t, k)
	if got, err := ParseKeyDigest(d.String()); err != nil || got != d {
		t.Fatalf("digest round trip: %v", err)
	}
	if _, err := ParseKeyDigest("abc"); !errors.Is(err, ErrKey) {
		t.Fatal(err)
	}
}

func TestDescRevoke(t *testing.T) {
	d := testDesc()
	r1, r2 := KeyDigest{1, 2, 3}, KeyDigest{9: 9}
	d.Revoke = []KeyDigest{r1, r2}
	b, err := d.Append(nil)
	if err != nil || len(b) != DescSize {
		t.Fatalf("%v %d", err, len(b))
	}
	if !bytes.Equal(b[184:216], r1[:]) || !bytes.Equal(b[216:248], r2[:]) || !bytes.Equal(b[176:184], make([]byte, 8)) || !bytes.Equal(b[248:], make([]byte, 8)) {
		t.Fatalf("layout:\n% x", b[176:])
	}
	back, err := ParseDesc(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(back, d); diff != "" {
		t.Fatalf("(-got +want):\n%s", diff)
	}
	d.Revoke = append(d.Revoke, KeyDigest{7})
	if _, err := d.Append(nil); !errors.Is(err, ErrField) {
		t.Fatalf("three revocations: %v", err)
	}
	d.Revoke = []KeyDigest{{}}
	if _, err := d.Append(nil); !errors.Is(err, ErrField) {
		t.Fatalf("zero digest: %v", err)
	}
}

func TestWithRevoke(t *testing.T) {
	plain := mustPack(t, testDesc(), bytes.Repeat([]byte("r"), 999))
	r := KeyDigest{1}
	b, err := WithRevoke(plain, []KeyDigest{r})
	if err != nil {
		t.Fatal(err)
	}
	im, err := VerifyBytes(b, hostExpect)
	if err != nil || len(im.Desc.Revoke) != 1 || im.Desc.Revoke[0] != r || len(b) != len(plain) {
		t.Fatalf("%v %+v", err, im)
	}
	if back, err := WithRevoke(b, nil); err != nil || !bytes.Equal(back, plain) {
		t.Fatalf("clearing: %v", err)
	}
	if _, err := WithRevoke(mustSign(t, b, fixedKey(t, 1)), nil); !errors.Is(err, ErrField) {
		t.Fatalf("signed: %v", err)
	}
}

// ExampleSign signs an image twice and checks it the way a board whose
// eFuses hold the second key does.
func ExampleSign() {
	oldKey, _ := GenerateKey()
	newKey, _ := GenerateKey()
	img, _ := Pack(Desc{Project: "holo-board", Version: "2.0.0"}, []byte("firmware"))
	img, _ = Sign(img, oldKey)
	img, _ = Sign(img, newKey)

	im, _ := Inspect(img)
	d, _ := DigestOf(&newKey.PublicKey)
	signers, err := Trust{Keys: []KeyDigest{d}}.Check(im)
	fmt.Println(len(im.Blocks), "blocks;", len(signers) == 1 && signers[0] == d, err)
	// Output: 2 blocks; true <nil>
}
