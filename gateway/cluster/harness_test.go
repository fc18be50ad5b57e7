package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/testbin"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/fleetmode"
)

// gatewayPkg is the command the tests run as gateway processes.
const gatewayPkg = "./cmd/holo-gateway"

// gatewayBinary is holo-gateway, built once (bus/testbin: kept between
// runs while nothing it is made of changes), or the one
// HOLO_CLUSTER_GATEWAY names.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOLO_CLUSTER_GATEWAY"); p != "" {
		return p
	}
	return testbin.Build(t, gatewayPkg, false)
}

// childMains are the other roles of the test binary: when the named
// environment variable is set, TestMain runs the function with its value
// and exits with what it returns (the scale benchmark's board processes).
var childMains = map[string]func(string) int{}

// parallel is how many tests of the package run at once, at least.
const parallel = 8

func TestMain(m *testing.M) {
	for env, run := range childMains {
		if v := os.Getenv(env); v != "" {
			os.Exit(run(v))
		}
	}
	flag.Parse()
	// These tests mostly wait on the processes they run (heartbeats, a
	// death told after seconds, a line's polls), using little CPU: they
	// run side by side beyond GOMAXPROCS (two on CI's two cores), unless
	// -parallel says otherwise.
	if err := testlevel.Parallel(max(runtime.GOMAXPROCS(0), parallel)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The gateway is built (or found built) while the first tests, which
	// run no process, go on. Not for -short, a given binary, or a run of
	// no test (a build).
	if !testing.Short() && os.Getenv("HOLO_CLUSTER_GATEWAY") == "" && flag.Lookup("test.run").Value.String() != "^$" {
		testbin.Start(gatewayPkg, false)
	}
	os.Exit(m.Run())
}

// site is one gateway's simulated installation, run by the test: an
// RS485 line with a hub socket the gateway masters, boards on it (also
// reachable over HTTP, as demo boards are), and LAN-only boards.
type site struct {
	hubURL   string
	lineURLs []string // the line boards' HTTP URLs
	lanURLs  []string // the LAN-only boards
	line     *simline.Line
	fms      []*fleetmode.Fleet

	mu    sync.Mutex
	boots map[string][]string // versions booted, by board URL
}

// startSite runs lineN boards on a line and lanN LAN-only boards; line
// board i is in group i%2+1 (fleet mode gives groups to boards on a line
// only: the LAN-only boards are in none).
func startSite(t testing.TB, lineN, lanN int) *site {
	t.Helper()
	dir, err := os.MkdirTemp("", "holo-site") // short: the hub socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &site{boots: map[string][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, fm := range s.fms {
			fm.Stop()
		}
		cancel()
		wg.Wait()
		if s.line != nil {
			s.line.Close()
		}
	})
	groups := func(i int) []int { return []int{i%2 + 1} }
	ota := func(kind string) *fleetmode.OTAOptions {
		return &fleetmode.OTAOptions{OnBoot: func(i int, a boardapi.App) {
			s.mu.Lock()
			defer s.mu.Unlock()
			k := fmt.Sprintf("%s%d", kind, i)
			s.boots[k] = append(s.boots[k], a.Version)
		}}
	}
	if lineN > 0 {
		s.line, err = simline.New(simline.Config{Baud: 115200})
		if err != nil {
			t.Fatal(err)
		}
		hub := filepath.Join(dir, "line.sock")
		ln, err := net.Listen("unix", hub)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = simline.ServeHub(ctx, s.line, ln) })
		s.hubURL = "simline://" + hub
		fm, err := fleetmode.Start(ctx, fleetmode.Options{N: lineN, BaseDir: filepath.Join(dir, "line"), Line: s.line,
			Groups: groups, OTA: ota("line")})
		if err != nil {
			t.Fatal(err)
		}
		s.fms = append(s.fms, fm)
		for _, b := range fm.Boards() {
			s.lineURLs = append(s.lineURLs, b.URL)
		}
	}
	if lanN > 0 {
		fm, err := fleetmode.Start(ctx, fleetmode.Options{N: lanN, BaseDir: filepath.Join(dir, "lan"), Groups: groups,
			OTA: ota("lan")})
		if err != nil {
			t.Fatal(err)
		}
		s.fms = append(s.fms, fm)
		for _, b := range fm.Boards() {
			s.lanURLs = append(s.lanURLs, b.URL)
		}
	}
	return s
}

// bootsOf returns the versions the board at url booted, in order.
func (s *site) bootsOf(url string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for kind, urls := range map[string][]string{"line": s.lineURLs, "lan": s.lanURLs} {
		for i, u := range urls {
			if u == url {
				return append([]string(nil), s.boots[fmt.Sprintf("%s%d", kind, i)]...)
			}
		}
	}
	return nil
}

// gwProc is a holo-gateway process of a test cluster.
type gwProc struct {
	name, data string
	args       []string
	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
	api        string // http://127.0.0.1:port
	join       string // the embedded engine's join URL
	admin      string // the first admin token's secret (without --insecure-lab)
	token      string // the bearer token rest sends ("" none)
	requestID  string // the X-Request-Id rest sends ("" none: the gateway makes one)
	out, log   *testbin.Output
	// logDir, when set, keeps every run's log in logDir/<name>.log (the
	// soak's report directory): a kill would lose it.
	logDir string
}

var (
	apiLine  = regexp.MustCompile(`^\s*API:\s+(http://\S+)`)
	joinLine = regexp.MustCompile(`others join with --cluster (\S+)`)
	tokLine  = regexp.MustCompile(`first admin token: written to (\S+) \(mode`)
)

// startGateway runs holo-gateway --name name --cluster url with the site's
// line and boards (and extra flags) until the test ends.
func startGateway(t testing.TB, name, url string, s *site, extra ...string) *gwProc {
	t.Helper()
	return startGatewayAuth(t, name, url, s, false, extra...)
}

// startGatewayAuth is startGateway with bearer tokens required (secure)
// instead of --insecure-lab.
func startGatewayAuth(t testing.TB, name, url string, s *site, secure bool, extra ...string) *gwProc {
	t.Helper()
	g := newGateway(t, name, url, s, secure, extra...)
	g.start(t)
	return g
}

// newGateway is startGatewayAuth without the start: the process is
// stopped when the test ends if it was started.
func newGateway(t testing.TB, name, url string, s *site, secure bool, extra ...string) *gwProc {
	t.Helper()
	g := &gwProc{name: name, data: t.TempDir()}
	g.args = []string{"--data", g.data, "--listen", "127.0.0.1:0", "--no-mqtt"}
	if !secure {
		g.args = append(g.args, "--insecure-lab")
	}
	// Deaths are told within 3 s: on a loaded machine (two cores, CPU
	// hogs beside) a live gateway was once taken for dead at 1.5 s.
	g.args = append(g.args, "--name", name, "--cluster", url, "--cluster-listen", "127.0.0.1:0",
		"--cluster-heartbeat", "500ms", "--cluster-dead-after", "3s", "--cluster-lease", "3s")
	g.args = append(g.args, joinArgs(t, name, url)...)
	if s != nil {
		if s.hubURL != "" {
			g.args = append(g.args, "--line", s.hubURL)
		}
		for _, u := range append(append([]string{}, s.lineURLs...), s.lanURLs...) {
			g.args = append(g.args, "--board", u)
		}
	}
	g.args = append(g.args, extra...)
	t.Cleanup(g.stop)
	return g
}

func (g *gwProc) start(t testing.TB) {
	t.Helper()
	if err := g.launch(gatewayBinary(t)); err != nil {
		t.Fatal(err)
	}
}

// launch starts the gateway process and waits until it serves (it may
// run on any goroutine: it reports instead of failing the test).
func (g *gwProc) launch(bin string) error {
	cmd := exec.Command(bin, g.args...)
	g.out, g.log = &testbin.Output{}, &testbin.Output{}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(g.out, pw)
	cmd.Stderr = g.log
	var logFile *os.File
	if g.logDir != "" {
		f, err := os.OpenFile(filepath.Join(g.logDir, g.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "=== %s started %s\n", g.name, time.Now().UTC().Format(time.RFC3339Nano))
		cmd.Stderr, logFile = io.MultiWriter(g.log, f), f
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		if logFile != nil {
			logFile.Close() // after Wait: the log is copied to the end
		}
		pw.Close()
		close(exited)
	}()
	g.mu.Lock()
	g.cmd, g.exited = cmd, exited
	g.mu.Unlock()
	sc := bufio.NewScanner(pr)
	timer := time.AfterFunc(60*time.Second, func() { pw.CloseWithError(fmt.Errorf("timeout")) })
	defer timer.Stop()
	api := ""
	for sc.Scan() {
		l := sc.Text()
		if m := apiLine.FindStringSubmatch(l); m != nil {
			api = m[1]
		}
		if m := joinLine.FindStringSubmatch(l); m != nil {
			g.join = m[1]
			registerEmbedded(g.join, g.data)
		}
		if m := tokLine.FindStringSubmatch(l); m != nil {
			g.admin = readSecretFile(m[1])
		}
		if strings.Contains(l, "Ctrl-C stops.") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if api == "" {
		return fmt.Errorf("gateway %s did not start:\n%s\n%s", g.name, g.out.String(), g.log.String())
	}
	g.mu.Lock()
	g.api = api
	g.mu.Unlock()
	return nil
}

// base is the gateway's API base URL.
func (g *gwProc) base() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.api
}

// kill stops the gateway with SIGKILL.
func (g *gwProc) kill() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

func (g *gwProc) stop() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// signal sends sig to the gateway process.
func (g *gwProc) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd != nil {
		_ = g.cmd.Process.Signal(sig)
	}
}

var client = &http.Client{Timeout: 30 * time.Second}

// rest calls the gateway's REST API and returns the status and body.
func (g *gwProc) rest(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.base()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	if g.requestID != "" {
		req.Header.Set("X-Request-Id", g.requestID)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// restJSON calls the API and decodes a 200 answer into out.
func (g *gwProc) restJSON(t testing.TB, method, path string, body, out any) {
	t.Helper()
	code, b := g.rest(t, method, path, body)
	if code != 200 {
		t.Fatalf("%s %s %s: %d %s", g.name, method, path, code, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// boardJSON is a board as the REST API lists it.
type boardJSON struct {
	ID            string            `json:"id"`
	Hostname      string            `json:"hostname"`
	URL           string            `json:"url"`
	Line          string            `json:"line"`
	Groups        []int             `json:"groups"`
	Labels        map[string]string `json:"labels"`
	Online        bool              `json:"online"`
	OfflineReason string            `json:"offline_reason"`
	Firmware      string            `json:"firmware"`
	Gateway       string            `json:"gateway"`
	Transports    []string          `json:"transports"`
}

func (g *gwProc) boards(t testing.TB, query string) []boardJSON {
	t.Helper()
	var out []boardJSON
	g.restJSON(t, "GET", "/v1/boards"+query, nil, &out)
	return out
}

// slack stretches the bounds of waits: d is about what a path takes on a
// loaded machine, and a wait fails only at slack times d, which catches
// a broken path and not a slow one (tests run beside CPU hogs, make
// flaky).
const slack = 4

// eventually retries f until it returns nil or slack times d passes.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(slack * d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (%v): %v", what, slack*d, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// httpJSON GETs url and decodes the answer.
func httpJSON(url string, out any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// readSecretFile reads a secret a gateway wrote for its operator (the
// first admin token: the banner names the file, never the secret).
// An unreadable file gives "", which the caller's requests then show.
func readSecretFile(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}
