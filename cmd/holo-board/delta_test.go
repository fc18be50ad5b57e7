package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/imagedelta"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// runningSHA is the running slot's sha256 in GET /ota (extension
// ota-delta).
func runningSHA(t *testing.T, b *boardtest.Board) string {
	t.Helper()
	var v struct {
		Slots []struct {
			Running bool   `json:"running"`
			SHA256  string `json:"sha256"`
		} `json:"slots"`
	}
	b.Do("GET", "/ota", nil).JSON(t, &v)
	for _, s := range v.Slots {
		if s.Running {
			return s.SHA256
		}
	}
	return ""
}

// TestOTADeltaProcess: a real holo-board process advertises ota-delta,
// shows the SHA-256 of the image it runs, and refuses a delta from
// another base (409 base_mismatch) and a corrupt one (422) without
// changing its slots, answering as its openapi.json says. The soak level
// also rebuilds, activates and boots the image a good delta describes
// (making a delta of the 20 MB test build takes a minute under the race
// detector; TestDeltaUpload in firmware/ota and TestDeltaRollout in
// gateway/rollout rebuild smaller images at every level).
func TestOTADeltaProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := boardtest.Start(t, dir)
	var info struct {
		Extensions []string `json:"extensions"`
	}
	b.Do("GET", "/info", nil).JSON(t, &info)
	if !slices.Contains(info.Extensions, "ota-delta") {
		t.Fatalf("extensions %v lack ota-delta", info.Extensions)
	}
	// The base is the image the board runs (its first image, in ota_0),
	// read from its flash as a gateway would have it from its store.
	base := runningImage(t, dir)
	if got := runningSHA(t, b); got != sha(base) {
		t.Fatalf("running sha256 %q, want %s", got, sha(base))
	}
	target := boardImage(t, "7.2.0")
	before := otaState(t, b)
	// A header naming the base and the target, then a frame that is not
	// zstd: corrupt from its first byte.
	var h imagedelta.Header
	copy(h.Base[:], mustHex(t, sha(base)))
	copy(h.Target[:], mustHex(t, sha(target)))
	h.Size = int64(len(target))
	corrupt := append(h.Append(nil), bytes.Repeat([]byte("not zstd "), 1000)...)
	other := boardImage(t, "7.0.0")
	r := put(b, corrupt, "?base="+sha(other))
	if r.Status != 409 || r.ErrorCode() != "base_mismatch" {
		t.Fatalf("wrong base: %d %s", r.Status, r.Body)
	}
	r = put(b, corrupt, "?base="+sha(base))
	if r.Status != 422 || r.ErrorCode() != "invalid_image" {
		t.Fatalf("corrupt delta: %d %s", r.Status, r.Body)
	}
	after := otaState(t, b)
	for i := range before.Slots {
		x, y := before.Slots[i], after.Slots[i]
		if x.Label != y.Label || x.Boots != y.Boots || (x.State == nil) != (y.State == nil) || (x.State != nil && *x.State != *y.State) ||
			(x.App == nil) != (y.App == nil) || (x.App != nil && x.App.Version != y.App.Version) {
			t.Fatalf("a refused delta changed slot %s: %+v -> %+v", x.Label, x, y)
		}
	}
	if !testlevel.Soak() {
		return
	}
	delta, err := imagedelta.Make(base, target)
	if err != nil {
		t.Fatal(err)
	}
	r = put(b, delta, "?base="+sha(base)+"&activate=1&reboot=1")
	if r.Status != 200 {
		t.Fatalf("delta: %d %s", r.Status, r.Body)
	}
	waitVersion(t, b, "7.2.0")
	waitConfirmed(t, b, "ota_1")
	if got := runningSHA(t, b); got != sha(target) {
		t.Fatalf("running sha256 %q after the delta, want %s", got, sha(target))
	}
	t.Logf("delta of %d bytes for a %d-byte image", len(delta), len(target))
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runningImage reads the image in the board's ota_0 slot.
func runningImage(t *testing.T, dir string) []byte {
	t.Helper()
	fl, err := flash.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fl.Open(flash.Slots[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	im, err := image.VerifyAt(p, p.Size(), image.Expect{Chip: image.ChipHost, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, im.Size)
	if _, err := p.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOTAPullDeltaProcess: a real holo-board process pulls a delta over
// HTTPS (POST /ota/pull with base, extension ota-delta). A base it does
// not run is answered 409 base_mismatch before anything is fetched; a
// corrupt delta fails the session with invalid_image and leaves the slots
// as they were; base without url is 400. The soak level pulls a good
// delta and boots the image it rebuilds.
func TestOTAPullDeltaProcess(t *testing.T) {
	t.Parallel()
	rs := newReleaseSite(t)
	dir := t.TempDir()
	b := boardtest.Start(t, dir, "--ota-ca", rs.caPath)
	base := runningImage(t, dir)
	target := boardImage(t, "7.3.0")
	var h imagedelta.Header
	copy(h.Base[:], mustHex(t, sha(base)))
	copy(h.Target[:], mustHex(t, sha(target)))
	h.Size = int64(len(target))
	corrupt := rs.add("corrupt.delta", append(h.Append(nil), bytes.Repeat([]byte("not zstd "), 1000)...))
	before := otaState(t, b)
	other := sha(boardImage(t, "7.0.0"))
	if r := b.Do("POST", "/ota/pull", fmt.Sprintf(`{"url":%q,"base":%q}`, rs.srv.URL+"/img/none", other)); r.Status != 409 || r.ErrorCode() != "base_mismatch" {
		t.Fatalf("pull of a delta from another base: %d %s", r.Status, r.Body)
	}
	if r := b.Do("POST", "/ota/pull", fmt.Sprintf(`{"channel":"latest","base":%q}`, sha(base))); r.Status != 400 {
		t.Fatalf("base with a channel: %d %s", r.Status, r.Body)
	}
	pull := func(url string, activate bool) ota.Session {
		t.Helper()
		if r := b.Do("POST", "/ota/pull", fmt.Sprintf(`{"url":%q,"base":%q,"activate":%v}`, url, sha(base), activate)); r.Status != 202 {
			t.Fatalf("pull %s: %d %s", url, r.Status, r.Body)
		}
		var s ota.Session
		boardtest.WaitFor(t, 120*time.Second, "the pull to end", func() bool {
			s = otaSession(t, b)
			return s.State == ota.StateFailed || s.State == ota.StateStaged || s.State == ota.StateActive
		})
		return s
	}
	if s := pull(corrupt, false); s.State != ota.StateFailed || s.Error == nil || !strings.HasPrefix(*s.Error, "invalid_image: the delta is corrupt") {
		t.Fatalf("corrupt delta: %+v", s)
	}
	after := otaState(t, b)
	for i := range before.Slots {
		x, y := before.Slots[i], after.Slots[i]
		if x.Label != y.Label || x.Boots != y.Boots || (x.App == nil) != (y.App == nil) || (x.App != nil && x.App.Version != y.App.Version) {
			t.Fatalf("a refused delta changed slot %s: %+v -> %+v", x.Label, x, y)
		}
	}
	if !testlevel.Soak() {
		return
	}
	delta, err := imagedelta.Make(base, target)
	if err != nil {
		t.Fatal(err)
	}
	if s := pull(rs.add("good.delta", delta), true); s.State != ota.StateActive && s.State != ota.StateStaged {
		t.Fatalf("good delta: %+v", s)
	}
	waitVersion(t, b, "7.3.0")
	waitConfirmed(t, b, "ota_1")
	if got := runningSHA(t, b); got != sha(target) {
		t.Fatalf("running sha256 %q after the pulled delta, want %s", got, sha(target))
	}
}

// otaSession is GET /ota's session.
func otaSession(t *testing.T, b *boardtest.Board) ota.Session {
	t.Helper()
	var v struct {
		Session ota.Session `json:"session"`
	}
	b.Do("GET", "/ota", nil).JSON(t, &v)
	return v.Session
}
