// Package boardtest runs real holo-board processes for black-box tests and
// talks to them over HTTP the way a user's client would. Every reply it
// sees is validated against the board's own openapi.json, so a test that
// passes also proves the description tells the truth.
package boardtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/holofleet/holofleet/bus/testbin"
)

// Binary returns the path of cmd/holo-board built with the race
// detector, built once per test process and kept between runs while
// nothing it is made of changes (package bus/testbin).
func Binary(t testing.TB) string {
	t.Helper()
	return testbin.Build(t, "./cmd/holo-board", true)
}

// Board is a running holo-board process.
type Board struct {
	t       testing.TB
	DataDir string
	URL     string // http://127.0.0.1:PORT
	Host    string // 127.0.0.1:PORT
	Cmd     *exec.Cmd
	Stdout  *bytes.Buffer
	Stderr  *bytes.Buffer
	Client  *http.Client

	mu       sync.Mutex
	router   routers.Router
	validate bool
}

var listenRE = regexp.MustCompile(`listening on (http://(\S+))`)

// TestKDFEnv, set to 1, makes holo-board store new passwords with a
// cheap KDF (tests only; it warns at start).
const TestKDFEnv = "HOLO_BOARD_INSECURE_TEST_KDF"

// Env is the environment a test gives a holo-board process it starts:
// this process's, with passwords stored with the cheap KDF (TestKDFEnv)
// and the race runtime told not to linger at exit.
//
// The binary is built with -race, and the race runtime sleeps a second
// (GORACE atexit_sleep_ms, default 1000) before every exit of a process
// so that other threads can finish reporting. A board in process mode is
// two processes, so every stop cost two seconds and every restart one, of
// nothing: most of the package's time. Races found are still reported
// (and still fail the exit status); only the wait is gone. A GORACE the
// caller set is kept, with this option added after it.
func Env() []string {
	env := os.Environ()
	race := "atexit_sleep_ms=0"
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			env = append(env[:i:i], env[i+1:]...)
			if v != "" {
				race = v + " " + race
			}
			break
		}
	}
	return append(env, "GORACE="+race, TestKDFEnv+"=1")
}

// Start runs holo-board with --data dir (a new temp dir when empty) on a
// free loopback port, plus extra flags, and waits until it serves.
func Start(t testing.TB, dir string, extra ...string) *Board {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	args := append([]string{"--data", dir, "--http", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	cmd := exec.Command(Binary(t), args...)
	// Passwords stored with a cheap argon2id: the race-built binary on a
	// loaded machine takes seconds per production verification.
	cmd.Env = Env()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf bytes.Buffer
	cmd.Stderr = &syncWriter{w: &errBuf}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &Board{t: t, DataDir: dir, Cmd: cmd, Stdout: &bytes.Buffer{}, Stderr: &errBuf,
		Client: &http.Client{Timeout: 60 * time.Second}, validate: true}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			b.mu.Lock()
			b.Stdout.WriteString(line + "\n")
			b.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("holo-board exited before listening: %s", errBuf.String())
		}
		b.URL = u
		b.Host = strings.TrimPrefix(u, "http://")
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("holo-board did not start: %s", errBuf.String())
	}
	t.Cleanup(func() { b.Stop() })
	// The description is read now, while the board surely serves: read at
	// the first request, it could meet a board that request restarted.
	if _, err := b.routerFor(); err != nil {
		t.Fatalf("holo-board's openapi.json: %v", err)
	}
	return b
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Stop ends the process with SIGTERM and waits for it.
func (b *Board) Stop() {
	if b.Cmd.ProcessState != nil {
		return
	}
	_ = b.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- b.Cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = b.Cmd.Process.Kill()
		<-done
		b.t.Errorf("holo-board did not stop on SIGTERM")
	}
}

// Kill ends the process with SIGKILL, as pulling the power would.
func (b *Board) Kill() {
	_ = b.Cmd.Process.Signal(syscall.SIGKILL)
	_ = b.Cmd.Wait()
}

// Reply is one HTTP reply.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r Reply) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r Reply) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// ErrorCode returns the error field of an error body ("" when none).
func (r Reply) ErrorCode() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error
}

// Request options.
type Option func(*http.Request)

// Header sets a request header.
func Header(k, v string) Option { return func(r *http.Request) { r.Header.Set(k, v) } }

// Host sets the request's Host header.
func Host(h string) Option { return func(r *http.Request) { r.Host = h } }

// NoContentType removes the default Content-Type of JSON bodies.
func NoContentType() Option { return func(r *http.Request) { r.Header.Del("Content-Type") } }

// Do sends a request. A string or []byte body is sent as is with
// Content-Type application/json (unless an option changes it); other values
// are marshalled. Host is the board's IP:port. The reply is validated
// against openapi.json.
func (b *Board) Do(method, path string, body any, opts ...Option) Reply {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, b.URL+"/api/v1"+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: reading: %v", method, path, err)
	}
	rep := Reply{Status: resp.StatusCode, Header: resp.Header, Body: data}
	if b.validate && path != "/openapi.json" {
		if err := b.check(req, rep); err != nil {
			b.t.Errorf("%s %s -> %d %s\nreply does not match openapi.json: %v", method, path, rep.Status, data, err)
		}
	}
	return rep
}

// check validates a reply against the board's openapi.json.
func (b *Board) check(req *http.Request, rep Reply) error {
	router, err := b.routerFor()
	if err != nil {
		return err
	}
	u := *req.URL
	u.Host = "board"
	u.Scheme = "http"
	vreq := req.Clone(context.Background())
	vreq.URL = &u
	vreq.Body = http.NoBody
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		if rep.Status == http.StatusNotFound {
			return nil // unknown endpoints are 404 and not described
		}
		return fmt.Errorf("route not described: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{ExcludeRequestBody: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rep.Status, Header: rep.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(rep.Body)
	return openapi3filter.ValidateResponse(context.Background(), out)
}

func (b *Board) routerFor() (routers.Router, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.router != nil {
		return b.router, nil
	}
	resp, err := b.Client.Get(b.URL + "/api/v1/openapi.json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r, err := routerOf(raw)
	if err != nil {
		return nil, err
	}
	b.router = r
	return r, nil
}

// routers holds the router made of each openapi.json seen, by its
// content: every board of a test process serves the same description, and
// loading and validating it is slow with the race detector.
var (
	routersMu sync.Mutex
	routersBy = map[[32]byte]routers.Router{}
)

func routerOf(raw []byte) (routers.Router, error) {
	key := sha256.Sum256(raw)
	routersMu.Lock()
	defer routersMu.Unlock()
	if r, ok := routersBy[key]; ok {
		return r, nil
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi.json does not load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json is not valid: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: "http://board/api/v1"}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	routersBy[key] = r
	return r, nil
}

// Log returns the board's log (stderr) so far.
func (b *Board) Log() string {
	w := b.Cmd.Stderr.(*syncWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return b.Stderr.String()
}

// Output returns what the board printed on stdout so far.
func (b *Board) Output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Stdout.String()
}

// AwaitOutput waits until a stdout line matches re and returns its first
// submatch (or the whole match when re has no group).
func (b *Board) AwaitOutput(t testing.TB, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	var got string
	WaitFor(t, timeout, "board output matching "+re.String(), func() bool {
		m := re.FindStringSubmatch(b.Output())
		if m == nil {
			return false
		}
		got = m[len(m)-1]
		return true
	})
	return got
}

// WaitFor polls cond every 20 ms until it holds or timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
