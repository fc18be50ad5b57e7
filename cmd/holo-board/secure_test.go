package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
)

// testKey is a signing key with its public key written to a PEM file,
// as holoctl image keygen leaves them.
type testKey struct {
	priv   *ecdsa.PrivateKey
	pub    string // path of the public key PEM
	digest image.KeyDigest
}

func newKey(t *testing.T) testKey {
	t.Helper()
	k, err := image.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := image.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pub")
	if err := os.WriteFile(path, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	d, _ := image.DigestOf(&k.PublicKey)
	return testKey{priv: k, pub: path, digest: d}
}

func signWith(t testing.TB, img []byte, keys ...testKey) []byte {
	t.Helper()
	for _, k := range keys {
		var err error
		if img, err = image.Sign(img, k.priv); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// tinyImage is an image whose executable exits at once; the refusal tests
// never boot it.
func tinyImage(t testing.TB, version string, revoke ...image.KeyDigest) []byte {
	t.Helper()
	img, err := image.Pack(image.Desc{Project: "holo-board", Version: version, Date: "Jan  1 2026", Time: "12:00:00", IDF: "host-test", Revoke: revoke},
		[]byte("#!/bin/sh\nexit 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// keyArgs are --ota-key flags for keys.
func keyArgs(keys ...testKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, "--ota-key", k.pub)
	}
	return out
}

// secureView is the secure-boot part of GET /ota.
type secureView struct {
	SecureBoot ota.SecureBootStatus `json:"secure_boot"`
	Slots      []struct {
		Label   string   `json:"label"`
		Running bool     `json:"running"`
		State   *string  `json:"state"`
		App     *ota.App `json:"app"`
		Signers []string `json:"signers"`
	} `json:"slots"`
	Rollback bool        `json:"rollback"`
	Session  ota.Session `json:"session"`
}

func secureState(t testing.TB, b *boardtest.Board) secureView {
	t.Helper()
	var v secureView
	r := b.Do("GET", "/ota", nil)
	if r.Status != 200 {
		t.Fatalf("GET /ota: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &v)
	return v
}

// keysOf lists GET /ota's keys as "digest" or "digest revoked".
func (v secureView) keysOf() []string {
	var out []string
	for _, k := range v.SecureBoot.Keys {
		s := k.Digest
		if k.Revoked {
			s += " revoked"
		}
		out = append(out, s)
	}
	return out
}

// flashState is what a refusal must leave alone: both slots' bytes, the
// otadata partition, the running version and the slot records.
type flashState struct {
	files   map[string]string
	version string
	states  []string
}

func snapshot(t *testing.T, b *boardtest.Board) flashState {
	t.Helper()
	fs := flashState{files: map[string]string{}, version: version(b)}
	for _, name := range []string{"ota_0", "ota_1", "otadata"} {
		f, err := os.Open(filepath.Join(b.DataDir, "flash", name))
		if errors.Is(err, os.ErrNotExist) {
			fs.files[name] = "absent"
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		fs.files[name] = hex.EncodeToString(h.Sum(nil))
	}
	for _, s := range secureState(t, b).Slots {
		st := "null"
		if s.State != nil {
			st = *s.State
		}
		fs.states = append(fs.states, s.Label+" "+st)
	}
	return fs
}

func (fs flashState) same(other flashState) error {
	switch {
	case fs.version != other.version:
		return fmt.Errorf("running version %s, was %s", other.version, fs.version)
	case !slices.Equal(fs.states, other.states):
		return fmt.Errorf("slot records %v, were %v", other.states, fs.states)
	}
	for k, v := range fs.files {
		if other.files[k] != v {
			return fmt.Errorf("%s changed", k)
		}
	}
	return nil
}

// flip returns img with one bit flipped at off (negative: from the end).
func flip(img []byte, off int) []byte {
	b := bytes.Clone(img)
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x04
	return b
}

// refixCRC makes the CRC of block i right again, as someone editing a
// block on purpose would.
func refixCRC(img []byte, i int) []byte {
	at := len(img) - image.SectorSize + i*image.SigBlockSize
	binary.LittleEndian.PutUint32(img[at+1196:], crc32.ChecksumIEEE(img[at:at+1196]))
	return img
}

// TestSecureBootRefusesUploads: a board with keys refuses, at upload and
// over HTTP, every image without a good block of a trusted, unrevoked key,
// and each refusal leaves the running firmware, both slots, otadata and
// the slot records as they were.
func TestSecureBootRefusesUploads(t *testing.T) {
	t.Parallel()
	old, a, b, c := newKey(t), newKey(t), newKey(t), newKey(t)
	dir := t.TempDir()
	// The board's fuses: old (revoked since), a, b. c is no one's key.
	fuses := efuse.Open(filepath.Join(dir, "flash"))
	if err := os.MkdirAll(filepath.Join(dir, "flash"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := fuses.Burn([]image.KeyDigest{old.digest, a.digest, b.digest}); err != nil {
		t.Fatal(err)
	}
	if _, done, err := fuses.Revoke([]image.KeyDigest{a.digest}, []image.KeyDigest{old.digest}); err != nil || len(done) != 1 {
		t.Fatalf("revoke: %v %v", done, err)
	}
	bd := boardtest.Start(t, dir, keyArgs(old, a, b)...)
	v := secureState(t, bd)
	if !v.SecureBoot.Enabled || !slices.Equal(v.keysOf(), []string{old.digest.String() + " revoked", a.digest.String(), b.digest.String()}) {
		t.Fatalf("secure_boot %+v", v.SecureBoot)
	}
	// Something staged first: refusals must not touch it.
	staged := signWith(t, tinyImage(t, "2.0.0"), a)
	if r := put(bd, staged, ""); r.Status != 200 {
		t.Fatalf("good upload: %d %s", r.Status, r.Body)
	}
	v = secureState(t, bd)
	if !slices.Equal(v.Slots[1].Signers, []string{a.digest.String()}) {
		t.Fatalf("staged signers %v", v.Slots[1].Signers)
	}
	before := snapshot(t, bd)

	good := signWith(t, tinyImage(t, "3.0.0"), a)
	sector := len(good) - image.SectorSize
	tampered := func() []byte { // payload changed, checksum and hash repaired
		im, err := image.Inspect(good)
		if err != nil {
			t.Fatal(err)
		}
		bb := bytes.Clone(good)
		p := im.Segments[image.PayloadIndex].Offset
		bb[p] ^= 1 // two flips the XOR checksum cannot see
		bb[p+1] ^= 1
		unsignedLen := len(tinyImage(t, "3.0.0"))
		sum := sha256.Sum256(bb[:unsignedLen-32])
		copy(bb[unsignedLen-32:], sum[:])
		return bb
	}()
	tests := []struct {
		name string
		img  []byte
		want string // in the message
	}{
		{"unsigned", tinyImage(t, "3.0.0"), "not signed"},
		{"unknown key", signWith(t, tinyImage(t, "3.0.0"), c), "not trusted"},
		{"revoked key", signWith(t, tinyImage(t, "3.0.0"), old), "revoked"},
		{"payload bit", flip(good, 300), "checksum"},
		{"appended hash bit", flip(good, len(tinyImage(t, "3.0.0"))-1), "SHA-256"},
		{"padding bit", flip(good, sector-1), "0xFF padding"},
		{"tampered payload, checksums repaired", tampered, "signature does not verify"},
		{"block magic bit", flip(good, sector), "malformed"},
		{"block version bit", flip(good, sector+1), "malformed"},
		{"block digest bit", flip(good, sector+10), "CRC"},
		{"block digest bit, CRC repaired", refixCRC(flip(good, sector+10), 0), "signature does not verify"},
		{"block curve bit", flip(good, sector+36), "malformed"},
		{"block key bit, CRC repaired", refixCRC(flip(good, sector+50), 0), "malformed"},
		{"block signature bit, CRC repaired", refixCRC(flip(good, sector+140), 0), "signature does not verify"},
		{"block reserved bit", flip(good, sector+700), "CRC"},
		{"block CRC bit", flip(good, sector+1197), "CRC"},
		{"block padding bit", flip(good, sector+1210), "padding"},
		{"sector tail bit", flip(good, -1), "not erased"},
		{"truncated block", good[:sector+600], "truncated"},
		{"truncated sector", good[:len(good)-1], "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := put(bd, tt.img, "?activate=1&reboot=1")
			if r.Status != 422 || r.ErrorCode() != "invalid_image" || !strings.Contains(string(r.Body), tt.want) {
				t.Fatalf("%d %s, want 422 invalid_image with %q", r.Status, r.Body, tt.want)
			}
			if err := before.same(snapshot(t, bd)); err != nil {
				t.Fatal(err)
			}
			if s := secureState(t, bd).Session; s.State != ota.StateFailed || s.Error == nil || !strings.HasPrefix(*s.Error, "invalid_image: ") {
				t.Fatalf("session %+v", s)
			}
		})
	}
	// Three blocks, only the last from a trusted key: accepted.
	three := signWith(t, tinyImage(t, "4.0.0"), c, old, b)
	if r := put(bd, three, ""); r.Status != 200 {
		t.Fatalf("three blocks: %d %s", r.Status, r.Body)
	}
	v = secureState(t, bd)
	if v.Session.State != ota.StateStaged || v.Slots[1].App.Version != "4.0.0" ||
		!slices.Equal(v.Slots[1].Signers, []string{c.digest.String(), old.digest.String(), b.digest.String()}) {
		t.Fatalf("after three blocks: %+v", v)
	}
	// The console reaches the same handler and refuses the same way.
	if version(bd) != before.version {
		t.Fatal("running firmware changed")
	}
}

// releaseSite serves images over HTTPS from a CA written to a PEM file.
type releaseSite struct {
	srv    *httptest.Server
	caPath string
	mu     sync.Mutex
	images map[string][]byte
}

func newReleaseSite(t *testing.T) *releaseSite {
	rs := &releaseSite{images: map[string][]byte{}}
	rs.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		img, ok := rs.images[strings.TrimPrefix(r.URL.Path, "/img/")]
		rs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "x.bin", time.Time{}, bytes.NewReader(img))
	}))
	t.Cleanup(rs.srv.Close)
	rs.caPath = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(rs.caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rs.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return rs
}

func (rs *releaseSite) add(name string, img []byte) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.images[name] = img
	return rs.srv.URL + "/img/" + name
}

// TestSecureBootRefusesPulls: POST /ota/pull answers 202 when the download
// starts; an image the keys do not let in then fails the session with
// invalid_image and the reason, leaving the slots as they were.
func TestSecureBootRefusesPulls(t *testing.T) {
	t.Parallel()
	old, a, c := newKey(t), newKey(t), newKey(t)
	rs := newReleaseSite(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "flash"), 0o755); err != nil {
		t.Fatal(err)
	}
	fuses := efuse.Open(filepath.Join(dir, "flash"))
	if _, err := fuses.Burn([]image.KeyDigest{old.digest, a.digest}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fuses.Revoke([]image.KeyDigest{a.digest}, []image.KeyDigest{old.digest}); err != nil {
		t.Fatal(err)
	}
	bd := boardtest.Start(t, dir, "--ota-ca", rs.caPath, "--ota-channels", rs.srv.URL)
	before := snapshot(t, bd)
	good := signWith(t, tinyImage(t, "2.0.0"), a)
	pull := func(name string, img []byte, activate bool) ota.Session {
		t.Helper()
		body := fmt.Sprintf(`{"url":%q,"activate":%v}`, rs.add(name, img), activate)
		if r := bd.Do("POST", "/ota/pull", body); r.Status != 202 {
			t.Fatalf("pull %s: %d %s", name, r.Status, r.Body)
		}
		var s ota.Session
		boardtest.WaitFor(t, 30*time.Second, name+" to end", func() bool {
			s = secureState(t, bd).Session
			return s.State == ota.StateFailed || s.State == ota.StateStaged || s.State == ota.StateActive
		})
		return s
	}
	for _, tc := range []struct {
		name string
		img  []byte
		want string
	}{
		{"unsigned", tinyImage(t, "2.0.0"), "not signed"},
		{"unknown", signWith(t, tinyImage(t, "2.0.0"), c), "not trusted"},
		{"bad-signature", refixCRC(flip(good, len(good)-image.SectorSize+140), 0), "signature does not verify"},
		{"bad-block", flip(good, len(good)-image.SectorSize+5), "CRC"},
		{"revoked", signWith(t, tinyImage(t, "2.0.0"), old), "revoked"},
		{"truncated-block", good[:len(good)-image.SectorSize+700], "truncated"},
		{"payload-bit", flip(good, 300), "checksum"},
	} {
		s := pull(tc.name, tc.img, true)
		if s.State != ota.StateFailed || s.Error == nil || !strings.HasPrefix(*s.Error, "invalid_image: ") || !strings.Contains(*s.Error, tc.want) {
			t.Fatalf("%s: %+v", tc.name, s)
		}
		if err := before.same(snapshot(t, bd)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	if s := pull("three", signWith(t, tinyImage(t, "2.0.0"), c, old, a), false); s.State != ota.StateStaged {
		t.Fatalf("three blocks, the last trusted: %+v", s)
	}
}

// TestSecureBootUpdateAndRevocation: keys a and b burned at the first
// start; the factory firmware runs unsigned. An update signed by a boots
// and confirms; one signed by b asking to revoke a boots, confirms and
// revokes a, which makes the image a signed invalid (no rollback to it)
// and a's images refused, across a power cut.
func TestSecureBootUpdateAndRevocation(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	dir := t.TempDir()
	bd := boardtest.Start(t, dir, keyArgs(a, b)...)
	v := secureState(t, bd)
	if !v.SecureBoot.Enabled || !slices.Equal(v.keysOf(), []string{a.digest.String(), b.digest.String()}) {
		t.Fatalf("first start: %+v", v.SecureBoot)
	}
	info := bd.Do("GET", "/info", nil).Map(t)
	sb, _ := info["firmware"].(map[string]any)["secure_boot"].(map[string]any)
	if sb["enabled"] != true || sb["factory"] != true || len(sb["signers"].([]any)) != 0 {
		t.Fatalf("/info firmware.secure_boot %v", sb)
	}
	if r := put(bd, boardImage(t, "2.0.0"), "?activate=1"); r.Status != 422 || !strings.Contains(string(r.Body), "not signed") {
		t.Fatalf("unsigned update: %d %s", r.Status, r.Body)
	}
	if r := put(bd, signWith(t, boardImage(t, "2.0.0"), a), "?activate=1&reboot=1"); r.Status != 200 {
		t.Fatalf("update signed by a: %d %s", r.Status, r.Body)
	}
	waitVersion(t, bd, "2.0.0")
	waitConfirmed(t, bd, "ota_1")
	info = bd.Do("GET", "/info", nil).Map(t)
	sb = info["firmware"].(map[string]any)["secure_boot"].(map[string]any)
	if sb["factory"] != false || fmt.Sprint(sb["signers"]) != fmt.Sprint([]any{a.digest.String()}) {
		t.Fatalf("/info after the update: %v", sb)
	}
	// b's image revokes a once it has confirmed itself.
	next := signWith(t, boardImage(t, "3.0.0"), b)
	if _, err := image.WithRevoke(next, nil); err == nil {
		t.Fatal("a signed image took a revocation")
	}
	withRevoke, err := image.WithRevoke(boardImage(t, "3.0.0"), []image.KeyDigest{a.digest})
	if err != nil {
		t.Fatal(err)
	}
	if r := put(bd, signWith(t, withRevoke, b), "?activate=1&reboot=1"); r.Status != 200 {
		t.Fatalf("update signed by b: %d %s", r.Status, r.Body)
	}
	waitVersion(t, bd, "3.0.0")
	waitConfirmed(t, bd, "ota_0")
	boardtest.WaitFor(t, 30*time.Second, "a revoked, its image invalid", func() bool {
		v := secureState(t, bd)
		return slices.Equal(v.keysOf(), []string{a.digest.String() + " revoked", b.digest.String()}) &&
			!v.Rollback && v.Slots[1].State != nil && *v.Slots[1].State == "invalid"
	})
	if r := bd.Do("POST", "/ota/activate", `{"slot":"ota_1"}`); r.Status != 422 || r.ErrorCode() != "invalid_image" {
		t.Fatalf("rollback to a's image: %d %s", r.Status, r.Body)
	}
	bd.Kill() // a power cut
	bd = boardtest.Start(t, dir, keyArgs(a, b)...)
	if got := version(bd); got != "3.0.0" {
		t.Fatalf("after the cut: %s", got)
	}
	if k := secureState(t, bd).keysOf(); !slices.Equal(k, []string{a.digest.String() + " revoked", b.digest.String()}) {
		t.Fatalf("after the cut: %v", k)
	}
	if r := put(bd, signWith(t, tinyImage(t, "4.0.0"), a), ""); r.Status != 422 || !strings.Contains(string(r.Body), "revoked") {
		t.Fatalf("a's image after the revocation: %d %s", r.Status, r.Body)
	}
	// Keys given at a later start are not burned: the set is fixed.
	bd.Stop()
	other := newKey(t)
	bd = boardtest.Start(t, dir, keyArgs(other)...)
	if k := secureState(t, bd).keysOf(); len(k) != 2 || strings.Contains(strings.Join(k, " "), other.digest.String()) {
		t.Fatalf("keys after a start with other keys: %v", k)
	}
}

// TestOpenBoard: with no key burned the board checks no signature, says
// so, and takes unsigned images, signed ones and ones whose blocks are
// broken alike.
func TestOpenBoard(t *testing.T) {
	t.Parallel()
	bd := boardtest.Start(t, "")
	v := secureState(t, bd)
	if v.SecureBoot.Enabled || len(v.SecureBoot.Keys) != 0 {
		t.Fatalf("open board: %+v", v.SecureBoot)
	}
	sb := bd.Do("GET", "/info", nil).Map(t)["firmware"].(map[string]any)["secure_boot"].(map[string]any)
	if sb["enabled"] != false {
		t.Fatalf("/info %v", sb)
	}
	a := newKey(t)
	signed := signWith(t, tinyImage(t, "2.0.0"), a)
	for _, img := range [][]byte{tinyImage(t, "2.0.0"), signed, flip(signed, len(signed)-image.SectorSize+1197)} {
		if r := put(bd, img, ""); r.Status != 200 {
			t.Fatalf("open board refused: %d %s", r.Status, r.Body)
		}
	}
}

// TestBuiltinKeys: a holo-board built with -ldflags -X ...BuiltinKeys (as
// make build KEY=PUB does) burns them at its first start without
// --ota-key.
func TestBuiltinKeys(t *testing.T) {
	t.Parallel()
	a := newKey(t)
	link, err := image.LinkKey(&a.priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "holo-board-keyed")
	cmd := exec.Command("go", "build", "-race", "-ldflags", "-X github.com/holofleet/holofleet/firmware/ota/efuse.BuiltinKeys="+link, "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	p := exec.Command(bin, "--data", dir, "--http", "127.0.0.1:0")
	p.Env = boardtest.Env()
	out, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	buf := make([]byte, 4096)
	var seen []byte
	deadline := time.Now().Add(30 * time.Second)
	for !bytes.Contains(seen, []byte("listening on")) && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		seen = append(seen, buf[:n]...)
		if err != nil {
			break
		}
	}
	st, err := efuse.Open(filepath.Join(dir, "flash")).Read()
	if err != nil || !slices.Equal(st.Keys, []image.KeyDigest{a.digest}) {
		t.Fatalf("fuses of a board built with a key: %+v %v (%s)", st, err, seen)
	}
}

// TestEFuseWritePowerCuts pulls the power (the fault hook kills the board
// as kill -9 would) at each step of the first start's key burn and of a
// revocation's write: the board always starts again and trusts exactly
// the old set or the new one.
func TestEFuseWritePowerCuts(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	readFuses := func(dir string) efuse.State {
		st, err := efuse.Open(filepath.Join(dir, "flash")).Read()
		if err != nil {
			t.Fatalf("fuses after the cut: %v", err)
		}
		return st
	}
	for _, step := range []string{"burn:written", "burn:synced", "burn:renamed"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // the hook fires at the first start, or never
			defer cancel()
			cmd := exec.CommandContext(ctx, boardtest.Binary(t), append([]string{"--data", dir, "--http", "127.0.0.1:0", "--fault-efuse-cut", step}, keyArgs(a, b)...)...)
			cmd.Env = boardtest.Env()
			out, _ := cmd.CombinedOutput()
			if cmd.ProcessState.ExitCode() != 137 || !strings.Contains(string(out), "fault hook") {
				t.Fatalf("exit %d: %s", cmd.ProcessState.ExitCode(), out)
			}
			st := readFuses(dir)
			if len(st.Keys) != 0 && !slices.Equal(st.Keys, []image.KeyDigest{a.digest, b.digest}) {
				t.Fatalf("after the cut the fuses hold %v", st.Keys)
			}
			t.Logf("%s: %d keys burned at the cut", step, len(st.Keys))
			bd := boardtest.Start(t, dir, keyArgs(a, b)...)
			if k := secureState(t, bd).keysOf(); !slices.Equal(k, []string{a.digest.String(), b.digest.String()}) {
				t.Fatalf("next start trusts %v", k)
			}
		})
	}
	// One update per revocation step: the trial boot confirms and revokes.
	withRevoke, err := image.WithRevoke(boardImage(t, "3.0.0"), []image.KeyDigest{a.digest})
	if err != nil {
		t.Fatal(err)
	}
	update := signWith(t, withRevoke, b)
	for _, step := range []string{"revoke:written", "revoke:synced", "revoke:renamed"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bd := boardtest.Start(t, dir, append(keyArgs(a, b), "--fault-efuse-cut", step)...)
			if r := put(bd, update, "?activate=1&reboot=1"); r.Status != 200 {
				t.Fatalf("update: %d %s", r.Status, r.Body)
			}
			done := make(chan error, 1)
			go func() { done <- bd.Cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the fault hook did not cut the power")
			}
			st := readFuses(dir)
			if !slices.Equal(st.Keys, []image.KeyDigest{a.digest, b.digest}) || st.Revoked[1] {
				t.Fatalf("after the cut: %+v", st)
			}
			t.Logf("%s: a revoked at the cut: %v", step, st.Revoked[0])
			bd = boardtest.Start(t, dir, keyArgs(a, b)...)
			if got := version(bd); got != "3.0.0" {
				t.Fatalf("after the cut runs %s", got)
			}
			boardtest.WaitFor(t, 30*time.Second, "a revoked", func() bool {
				return slices.Equal(secureState(t, bd).keysOf(), []string{a.digest.String() + " revoked", b.digest.String()})
			})
		})
	}
}

// TestSecureBootConsoleAndLink: the console's ota update runs the upload
// handler and is refused the same way; ota keys shows the keys; the host
// link serves no firmware update path at all (JSON lines answer 404).
func TestSecureBootConsoleAndLink(t *testing.T) {
	t.Parallel()
	a := newKey(t)
	p := startConsoleBoard(t, append(keyArgs(a), "--uart", "pty")...)
	con := openTerm(t, p.await(conOnRE))
	link := openTerm(t, p.await(conLinkRE))
	url := p.await(conListenRE)
	img := filepath.Join(t.TempDir(), "unsigned.bin")
	if err := os.WriteFile(img, tinyImage(t, "2.0.0"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, status := con.run("ota update " + img)
	if !strings.HasPrefix(status, "error invalid_image: secure boot refuses the image: not signed") {
		t.Fatalf("console update: %s", status)
	}
	// The same bytes over HTTP give the same message.
	req, _ := http.NewRequest("PUT", url+"/api/v1/ota/image", bytes.NewReader(tinyImage(t, "2.0.0")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Error, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 422 || "error "+e.Error+": "+e.Message != status {
		t.Fatalf("HTTP %d %+v, console %q", resp.StatusCode, e, status)
	}
	out := con.ok("ota keys")
	if !strings.Contains(strings.Join(out, "\n"), a.digest.String()) || !strings.Contains(out[0], "secure boot  on") {
		t.Fatalf("ota keys: %q", out)
	}
	for _, line := range []string{`PUT /ota/image`, `POST /ota/pull {"url":"https://example.invalid/x.bin"}`, `POST /ota/activate {}`, `GET /ota`} {
		link.send(line + "\n")
		got := ""
		for {
			l, ok := link.line(30 * time.Second)
			if !ok {
				t.Fatalf("%s: no reply over the link", line)
			}
			if !strings.HasPrefix(l, "!") {
				got = l
				break
			}
		}
		if !strings.HasPrefix(got, "404 ") || !strings.Contains(got, "not served over the link") {
			t.Fatalf("%s over the link: %q", line, got)
		}
	}
}
