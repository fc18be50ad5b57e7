package security

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testbin"
)

// gatewayBin is the holo-gateway binary the MQTT tests run
// (gatewayBinary: built once per run, or HOLO_SECURITY_GATEWAY).
func gatewayBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs holo-gateway")
	}
	return gatewayBinary(t)
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer = testbin.Output

// gateway is a running holo-gateway process.
type gateway struct {
	api, mqtt  string // http://host:port, tcp://host:port
	adminToken string
	out, log   *lockedBuffer
}

var (
	mqttAPILine = regexp.MustCompile(`^\s*API:\s+(http://\S+)`)
	mqttLine    = regexp.MustCompile(`embedded broker (tcp://\S+)`)
	tokenLine   = regexp.MustCompile(`first admin token: written to (\S+) \(mode`)
)

// startGateway runs `holo-gateway demo` (two simulated boards in group 1)
// on free loopback ports with extra flags, until the test ends.
func startGateway(t *testing.T, extra ...string) *gateway {
	t.Helper()
	bin := gatewayBin(t)
	args := append([]string{"demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--mqtt-port", "127.0.0.1:0",
		"--demo-boards", "2", "--demo-groups", "1"}, extra...)
	cmd := exec.Command(bin, args...)
	g := &gateway{out: &lockedBuffer{}, log: &lockedBuffer{}}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(g.out, pw)
	cmd.Stderr = g.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// The banner's MQTT lines come once the components are built.
	sc := bufio.NewScanner(pr)
	deadline := time.AfterFunc(30*time.Second, func() { pw.CloseWithError(fmt.Errorf("timeout")) })
	defer deadline.Stop()
	for sc.Scan() {
		l := sc.Text()
		if m := mqttAPILine.FindStringSubmatch(l); m != nil {
			g.api = m[1]
		}
		if m := mqttLine.FindStringSubmatch(l); m != nil {
			g.mqtt = m[1]
		}
		if m := tokenLine.FindStringSubmatch(l); m != nil {
			g.adminToken = func() string { b, _ := os.ReadFile(m[1]); return strings.TrimSpace(string(b)) }()
		}
		if strings.Contains(l, "mqtt:     rollouts on") || strings.Contains(l, "mqtt:     off") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if g.api == "" || g.adminToken == "" {
		t.Fatalf("gateway did not start (API %q, token %q):\n%s\n%s", g.api, g.adminToken, g.out.String(), g.log.String())
	}
	return g
}

// rest calls the gateway's REST API as its first admin.
func (g *gateway) rest(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.api+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// token makes a token through the API and returns its secret.
func (g *gateway) token(t *testing.T, name, role string) string {
	t.Helper()
	code, body := g.rest(t, "POST", "/v1/tokens", fmt.Sprintf(`{"name":%q,"role":%q}`, name, role))
	var r struct{ Secret string }
	if code != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Secret == "" {
		t.Fatalf("create token %s: %d %s", name, code, body)
	}
	return r.Secret
}

// revoke revokes a token through the API.
func (g *gateway) revoke(t *testing.T, name string) {
	t.Helper()
	if code, body := g.rest(t, "DELETE", "/v1/tokens/"+name, ""); code != http.StatusOK {
		t.Fatalf("revoke %s: %d %s", name, code, body)
	}
}

// lookBin finds a binary on PATH or in /usr/sbin; absent, the test is
// skipped, or fails in CI.
func lookBin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/sbin", name); fileExists(p) {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (CI installs mosquitto and mosquitto-clients)", name)
	}
	t.Skipf("%s is not installed (apt-get install mosquitto mosquitto-clients): skipping this check", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
