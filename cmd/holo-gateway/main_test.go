package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testbin"
)

// syncBuffer collects a process's output while the test reads it.
type syncBuffer = testbin.Output

var apiLine = regexp.MustCompile(`API:\s+(http://\S+)`)

// TestMain gives the gateways the tests start an embedded broker on a free
// port unless a test says otherwise: no test binds a fixed port, so the
// suite passes while `make run` holds the default ones. Their rollouts
// ask again about a board waiting for a show every 100 ms instead of
// every 10 s (TestShowGuards waits for the gate to open, not for the
// period, which gateway/rollout's tests cover).
//
// Every test that starts a gateway owns its data directory and ports and
// runs in parallel with the others (t.Parallel); those that set the
// environment, the working directory or defaultBrokerPort run first, one
// at a time, as the testing package runs tests that are not parallel.
func TestMain(m *testing.M) {
	defaultBrokerPort = 0
	rolloutRecheck = 100 * time.Millisecond
	os.Exit(m.Run())
}

// bannerEnd is the banner's last line: the gateway writes its banner
// line by line, so a test reads it once this is there.
const bannerEnd = "Ctrl-C stops."

// start runs holo-gateway with args until the test ends and returns its
// API base URL and its output, the whole banner written.
func start(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d\n%s", code, errb.String())
			}
			if !strings.Contains(out.String(), "holo-gateway: stopped") {
				t.Errorf("no clean stop:\n%s", out.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("holo-gateway did not stop")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if o := out.String(); strings.Contains(o, bannerEnd) {
			if m := apiLine.FindStringSubmatch(o); m != nil {
				return m[1], out
			}
			t.Fatalf("no API line in the banner:\n%s", o)
		}
		select {
		case code := <-done:
			t.Fatalf("exited %d early:\n%s\n%s", code, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no banner:\n%s", out.String())
	return "", nil
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTokenOfflineThenServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"token", "create", "--data", dir, "--role", "viewer", "--name", "ro"}, &out, &errb); code != 0 {
		t.Fatalf("token create: %d %s", code, errb.String())
	}
	secret := strings.TrimSpace(out.String())
	out.Reset()
	if code := run(context.Background(), []string{"token", "list", "--data", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "ro") {
		t.Fatalf("token list: %d %s", code, out.String())
	}

	base, banner := start(t, "--data", dir, "--listen", "127.0.0.1:0", "--mqtt", "mqtt://broker:1883")
	if strings.Contains(banner.String(), "first admin token") {
		t.Error("a store with tokens must not get a first admin token")
	}
	for _, w := range []string{"metrics:", "/v1/events", "mqtt:     broker mqtt://broker:1883", "bearer tokens"} {
		if !strings.Contains(banner.String(), w) {
			t.Errorf("banner lacks %q:\n%s", w, banner.String())
		}
	}
	if code, body := get(t, base+"/v1/boards", secret); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("boards: %d %s", code, body)
	}
	// From loopback too, outside demo mode a token is needed.
	if code, _ := get(t, base+"/v1/boards", ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _ := get(t, base+"/v1/tokens", secret); code != 403 {
		t.Errorf("viewer lists tokens: %d", code)
	}
	if code, body := get(t, base+"/metrics", ""); code != 200 || !strings.Contains(body, "holo_gateway_api_requests_total") {
		t.Errorf("metrics: %d", code)
	}
}

// TestFirstStartWritesAdminToken: the first admin token goes to a 0600
// file whose path the banner names (default DATA/admin-token, or
// --admin-token-file), never to stdout or stderr.
func TestFirstStartWritesAdminToken(t *testing.T) {
	t.Parallel()
	for _, custom := range []bool{false, true} {
		dir := t.TempDir()
		want := filepath.Join(dir, AdminTokenFile)
		args := []string{"--data", dir, "--listen", "127.0.0.1:0"}
		if custom {
			want = filepath.Join(t.TempDir(), "secrets", "first")
			args = append(args, "--admin-token-file", want)
		}
		base, banner := start(t, args...)
		m := regexp.MustCompile(`first admin token: written to (\S+) \(mode 0600`).FindStringSubmatch(banner.String())
		if m == nil || m[1] != want {
			t.Fatalf("banner does not name %s:\n%s", want, banner.String())
		}
		fi, err := os.Stat(want)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", want, fi.Mode().Perm())
		}
		raw, _ := os.ReadFile(want)
		secret := strings.TrimSpace(string(raw))
		if !strings.HasPrefix(secret, "holo_") || strings.Contains(banner.String(), secret) {
			t.Errorf("token %q in the file; banner:\n%s", secret, banner.String())
		}
		if code, body := get(t, base+"/v1/tokens", secret); code != 200 || !strings.Contains(body, `"role":"admin"`) {
			t.Errorf("tokens: %d %s", code, body)
		}
	}
}

func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	t.Parallel()
	base, banner := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2", "--demo-groups", "1")
	if !strings.Contains(banner.String(), "loopback need no token") {
		t.Errorf("banner does not tell about demo auth:\n%s", banner.String())
	}
	waitOnline(t, base, 2, nil)
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", ":0"},
		{"--data", "x", "--tls-cert", "a"},
		{"--data", "x", "extra"},
		{"--nope"},
		{"token"},
		{"token", "create", "--name", "x"},
		{"token", "frob", "--data", t.TempDir()},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}
