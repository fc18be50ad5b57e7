package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHardwareBoardUnitHardening (issue 25 row 5): the unit of a board on
// real parts ran it as root with no OTA key and no password, so one
// PUT /ota/image from the LAN ran a shell script as root. It must pass a
// key and a password file, run as its own user in the groups of its
// devices only, bind port 80 by capability, and see only those devices.
func TestHardwareBoardUnitHardening(t *testing.T) {
	const path = "holo-board.service"
	u := unit(t, path)
	exec0 := u["ExecStart"]
	if len(exec0) != 1 {
		t.Fatalf("ExecStart %v", exec0)
	}
	for _, want := range []string{"--hal linux", "--ota-key ", "--password-file "} {
		if !strings.Contains(exec0[0], want) {
			t.Errorf("ExecStart lacks %q: %s", want, exec0[0])
		}
	}
	if strings.Contains(exec0[0], "--open-ota") {
		t.Errorf("ExecStart opens OTA: %s", exec0[0])
	}
	checkFlags(t, path+" ExecStart", "holo-board", exec0[0], flagsOf(t, "holo-board"))
	one := func(k, want string) {
		t.Helper()
		if v := u[k]; len(v) == 0 || v[len(v)-1] != want {
			t.Errorf("%s=%v, want %s", k, v, want)
		}
	}
	if user := u["User"]; len(user) > 0 && user[len(user)-1] == "root" || len(user) == 0 && !slices.Contains(u["DynamicUser"], "yes") {
		t.Errorf("runs as root (User=%v DynamicUser=%v)", u["User"], u["DynamicUser"])
	}
	groups := strings.Fields(strings.Join(u["SupplementaryGroups"], " "))
	slices.Sort(groups)
	if !slices.Equal(groups, []string{"dialout", "gpio", "i2c", "spi"}) {
		t.Errorf("SupplementaryGroups %v, want dialout gpio i2c spi", groups)
	}
	one("AmbientCapabilities", "CAP_NET_BIND_SERVICE")
	one("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE")
	one("NoNewPrivileges", "yes")
	one("DevicePolicy", "closed")
	one("ProtectSystem", "strict")
	for _, dev := range []string{"char-spi rw", "char-i2c rw", "char-gpiochip rw"} {
		if !slices.Contains(u["DeviceAllow"], dev) {
			t.Errorf("DeviceAllow lacks %q: %v", dev, u["DeviceAllow"])
		}
	}
	for _, cred := range []string{"ota-key.pem:", "password:"} {
		if !slices.ContainsFunc(u["LoadCredential"], func(v string) bool { return strings.HasPrefix(v, cred) }) {
			t.Errorf("LoadCredential lacks %s: %v", cred, u["LoadCredential"])
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit is parsed only")
		return
	}
	body, _ := os.ReadFile(path)
	bin := strings.Fields(exec0[0])[0]
	copyPath := filepath.Join(t.TempDir(), path)
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(body), bin, filepath.Join(binaries(t), "holo-board"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}
