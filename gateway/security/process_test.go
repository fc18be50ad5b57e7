package security

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/api"
)

// passwordBoard is a LAN board that notes the bearer passwords it is sent.
type passwordBoard struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (b *passwordBoard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.seen[r.Header.Get("Authorization")] = true
	b.mu.Unlock()
	http.NotFound(w, r)
}

func (b *passwordBoard) saw(authz string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[authz]
}

// TestBoardPasswordsOutOfArgv: a board's password reaches holo-gateway
// from a boards file (mode 0600) or the environment, never from its
// command line, which every user of the machine reads in ps; a boards
// file others may read is refused with a clear error. Before the fix a
// password could only come inside a --board URL.
func TestBoardPasswordsOutOfArgv(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs holo-gateway")
	}
	fileBoard := &passwordBoard{seen: map[string]bool{}}
	envBoard := &passwordBoard{seen: map[string]bool{}}
	s1, s2 := httptest.NewServer(fileBoard), httptest.NewServer(envBoard)
	defer s1.Close()
	defer s2.Close()
	dir := t.TempDir()
	boards := filepath.Join(dir, "boards")
	if err := os.WriteFile(boards, []byte(s1.URL+" pw-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := spawnGateway(t, []string{"HOLO_BOARD_PASSWORD=pw-from-env"}, "--boards-file", boards, "--board", s2.URL)
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if strings.Contains(string(cmdline), "pw-from") {
		t.Errorf("the command line shows a password: %q", cmdline)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !fileBoard.saw("Bearer pw-from-file") || !envBoard.saw("Bearer pw-from-env") {
		if time.Now().After(deadline) {
			t.Fatalf("boards never got their passwords: file %v env %v", fileBoard.seen, envBoard.seen)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A boards file others may read is refused before anything starts.
	if err := os.Chmod(boards, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gatewayBinary(t), "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-mqtt", "--boards-file", boards).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "chmod 600") || !strings.Contains(string(out), "0644") {
		t.Errorf("a 0644 boards file: %v\n%s", err, out)
	}
}

// TestMetricsAuth: with MetricsAuth (--metrics-auth), /metrics needs a
// viewer token; without it /metrics stays open (docs/metrics.md says
// why).
func TestMetricsAuth(t *testing.T) {
	g := runAPI(t, nil, func(c *api.Config) { c.MetricsAuth = true })
	g.do(t, "viewer", "GET", "/v1/boards", "")
	if resp, _ := g.do(t, "", "GET", "/metrics", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	if resp, body := g.do(t, "viewer", "GET", "/metrics", ""); resp.StatusCode != 200 || !strings.Contains(body, "holo_gateway_api_requests_total") {
		t.Errorf("viewer: %d", resp.StatusCode)
	}
	open := runAPI(t, nil, nil)
	if resp, _ := open.do(t, "", "GET", "/metrics", ""); resp.StatusCode != 200 {
		t.Errorf("default: %d", resp.StatusCode)
	}
}
