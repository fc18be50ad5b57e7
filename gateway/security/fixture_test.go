package security

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/audit"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
	"github.com/holofleet/holofleet/store"
)

// recFleet is a fleet.Service with two boards that records the calls and
// actions that reach it and serves watches from publish.
type recFleet struct {
	mu       sync.Mutex
	calls    []string // "id METHOD path"
	actions  int
	watchers map[chan fleet.Event]bool
}

func newRecFleet() *recFleet { return &recFleet{watchers: map[chan fleet.Event]bool{}} }

func (f *recFleet) Boards(fleet.Filter) []fleet.BoardView {
	return []fleet.BoardView{{ID: "b1", Online: true}, {ID: "b2", Online: true}}
}

func (f *recFleet) Board(id string) (fleet.BoardView, error) {
	if id != "b1" && id != "b2" {
		return fleet.BoardView{}, fleet.ErrUnknownBoard
	}
	return fleet.BoardView{ID: id, Online: true}, nil
}

func (f *recFleet) SetLabels(id string, l map[string]string) (fleet.BoardView, error) {
	return fleet.BoardView{ID: id, Labels: l}, nil
}

func (f *recFleet) Call(_ context.Context, id, method, path string, _ []byte) (fleet.Reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id+" "+method+" "+path)
	return fleet.Reply{Status: 200, Body: []byte(`{}`)}, nil
}

func (f *recFleet) Do(_ context.Context, sel fleet.Selector, _ fleet.Action) ([]fleet.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions++
	return []fleet.Result{{Board: "b1", Via: "group"}}, nil
}

func (f *recFleet) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	ch := make(chan fleet.Event, 16)
	f.mu.Lock()
	f.watchers[ch] = true
	f.mu.Unlock()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.watchers, ch)
		close(ch)
	})
	return &fleet.Watcher{C: ch, Dropped: func() uint64 { return 0 }}
}

// publish hands ev to every open watcher (dropping it for a full one).
func (f *recFleet) publish(ev fleet.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (f *recFleet) callsMade() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// recRollouts is an rollout.Service whose watches stay open until their
// context ends; the rest knows no rollout.
type recRollouts struct{}

func (recRollouts) DryRun(context.Context, rollout.Plan) (rollout.Selection, error) {
	return rollout.Selection{}, nil
}
func (recRollouts) Create(context.Context, rollout.Plan) (rollout.Status, error) {
	return rollout.Status{}, rollout.ErrPlan
}
func (recRollouts) Get(string) (rollout.Status, error)     { return rollout.Status{}, rollout.ErrNotFound }
func (recRollouts) List() []rollout.Status                 { return nil }
func (recRollouts) Boards(string) ([]rollout.Board, error) { return nil, rollout.ErrNotFound }
func (recRollouts) Pause(context.Context, string, string) (rollout.Status, error) {
	return rollout.Status{}, rollout.ErrNotFound
}
func (recRollouts) Resume(context.Context, string) (rollout.Status, error) {
	return rollout.Status{}, rollout.ErrNotFound
}
func (recRollouts) Abort(context.Context, string, string) (rollout.Status, error) {
	return rollout.Status{}, rollout.ErrNotFound
}
func (recRollouts) Revert(context.Context, string, string) (rollout.Status, error) {
	return rollout.Status{}, rollout.ErrNotFound
}
func (recRollouts) Watch(ctx context.Context, _ string, _ uint64) <-chan rollout.Event {
	ch := make(chan rollout.Event)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch
}

// apiGW is the in-process API server on a loopback port, with one token
// per role and an audit log.
type apiGW struct {
	url, addr string
	fleet     *recFleet
	tokens    *auth.Tokens
	audit     *audit.Log
	secrets   map[string]string // role -> secret
	conn      *grpc.ClientConn
	client    fleetv1.FleetServiceClient
}

// runAPI starts the API server; mut adjusts its Config, ln (nil for
// 127.0.0.1:0) is where it listens.
func runAPI(t testing.TB, ln net.Listener, mut func(*api.Config)) *apiGW {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	g := &apiGW{fleet: newRecFleet(), tokens: toks, secrets: map[string]string{}}
	for _, r := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		sec, _, err := toks.Create("t-"+r.String(), r)
		if err != nil {
			t.Fatal(err)
		}
		g.secrets[r.String()] = sec
	}
	g.audit, err = audit.Open(audit.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := api.Config{Fleet: g.fleet, Tokens: toks, Registerer: reg, Gatherer: reg, Audit: g.audit, Rollouts: recRollouts{}}
	if mut != nil {
		mut(&cfg)
	}
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	go func() { done <- g.audit.Run(ctx) }()
	g.addr = ln.Addr().String()
	g.url = "http://" + g.addr
	g.conn, err = grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	g.client = fleetv1.NewFleetServiceClient(g.conn)
	t.Cleanup(func() {
		g.conn.Close()
		cancel()
		for range 2 {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("stop: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("the API server did not stop")
			}
		}
		db.Close()
	})
	return g
}

// ctx is a call context with role's token ("" for none).
func (g *apiGW) ctx(t testing.TB, role string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if role == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+g.secrets[role])
}

// do sends a REST request as role ("" for none) with a JSON body, and
// returns the response with its body read.
func (g *apiGW) do(t testing.TB, role, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+g.secrets[role])
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// records syncs the audit log and returns what f selects.
func (g *apiGW) records(t testing.TB, f audit.Filter) []audit.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	es, err := g.audit.Query(f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// The holo-gateway binary, built once per test binary.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

func gatewayBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOLO_SECURITY_GATEWAY"); p != "" {
		return p // a holo-gateway built elsewhere (a release, an older commit)
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "holo-security")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "holo-gateway")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/holo-gateway")
		cmd.Dir = filepath.Join("..", "..")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build holo-gateway: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// gwProc is a running holo-gateway process.
type gwProc struct {
	cmd   *exec.Cmd
	url   string
	admin string // the first admin token
	out   *syncBuf
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	apiLine   = regexp.MustCompile(`API:\s+(http://\S+)`)
	adminLine = regexp.MustCompile(`first admin token: written to (\S+) \(mode`)
)

// spawnGateway runs holo-gateway with a fresh data directory, no MQTT and
// args, until the test ends.
func spawnGateway(t testing.TB, env []string, args ...string) *gwProc {
	t.Helper()
	bin := gatewayBinary(t)
	all := append([]string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-mqtt"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Env = append(os.Environ(), env...)
	p := &gwProc{cmd: cmd, out: &syncBuf{}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = p.out.Write([]byte(sc.Text() + "\n"))
		}
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("holo-gateway did not stop on SIGTERM")
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		out := p.out.String()
		if m := apiLine.FindStringSubmatch(out); m != nil && strings.Contains(out, "Ctrl-C stops") {
			p.url = m[1]
			if m := adminLine.FindStringSubmatch(out); m != nil {
				p.admin = func() string { b, _ := os.ReadFile(m[1]); return strings.TrimSpace(string(b)) }()
			}
			return p
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-exited:
			t.Fatalf("holo-gateway exited: %v\n%s", waitErr, p.out.String())
		case <-deadline:
			t.Fatalf("no banner:\n%s", p.out.String())
		}
	}
}

// rssKiB reads a process's resident set size from /proc.
func rssKiB(t testing.TB, pid int) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("VmRSS %q", rest)
			}
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
