package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// olaNetnsEnv marks the run of TestDMXWithOLA inside its own network
// namespace.
const olaNetnsEnv = "HOLO_OLA_NETNS"

// TestDMXWithOLA: OLA (olad, the Open Lighting Architecture daemon, set
// with its own ola_set_dmx) drives group 1 of the demo, first over sACN
// (E1.31 multicast, OLA universe 1 on E1.31 universe 1), then over
// Art-Net (OLA universe 0 on Art-Net 0:0:0, universe 1 here); the patch
// view lists OLA as the source of each.
//
// olad holds E1.31's and Art-Net's fixed ports on every address, its
// clients find it on its fixed RPC port, its network outputs need an
// interface other than loopback, and it refuses to run as root. So the
// test builds a small network of its own: it runs itself again under
// `unshare --net` (namespace T, where the gateway takes the standard ports
// no other process there holds), starts olad as nobody in a second
// namespace joined to T by a veth pair, and runs ola_patch and
// ola_set_dmx in olad's namespace with nsenter. Nothing binds a port
// outside those namespaces. Without OLA the test skips (fails under CI,
// whose .ci/run installs it); without the right to make namespaces it
// skips.
func TestDMXWithOLA(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo and olad")
	}
	t.Parallel()
	if os.Getenv(olaNetnsEnv) == "" {
		olaOuter(t)
		return
	}
	olaInner(t)
}

// olaOuter checks the tools and runs the test again in a namespace.
func olaOuter(t *testing.T) {
	for _, tool := range []string{"olad", "ola_patch", "ola_set_dmx", "ola_dev_info"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s missing: .ci/run installs the Debian package ola", tool)
			}
			t.Skipf("%s missing: apt-get install ola", tool)
		}
	}
	for _, tool := range []string{"unshare", "nsenter", "setpriv", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s missing (util-linux, iproute2)", tool)
		}
	}
	if out, err := exec.Command("unshare", "--net", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace (needs root or CAP_SYS_ADMIN): %v %s", err, out)
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody to run olad as")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--net", "--", self, "-test.run=^TestDMXWithOLA$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), olaNetnsEnv+"=1")
	cmd.Dir, _ = os.Getwd()
	out, err := cmd.CombinedOutput()
	if testing.Verbose() || err != nil {
		t.Logf("in its namespace:\n%s", out)
	}
	if err != nil {
		t.Fatalf("TestDMXWithOLA in its namespace: %v", err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skip("skipped in its namespace")
	}
}

// olaAddr is olad's side of the veth pair; the gateway's side is
// 10.77.0.1.
const olaAddr = "10.77.0.2"

func olaInner(t *testing.T) {
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	sh("ip", "link", "set", "lo", "up")
	if out, err := exec.Command("ip", "link", "add", "holo0", "type", "veth", "peer", "name", "holo1").CombinedOutput(); err != nil {
		t.Skipf("cannot make a veth pair (the kernel's veth driver): %v %s", err, out)
	}
	sh("ip", "addr", "add", "10.77.0.1/24", "brd", "+", "dev", "holo0")
	sh("ip", "link", "set", "holo0", "up")

	// olad's configuration: E1.31 and Art-Net on its side of the pair,
	// every other plugin off (they probe hardware and other ports).
	nobody, _ := user.Lookup("nobody")
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// (not under t.TempDir, whose directories only root may enter)
	dir, err := os.MkdirTemp("", "holo-ola-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{
		"artnet": "enabled = true\nip = " + olaAddr + "\nuse_loopback = false\nalways_broadcast = false\nuse_limited_broadcast = false\n" +
			"net = 0\nsubnet = 0\noutput_ports = 4\nshort_name = ola test\nlong_name = ola test node\n",
		"e131": "enabled = true\nip = " + olaAddr + "\ninput_ports = 1\noutput_ports = 1\nignore_preview = true\ndraft_discovery = false\n" +
			"dscp = 0\nprepend_hostname = false\nrevision = 0.46\ncid = 5a0f5e2c-6c1d-4f0e-9d8a-0b1c2d3e4f50\n",
	}
	for _, p := range []string{"dummy", "espnet", "kinet", "osc", "pathport", "sandnet", "shownet", "spi", "usbserial", "usbdmx",
		"opendmx", "stageprofi", "karate", "milinst", "renard", "gpio", "openpixelcontrol", "ftdidmx", "uartdmx", "dmx4linux", "nanoleaf"} {
		conf[p] = "enabled = false\n"
	}
	for name, c := range conf {
		f := filepath.Join(dir, "ola-"+name+".conf")
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
	// olad in a namespace of its own: the shell waits for the veth end,
	// then becomes olad (as nobody); its pid names the namespace.
	script := fmt.Sprintf(`ip link set lo up
while ! ip link show holo1 >/dev/null 2>&1; do sleep 0.02; done
ip addr add %s/24 brd + dev holo1 && ip link set holo1 up || exit 1
exec setpriv --reuid=%d --regid=%d --clear-groups olad -c %s --no-http --no-register-with-dns-sd -l 2`, olaAddr, uid, gid, dir)
	olad := exec.Command("unshare", "--net", "--", "sh", "-c", script)
	olog := &syncBuffer{}
	olad.Stdout, olad.Stderr = olog, olog
	if err := olad.Start(); err != nil {
		t.Fatal(err)
	}
	oladDone := make(chan struct{})
	go func() { _ = olad.Wait(); close(oladDone) }()
	t.Cleanup(func() {
		_ = olad.Process.Signal(syscall.SIGTERM)
		select {
		case <-oladDone:
		case <-time.After(10 * time.Second):
			_ = olad.Process.Kill()
			<-oladDone
		}
		if t.Failed() {
			o := olog.String()
			t.Logf("olad:\n%s", o[max(0, len(o)-8000):])
		}
	})
	netns := fmt.Sprintf("--net=/proc/%d/ns/net", olad.Process.Pid)
	// The namespace exists once unshare has made it (the process's
	// namespace is no longer the test's).
	self, _ := os.Readlink("/proc/self/ns/net")
	waitFor(t, "olad's namespace", 10*time.Second, func() bool {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", olad.Process.Pid))
		return err == nil && ns != self
	})
	sh("ip", "link", "set", "holo1", "netns", strconv.Itoa(olad.Process.Pid))
	ola := func(args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{netns, "--"}, args...)...).CombinedOutput()
		return string(out), err
	}
	mustOLA := func(args ...string) {
		t.Helper()
		if out, err := ola(args...); err != nil {
			t.Fatalf("%s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	devs := map[string]string{}
	devLine := regexp.MustCompile(`(?m)^Device (\d+): (ArtNet|E1\.31)`)
	waitFor(t, "olad's E1.31 and Art-Net devices", 30*time.Second, func() bool {
		out, err := ola("ola_dev_info")
		if err != nil {
			return false
		}
		for _, m := range devLine.FindAllStringSubmatch(out, -1) {
			devs[m[2]] = m[1]
		}
		return devs["ArtNet"] != "" && devs["E1.31"] != ""
	})

	base, _ := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "1", "--mqtt", noBroker, "--sacn", "0.0.0.0:5568", "--artnet", "0.0.0.0:6454")
	var sources func() []struct{ Protocol, Name, Address string }
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		_, m := get(t, base+"/metrics", "")
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "holo_dmx_") {
				t.Log(l)
			}
		}
		t.Logf("sources: %+v", sources())
	})
	ids := demoBoards(t, base, 2)
	sources = func() []struct{ Protocol, Name, Address string } {
		_, body := get(t, base+"/v1/dmx/patch", "")
		var v struct {
			Sources []struct{ Protocol, Name, Address string } `json:"sources"`
		}
		_ = json.Unmarshal([]byte(body), &v)
		return v.Sources
	}
	heard := func(proto string) bool {
		for _, s := range sources() {
			if s.Protocol == proto && strings.HasPrefix(s.Address, olaAddr) {
				return true
			}
		}
		return false
	}

	// sACN: OLA universe 1 on E1.31 universe 1 (multicast 239.255.0.1).
	mustOLA("ola_patch", "-d", devs["E1.31"], "-p", "0", "-u", "1")
	mustOLA("ola_set_dmx", "-u", "1", "-d", "255,0,0,255,0")
	for _, id := range ids {
		waitFor(t, id+" blue from OLA over sACN", 15*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#0000ff" })
	}
	waitFor(t, "OLA listed as an sACN source", 10*time.Second, func() bool { return heard("sacn") })
	// OLA stops sending E1.31 (the port unpatched): the source goes.
	mustOLA("ola_patch", "-r", "-d", devs["E1.31"], "-p", "0", "-u", "1")
	waitFor(t, "the sACN source gone", 15*time.Second, func() bool { return !heard("sacn") })

	// Art-Net: OLA universe 0 on Art-Net 0:0:0. OLA sends ArtDmx only to
	// the nodes whose ArtPollReply lists the universe (the gateway's
	// does), polling when the port is patched; a look set before the
	// gateway's reply arrived is not sent again until it changes, so the
	// test sets it until it lands, as a desk sends it every frame.
	mustOLA("ola_patch", "-d", devs["ArtNet"], "-p", "0", "-u", "0")
	for _, id := range ids {
		waitFor(t, id+" red from OLA over Art-Net", 30*time.Second, func() bool {
			mustOLA("ola_set_dmx", "-u", "0", "-d", "255,255,0,0,0")
			return boardLEDs(t, base, id)["colour"] == "#ff0000"
		})
	}
	waitFor(t, "OLA listed as an Art-Net source", 10*time.Second, func() bool { return heard("artnet") })
}
