package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
)

// withSV is img with secure version sv, before signing.
func withSV(t *testing.T, img []byte, sv uint32) []byte {
	t.Helper()
	out, err := image.WithSecureVersion(img, sv)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func boardSV(t *testing.T, b *boardtest.Board) uint32 {
	t.Helper()
	return secureState(t, b).SecureBoot.SecureVersion
}

// TestAntiRollback is the attack of issue 25 row 11 on real processes:
// signed 2.0.0 (secure version 2) is uploaded, boots and confirms, which
// burns secure version 2; a signed 1.0.0 (secure version 1) is then
// refused at upload with 422 downgrade_refused. After a key rotation (3.0.0
// signed by the new key revokes the old one), a 1.0.0 signed by the new
// key is refused the same way. The burned version survives a power cut.
func TestAntiRollback(t *testing.T) {
	a, b := newKey(t), newKey(t)
	dir := t.TempDir()
	bd := boardtest.Start(t, dir, keyArgs(a, b)...)
	if sv := boardSV(t, bd); sv != 0 {
		t.Fatalf("a new board's secure version: %d", sv)
	}
	if r := put(bd, signWith(t, withSV(t, boardImage(t, "2.0.0"), 2), a), "?activate=1&reboot=1"); r.Status != 200 {
		t.Fatalf("2.0.0: %d %s", r.Status, r.Body)
	}
	waitVersion(t, bd, "2.0.0")
	waitConfirmed(t, bd, "ota_1")
	boardtest.WaitFor(t, 20*time.Second, "secure version 2 burned", func() bool { return boardSV(t, bd) == 2 })

	refused := func(img []byte, what string) {
		t.Helper()
		r := put(bd, img, "?activate=1&reboot=1")
		if r.Status != 422 || r.ErrorCode() != "downgrade_refused" || !strings.Contains(string(r.Body), "secure version 1") {
			t.Fatalf("%s: %d %s, want 422 downgrade_refused", what, r.Status, r.Body)
		}
		if got := version(bd); got == "1.0.0" {
			t.Fatalf("%s: the board runs 1.0.0", what)
		}
	}
	refused(signWith(t, withSV(t, tinyImage(t, "1.0.0"), 1), a), "1.0.0 signed by a")
	// Same secure version, newer release: taken.
	if r := put(bd, signWith(t, withSV(t, tinyImage(t, "2.0.1"), 2), a), ""); r.Status != 200 {
		t.Fatalf("2.0.1 at secure version 2: %d %s", r.Status, r.Body)
	}

	// Key rotation: 3.0.0 signed by b revokes a.
	rot, err := image.WithRevoke(withSV(t, boardImage(t, "3.0.0"), 3), []image.KeyDigest{a.digest})
	if err != nil {
		t.Fatal(err)
	}
	if r := put(bd, signWith(t, rot, b), "?activate=1&reboot=1"); r.Status != 200 {
		t.Fatalf("3.0.0: %d %s", r.Status, r.Body)
	}
	waitVersion(t, bd, "3.0.0")
	boardtest.WaitFor(t, 20*time.Second, "a revoked, secure version 3", func() bool {
		v := secureState(t, bd)
		return v.SecureBoot.SecureVersion == 3 && slices.Contains(v.keysOf(), a.digest.String()+" revoked")
	})
	refused(signWith(t, withSV(t, tinyImage(t, "1.0.0"), 1), b), "1.0.0 signed by the new key")

	bd.Kill() // a power cut
	bd = boardtest.Start(t, dir, keyArgs(a, b)...)
	if sv := boardSV(t, bd); sv != 3 || version(bd) != "3.0.0" {
		t.Fatalf("after the cut: secure version %d, running %s", sv, version(bd))
	}
	refused(signWith(t, withSV(t, tinyImage(t, "1.0.0"), 1), b), "1.0.0 after the cut")
}

// TestSecureVersionBurnPowerCuts extends TestEFuseWritePowerCuts to the
// secure version's burn: the power is pulled at a step of that write,
// when 2.0.0 (secure version 2) has confirmed. The fuses decode after the
// cut, and the next start, booting the confirmed image, burns the version
// (again): 1.0.0 at secure version 1 is then refused. Smoke: one step;
// soak: all three.
func TestSecureVersionBurnPowerCuts(t *testing.T) {
	steps := testlevel.Pick([]string{"secver:synced"}, []string{"secver:written", "secver:synced", "secver:renamed"})
	a := newKey(t)
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			bd := boardtest.Start(t, dir, append(keyArgs(a), "--fault-efuse-cut", step)...)
			if r := put(bd, signWith(t, withSV(t, boardImage(t, "2.0.0"), 2), a), "?activate=1&reboot=1"); r.Status != 200 {
				t.Fatalf("2.0.0: %d %s", r.Status, r.Body)
			}
			// The power cut: the supervisor is killed (SIGKILL).
			if err := bd.Cmd.Wait(); err == nil || !strings.Contains(bd.Log(), "fault hook") {
				t.Fatalf("the board did not die at %s: %v\n%s", step, err, bd.Log())
			}
			st, err := efuse.Open(filepath.Join(dir, "flash")).Read()
			if err != nil || (st.SecureVersion != 0 && st.SecureVersion != 2) || len(st.Keys) != 1 {
				t.Fatalf("fuses after the cut: %+v %v", st, err)
			}
			t.Logf("%s: secure version %d at the cut", step, st.SecureVersion)
			bd = boardtest.Start(t, dir, keyArgs(a)...)
			boardtest.WaitFor(t, 30*time.Second, "secure version 2", func() bool { return boardSV(t, bd) == 2 })
			if r := put(bd, signWith(t, withSV(t, tinyImage(t, "1.0.0"), 1), a), ""); r.Status != 422 || r.ErrorCode() != "downgrade_refused" {
				t.Fatalf("1.0.0 after the cut: %d %s", r.Status, r.Body)
			}
		})
	}
}
