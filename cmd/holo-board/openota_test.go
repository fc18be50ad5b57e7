package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

// TestHALLinuxNeedsKeysOrOpenOTA (issue 25 row 5): a board on real
// hardware with no trusted OTA key ran whatever a LAN client uploaded. It
// now refuses to start, naming --open-ota, before any hardware is opened
// (the description names parts this machine lacks: opening them would
// fail with "hardware missing"); with a key, or with --open-ota, it goes
// on to open the hardware (and fails there, this machine having none).
func TestHALLinuxNeedsKeysOrOpenOTA(t *testing.T) {
	bin := boardtest.Binary(t)
	dir := t.TempDir()
	desc := filepath.Join(dir, "pi.json")
	if err := os.WriteFile(desc, []byte(`{"display":{"spi":"/dev/spidev9.0","dc":"GPIO25"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		notWant string
	}{
		{"no key", nil, "--open-ota", "hardware missing"},
		{"no key, no bootloader", []string{"--bootloader=false"}, "--open-ota", "hardware missing"},
		{"--open-ota", []string{"--open-ota", "--bootloader=false"}, "hardware missing", "--open-ota"},
		{"a key", append([]string{"--bootloader=false"}, keyArgs(key)...), "hardware missing", "--open-ota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--hal", "linux", "--hardware", desc}, tc.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = boardtest.Env()
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("holo-board started:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), tc.notWant) {
				t.Errorf("output should hold %q and not %q:\n%s", tc.want, tc.notWant, out)
			}
			if strings.Contains(string(out), "listening on") {
				t.Errorf("it served:\n%s", out)
			}
		})
	}
}

// TestSimulatorStaysOpen: the simulator keeps the spec's open default, no
// key and no --open-ota needed.
func TestSimulatorStaysOpen(t *testing.T) {
	b := boardtest.Start(t, "", "--bootloader=false")
	if r := b.Do("GET", "/info", nil); r.Status != 200 {
		t.Fatalf("GET /info: %d", r.Status)
	}
}

// TestPasswordFile: --password-file sets the board's password at start.
func TestPasswordFile(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("stage-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := boardtest.Start(t, "", "--bootloader=false", "--password-file", pwFile)
	if r := b.Do("GET", "/web", nil); r.Status != 401 {
		t.Errorf("GET /web without the password: %d", r.Status)
	}
	r := b.Do("GET", "/web", nil, boardtest.Header("Authorization", "Bearer stage-secret"))
	if r.Status != 200 || r.Map(t)["password_set"] != true {
		t.Errorf("GET /web with the password: %d %s", r.Status, r.Body)
	}
}
