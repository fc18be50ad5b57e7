package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// npmSACN returns node and the NODE_PATH holding the npm package "sacn"
// (.ci/run installs it: $HOLO_NPM_DIR, default ~/.cache/holofleet/npm).
// Missing, the test skips, or fails under CI.
func npmSACN(t *testing.T) (node, nodePath string) {
	t.Helper()
	dir := os.Getenv("HOLO_NPM_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "holofleet", "npm")
	}
	nodePath = filepath.Join(dir, "node_modules")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(nodePath, "sacn", "package.json")); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or the npm package sacn missing (node: %v; %s): .ci/run installs them", err, nodePath)
		}
		t.Skipf("node or the npm package sacn missing: npm install --prefix %s sacn@4.6.1", dir)
	}
	return node, nodePath
}

// sendSACN runs testdata/sacn-send.js for a while; the returned channel
// closes when it has stopped.
func sendSACN(t *testing.T, node, nodePath, addr string, universe, priority int, name string, payload map[string]int, seconds float64) <-chan struct{} {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	arg, _ := json.Marshal(map[string]any{"host": host, "port": p, "universe": universe, "priority": priority, "name": name,
		"cid":     fmt.Sprintf("%032x", []byte(name))[:32],
		"payload": payload, "hz": 30, "seconds": seconds})
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "testdata/sacn-send.js", string(arg))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return done
}

// TestDMXWithNPMSACN: two real sACN senders (npm "sacn") of different
// priority drive group 1 of the demo: the higher wins; when it stops,
// the lower one's look comes back after the source loss time; the patch
// view lists both while both send.
func TestDMXWithNPMSACN(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	node, nodePath := npmSACN(t)
	base, out := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "1", "--mqtt", noBroker)
	m := sacnLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("banner:\n%s", out.String())
	}
	ids := demoBoards(t, base, 2)
	sendSACN(t, node, nodePath, m[1], 1, 100, "backup desk", map[string]int{"1": 255, "2": 0, "3": 0, "4": 255}, 60)
	for _, id := range ids {
		waitFor(t, id+" blue", 15*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#0000ff" })
	}
	mainDone := sendSACN(t, node, nodePath, m[1], 1, 150, "main desk", map[string]int{"1": 255, "2": 255, "3": 0, "4": 0}, 3)
	for _, id := range ids {
		waitFor(t, id+" red", 15*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#ff0000" })
	}
	waitFor(t, "two sources listed", 10*time.Second, func() bool {
		_, body := get(t, base+"/v1/dmx/patch", "")
		var v struct {
			Sources []struct {
				Name     string `json:"name"`
				Priority int    `json:"priority"`
				Winning  bool   `json:"winning"`
			} `json:"sources"`
		}
		if json.Unmarshal([]byte(body), &v) != nil || len(v.Sources) != 2 {
			return false
		}
		for _, s := range v.Sources {
			if s.Name == "main desk" && (s.Priority != 150 || !s.Winning) || s.Name == "backup desk" && s.Winning {
				return false
			}
		}
		return true
	})
	<-mainDone
	for _, id := range ids {
		waitFor(t, id+" blue again", 15*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#0000ff" })
	}
}
