package bootloader

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

// signedBoard is a board whose fuses trust keys ka and kb (in that order)
// and whose ota_0 holds the factory image.
type signedBoard struct {
	fl      *flash.Flash
	st      *otadata.Store
	fuses   *efuse.Fuses
	ka, kb  *ecdsa.PrivateKey
	factory []byte
	cfg     Config
}

func newSignedBoard(t *testing.T) *signedBoard {
	t.Helper()
	sb := &signedBoard{}
	var err error
	if sb.ka, err = image.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if sb.kb, err = image.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	sb.fl, err = flash.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sb.fuses = efuse.Open(sb.fl.Dir())
	if _, err := sb.fuses.Burn([]image.KeyDigest{digest(t, sb.ka), digest(t, sb.kb)}); err != nil {
		t.Fatal(err)
	}
	exe := []byte("#!/bin/sh\necho factory\n")
	sb.factory, err = image.Pack(image.Desc{Project: "holo-board", Version: "1.0.0"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	sb.cfg = Config{Flash: sb.fl, Expect: exp, Fuses: sb.fuses, Factory: sha256.Sum256(sb.factory),
		Install: func() ([]byte, error) { return sb.factory, nil }}
	c, err := Choose(sb.cfg)
	if err != nil || !c.Installed || c.Slot != 0 || !c.Factory || !c.SecureBoot || len(c.Signers) != 0 {
		t.Fatalf("first start: %+v %v", c, err)
	}
	p, _ := sb.fl.Open(flash.OTAData)
	t.Cleanup(func() { p.Close() })
	sb.st = otadata.NewStore(p)
	return sb
}

func digest(t *testing.T, k *ecdsa.PrivateKey) image.KeyDigest {
	d, err := image.DigestOf(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func signedImg(t *testing.T, version string, revoke []image.KeyDigest, keys ...*ecdsa.PrivateKey) []byte {
	b, err := image.Pack(image.Desc{Project: "holo-board", Version: version, Revoke: revoke}, []byte("#!/bin/sh\necho "+version+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if b, err = image.Sign(b, k); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (sb *signedBoard) stage(t *testing.T, slot int, b []byte, st otadata.State) {
	write(t, sb.fl, slot, b)
	set(t, sb.st, func(r otadata.Record) (otadata.Record, error) { return r.Select(slot, st) })
}

func TestSecureBootChoice(t *testing.T) {
	tests := []struct {
		name  string
		img   func(sb *signedBoard) []byte
		slot  int // booted
		state otadata.State
	}{
		{"signed by a trusted key", func(sb *signedBoard) []byte { return signedImg(t, "2.0.0", nil, sb.kb) }, 1, otadata.PendingVerify},
		{"unsigned", func(sb *signedBoard) []byte { return img(t, "2.0.0") }, 0, otadata.Invalid},
		{"unknown key", func(sb *signedBoard) []byte { k, _ := image.GenerateKey(); return signedImg(t, "2.0.0", nil, k) }, 0, otadata.Invalid},
		{"tampered after signing", func(sb *signedBoard) []byte {
			b := signedImg(t, "2.0.0", nil, sb.ka)
			b[len(b)-image.SectorSize+120] ^= 1 // in the signature, CRC now wrong
			return b
		}, 0, otadata.Invalid},
		{"factory executable, other description", func(sb *signedBoard) []byte {
			b, _ := image.Pack(image.Desc{Project: "holo-board", Version: "1.0.1"}, []byte("#!/bin/sh\necho factory\n"))
			return b
		}, 0, otadata.Invalid},
		{"the factory image", func(sb *signedBoard) []byte { return sb.factory }, 1, otadata.PendingVerify},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSignedBoard(t)
			sb.stage(t, 1, tt.img(sb), otadata.New)
			c, err := Choose(sb.cfg)
			if err != nil || c.Slot != tt.slot {
				t.Fatalf("%+v %v", c, err)
			}
			if r, _ := sb.st.Read(); r.States[1] != tt.state {
				t.Fatalf("ota_1 %v, want %v", r.States[1], tt.state)
			}
		})
	}
}

// TestRevocationAtBoot: a confirmed image signed by the later key asks to
// revoke the earlier one; the next start revokes it and records the
// previous image (signed by the earlier key) invalid.
func TestRevocationAtBoot(t *testing.T) {
	sb := newSignedBoard(t)
	da, db := digest(t, sb.ka), digest(t, sb.kb)
	sb.stage(t, 1, signedImg(t, "2.0.0", nil, sb.ka), otadata.New)
	if c, err := Choose(sb.cfg); err != nil || c.Slot != 1 || !slices.Equal(c.Signers, []image.KeyDigest{da}) {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := Confirm(sb.fl, 1); err != nil {
		t.Fatal(err)
	}
	sb.stage(t, 0, signedImg(t, "3.0.0", []image.KeyDigest{da}, sb.kb), otadata.New)
	c, err := Choose(sb.cfg)
	if err != nil || c.Slot != 0 || !c.Trial || len(c.Revoked) != 0 {
		t.Fatalf("trial: %+v %v", c, err)
	}
	if st, _ := sb.fuses.Read(); st.Revoked[0] {
		t.Fatal("revoked before the image confirmed itself")
	}
	if _, err := Confirm(sb.fl, 0); err != nil {
		t.Fatal(err)
	}
	c, err = Choose(sb.cfg)
	if err != nil || c.Slot != 0 || !slices.Equal(c.Revoked, []image.KeyDigest{da}) {
		t.Fatalf("after confirmation: %+v %v", c, err)
	}
	st, _ := sb.fuses.Read()
	if !st.Revoked[0] || st.Revoked[1] || st.Trust().Trusted(da) || !st.Trust().Trusted(db) {
		t.Fatalf("fuses %+v", st)
	}
	if r, _ := sb.st.Read(); r.States[1] != otadata.Invalid {
		t.Fatalf("the image signed by the revoked key is %v", r.States[1])
	}
	// The firmware's own call finds nothing more to do.
	if done, err := ApplyRevocations(sb.cfg, 0); err != nil || done != nil {
		t.Fatalf("again: %v %v", done, err)
	}
}

// TestEarlierKeyCannotRevokeLater: an image signed by the first key
// asking to revoke the second changes nothing.
func TestEarlierKeyCannotRevokeLater(t *testing.T) {
	sb := newSignedBoard(t)
	sb.stage(t, 1, signedImg(t, "2.0.0", []image.KeyDigest{digest(t, sb.kb)}, sb.ka), otadata.Valid)
	c, err := Choose(sb.cfg)
	if err != nil || c.Slot != 1 || len(c.Revoked) != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	if st, _ := sb.fuses.Read(); st.Revoked != [efuse.MaxKeys]bool{} {
		t.Fatalf("fuses %+v", st)
	}
}

// TestNothingBootableReinstallsFactory: with keys burned and neither slot
// passing, the factory firmware is installed again rather than the board
// staying dark.
func TestNothingBootableReinstallsFactory(t *testing.T) {
	sb := newSignedBoard(t)
	write(t, sb.fl, 0, img(t, "0.9.0")) // the factory image overwritten by an unsigned one
	c, err := Choose(sb.cfg)
	if err != nil || c.Slot != 0 || !c.Factory || !c.Installed || c.Image.Desc.Version != "1.0.0" {
		t.Fatalf("%+v %v", c, err)
	}
	if r, _ := sb.st.Read(); r.Boot() != 0 || r.States[0] != otadata.Valid {
		t.Fatalf("%+v", r)
	}
	// An open board keeps the old rule: no bootable image is an error.
	fl, st := setup(t)
	write(t, fl, 0, img(t, "0.9.0")[:100])
	if _, err := Choose(Config{Flash: fl, Expect: exp, Install: func() ([]byte, error) { return img(t, "1.0.0"), nil }}); err == nil {
		t.Fatal("an open board reinstalled")
	}
	_ = st
}
