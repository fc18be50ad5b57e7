package ota

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

func newSigningKey(t *testing.T) (*ecdsa.PrivateKey, image.KeyDigest) {
	t.Helper()
	k, err := image.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := image.DigestOf(&k.PublicKey)
	return k, d
}

func signed(t *testing.T, img []byte, keys ...*ecdsa.PrivateKey) []byte {
	t.Helper()
	for _, k := range keys {
		var err error
		if img, err = image.Sign(img, k); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return string(s[:])
}

// TestSecureService: with keys burned the service refuses an unsigned
// upload without touching the slot or otadata, stages a signed one, shows
// its signers, and checks the signature again at activation.
func TestSecureService(t *testing.T) {
	ka, da := newSigningKey(t)
	kb, db := newSigningKey(t)
	e := newEnv(t)
	fuses := efuse.Open(filepath.Join(e.dir, flash.Dir))
	if _, err := fuses.Burn([]image.KeyDigest{da, db}); err != nil {
		t.Fatal(err)
	}
	st := e.status()
	if !st.SecureBoot.Enabled || len(st.SecureBoot.Keys) != 2 || st.SecureBoot.Keys[0].Digest != da.String() {
		t.Fatalf("secure_boot %+v", st.SecureBoot)
	}
	slot1, od := filepath.Join(e.dir, flash.Dir, "ota_1"), filepath.Join(e.dir, flash.Dir, flash.OTAData)
	before1, beforeOD := fileSum(t, slot1), fileSum(t, od)
	r := e.upload(testImage(t, "2.0.0", "holo-board", 5000), "?activate=1")
	if r.status != 422 || r.code() != "invalid_image" || !strings.Contains(string(r.body), "not signed") {
		t.Fatalf("unsigned: %d %s", r.status, r.body)
	}
	if fileSum(t, slot1) != before1 || fileSum(t, od) != beforeOD {
		t.Fatal("a refused upload changed the slot or otadata")
	}
	if r := e.upload(signed(t, testImage(t, "2.0.0", "holo-board", 5000), ka), ""); r.status != 200 {
		t.Fatalf("signed: %d %s", r.status, r.body)
	}
	st = e.status()
	if !slices.Equal(st.Slots[1].Signers, []string{da.String()}) || st.Slots[1].App.Version != "2.0.0" {
		t.Fatalf("staged slot %+v", st.Slots[1])
	}
	// a is revoked before the activation: the recheck refuses.
	if _, done, err := fuses.Revoke([]image.KeyDigest{db}, []image.KeyDigest{da}); err != nil || len(done) != 1 {
		t.Fatalf("revoke: %v %v", done, err)
	}
	if r := e.post("/ota/activate", `{}`); r.status != 422 || r.code() != "invalid_image" || !strings.Contains(string(r.body), "revoked") {
		t.Fatalf("activate: %d %s", r.status, r.body)
	}
	if s := e.svc.Session(); s.State != StateFailed || e.record().Boot() != 0 {
		t.Fatalf("after the refused activation: %+v", s)
	}
	if r := e.upload(signed(t, testImage(t, "3.0.0", "holo-board", 5000), kb), "?activate=1&reboot=0"); r.status != 200 || r.session(t).State != StateActive {
		t.Fatalf("b's image: %d %s", r.status, r.body)
	}
}

// TestFleetSecureBoot: a fleet-mode board burns Config.Keys at its first
// boot, boots its factory image unsigned, takes an update signed by the
// first key, and revokes it once an update signed by the second key that
// asks for it has confirmed itself.
func TestFleetSecureBoot(t *testing.T) {
	ka, da := newSigningKey(t)
	kb, db := newSigningKey(t)
	fb := startFleetBoardWith(t, "", []image.KeyDigest{da, db})
	st := fb.waitRunning(t, "ota_0", "1.0.0", "confirmed")
	if !st.SecureBoot.Enabled || len(st.SecureBoot.Keys) != 2 {
		t.Fatalf("secure_boot %+v", st.SecureBoot)
	}
	if r := fb.put(t, testImage(t, "2.0.0", "holo-board", 3000), "?activate=1&reboot=1"); r != 422 {
		t.Fatalf("unsigned update: %d", r)
	}
	if r := fb.put(t, signed(t, testImage(t, "2.0.0", "holo-board", 3000), ka), "?activate=1&reboot=1"); r != 200 {
		t.Fatalf("update signed by a: %d", r)
	}
	st = fb.waitRunning(t, "ota_1", "2.0.0", "confirmed")
	if !slices.Equal(st.Slots[1].Signers, []string{da.String()}) {
		t.Fatalf("running signers %v", st.Slots[1].Signers)
	}
	d := image.Desc{Version: "3.0.0", Project: "holo-board", Date: "Jan  1 2026", Time: "00:00:00", IDF: "test", Revoke: []image.KeyDigest{da}}
	img, err := image.Pack(d, bytes.Repeat([]byte("3"), 3000))
	if err != nil {
		t.Fatal(err)
	}
	if r := fb.put(t, signed(t, img, kb), "?activate=1&reboot=1"); r != 200 {
		t.Fatalf("update signed by b: %d", r)
	}
	fb.waitRunning(t, "ota_0", "3.0.0", "confirmed")
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ = fb.status(t)
		if len(st.SecureBoot.Keys) == 2 && st.SecureBoot.Keys[0].Revoked && !st.SecureBoot.Keys[1].Revoked &&
			st.Slots[1].State != nil && *st.Slots[1].State == "invalid" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a not revoked, or its image not invalid: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDowngradeRefusedEarly: an image below the board's secure version is
// refused from its first bytes (the description), not after the whole
// image came: the sender here never sends the rest, and the refusal still
// arrives.
func TestDowngradeRefusedEarly(t *testing.T) {
	e := newEnv(t)
	if _, err := efuse.Open(filepath.Join(e.dir, flash.Dir)).BurnSecureVersion(2); err != nil {
		t.Fatal(err)
	}
	img, err := image.WithSecureVersion(testImage(t, "1.5.0", "holo-board", 1<<20), 1)
	if err != nil {
		t.Fatal(err)
	}
	slot1 := filepath.Join(e.dir, flash.Dir, "ota_1")
	before := fileSum(t, slot1)
	pr, pw := io.Pipe()
	defer pw.Close()
	got := make(chan reply, 1)
	go func() {
		r, err := e.try("PUT", "/ota/image", pr, int64(len(img)))
		if err != nil {
			r = reply{status: -1, body: []byte(err.Error())}
		}
		got <- r
	}()
	if _, err := pw.Write(img[:image.EarlyCheckSize+512]); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.status != 422 || r.code() != "downgrade_refused" {
			t.Fatalf("%d %s, want 422 downgrade_refused", r.status, r.body)
		}
	case <-time.After(time.Minute):
		t.Fatal("no refusal while the image's rest was still to come")
	}
	if fileSum(t, slot1) != before {
		t.Fatal("the refused upload changed the slot")
	}
}
