package console_test

// The harness of the browser tests and benchmarks: a real holo-gateway
// (the binary, `holo-gateway demo`, on port 0) or an in-process gateway,
// and headless Chromium driven with chromedp.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/holofleet/holofleet/bus/testbin"
	"github.com/holofleet/holofleet/bus/testlevel"
)

// ScreenshotDir is where the tests write the pages' screenshots, from
// the repository root (bin/ is git-ignored).
const ScreenshotDir = "bin/console-screenshots"

var sizes = []struct{ w, h int64 }{{1280, 800}, {390, 844}}

// chromium returns the browser to drive, or skips the test when there is
// none (and CI is not set: with CI=true a missing browser fails).
func chromium(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "headless-shell", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("console: Chromium is required with CI=true (apt-get install chromium)")
	}
	tb.Skip("console: no Chromium on this machine (apt-get install chromium); the browser tests are skipped")
	return ""
}

// --- the gateway binary ---

// gatewayBinary builds cmd/holo-gateway once per test process (kept
// between runs while nothing it is made of changes: bus/testbin).
func gatewayBinary(tb testing.TB) string {
	tb.Helper()
	return testbin.Build(tb, "./cmd/holo-gateway", false)
}

// demoGW is a running `holo-gateway demo`.
type demoGW struct {
	URL   string // http://127.0.0.1:port
	Admin string // the first admin token
	IDs   []string
	cmd   *exec.Cmd
	dir   string
	log   *bytes.Buffer
	mu    sync.Mutex
}

var apiLine = regexp.MustCompile(`^\s*API:\s+(http://\S+)`)
var tokenLine = regexp.MustCompile(`first admin token: written to (\S+) \(mode`)

// startDemo runs `holo-gateway demo` with its own data dir on port 0 and
// waits until every board is online on both the line and the LAN.
func startDemo(tb testing.TB, boards int) *demoGW {
	tb.Helper()
	bin := gatewayBinary(tb)
	dir, err := os.MkdirTemp("", "holo-console-demo-")
	if err != nil {
		tb.Fatal(err)
	}
	g := &demoGW{dir: dir, log: &bytes.Buffer{}}
	g.cmd = exec.Command(bin, "demo", "--data", dir, "--listen", "127.0.0.1:0", "--mqtt-port", "0", "--demo-boards", fmt.Sprint(boards))
	g.cmd.Stderr = &lockedWriter{g: g}
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			g.log.WriteString(line + "\n")
			if m := apiLine.FindStringSubmatch(line); m != nil {
				g.URL = m[1]
			}
			if m := tokenLine.FindStringSubmatch(line); m != nil {
				g.Admin = func() string { b, _ := os.ReadFile(m[1]); return strings.TrimSpace(string(b)) }()
			}
			ready := g.URL != "" && g.Admin != "" && strings.Contains(g.log.String(), "Ctrl-C stops.")
			g.mu.Unlock()
			if ready {
				once.Do(func() { close(found) })
			}
		}
	}()
	select {
	case <-found:
	case <-time.After(3 * time.Minute):
		g.Stop()
		tb.Fatalf("holo-gateway demo did not start:\n%s", g.Log())
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var list []struct {
			ID         string   `json:"id"`
			Online     bool     `json:"online"`
			Transports []string `json:"transports"`
			Groups     []int    `json:"groups"`
		}
		st, body := g.API(tb, "GET", "/v1/boards", nil, "")
		ok := st == 200 && json.Unmarshal(body, &list) == nil && len(list) == boards
		for _, b := range list {
			ok = ok && b.Online && len(b.Transports) == 2 && len(b.Groups) > 0
		}
		if ok {
			g.IDs = nil
			for _, b := range list {
				g.IDs = append(g.IDs, b.ID)
			}
			return g
		}
		if time.Now().After(deadline) {
			g.Stop()
			tb.Fatalf("the demo boards did not come online: %s\n%s", body, g.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lockedWriter struct{ g *demoGW }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	if w.g.log.Len() < 4<<20 {
		w.g.log.Write(p)
	}
	return len(p), nil
}

func (g *demoGW) Log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.log.String()
}

// Stop ends the gateway (SIGINT, then kill) and removes its data.
func (g *demoGW) Stop() {
	if g.cmd.Process != nil {
		_ = g.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = g.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = g.cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(g.dir)
}

// API makes one REST call (token "" for none: loopback in demo mode).
func (g *demoGW) API(tb testing.TB, method, path string, body any, token string) (int, []byte) {
	tb.Helper()
	return apiCall(tb, g.URL, method, path, body, token)
}

func apiCall(tb testing.TB, base, method, path string, body any, token string) (int, []byte) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// boardCall runs GET path on a board through the API and decodes the
// board's reply.
func (g *demoGW) boardCall(tb testing.TB, id, method, path string, body any, out any) {
	tb.Helper()
	req := map[string]any{"method": method, "path": path}
	if body != nil {
		req["body"] = body
	}
	st, b := g.API(tb, "POST", "/v1/boards/"+id+"/call", req, "")
	if st != 200 {
		tb.Fatalf("call %s %s on %s: %d %s", method, path, id, st, b)
	}
	var r struct {
		Body string `json:"body"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(r.Body), out); err != nil {
			tb.Fatalf("call %s: %v: %s", path, err, r.Body)
		}
	}
}

// --- the browser ---

// browser is one headless Chromium; tabs are opened with Tab.
type browser struct {
	ctx    context.Context
	cancel func()
}

func newBrowser(tb testing.TB) *browser {
	tb.Helper()
	exe := chromium(tb)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // containers run tests as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.WindowSize(1280, 800),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Run(bctx); err != nil {
		bcancel()
		acancel()
		tb.Fatalf("start Chromium %s: %v", exe, err)
	}
	return &browser{ctx: bctx, cancel: func() { bcancel(); acancel() }}
}

// tab is one page with the errors its scripts reported.
type tab struct {
	ctx    context.Context
	cancel func()
	tb     testing.TB
	mu     sync.Mutex
	errs   []string
	dialog []string
}

// Tab opens a new tab; it closes when the test ends, failing the test if
// the page's scripts threw or logged errors, or opened a dialog.
func (b *browser) Tab(tb testing.TB) *tab {
	tb.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t := &tab{ctx: ctx, cancel: cancel, tb: tb}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.mu.Lock()
			t.errs = append(t.errs, "exception: "+e.ExceptionDetails.Error())
			t.mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				t.mu.Lock()
				t.errs = append(t.errs, "console.error: "+strings.Join(parts, " "))
				t.mu.Unlock()
			}
		case *page.EventJavascriptDialogOpening:
			t.mu.Lock()
			t.dialog = append(t.dialog, e.Message)
			t.mu.Unlock()
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	// Every document records what the Content-Security-Policy blocked.
	if err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`window.__csp = [];
			document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber));`).Do(ctx)
		return err
	})); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		var csp []string
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		_ = chromedp.Run(cctx, chromedp.Evaluate(`window.__csp || []`, &csp))
		ccancel()
		for _, v := range csp {
			tb.Errorf("the page broke its Content-Security-Policy: %s", v)
		}
		t.mu.Lock()
		errs, dialogs := t.errs, t.dialog
		t.mu.Unlock()
		cancel()
		for _, e := range errs {
			tb.Errorf("page script error: %s", e)
		}
		for _, d := range dialogs {
			tb.Errorf("page opened a dialog: %q", d)
		}
	})
	return t
}

// allowErrors forgets the script errors logged so far (a test that cut
// the network on purpose).
func (t *tab) allowErrors(match string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keep []string
	for _, e := range t.errs {
		if !strings.Contains(e, match) {
			keep = append(keep, e)
		}
	}
	t.errs = keep
}

func (t *tab) run(actions ...chromedp.Action) {
	t.tb.Helper()
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.tb.Fatalf("chromedp: %v", err)
	}
}

// eval evaluates a JavaScript expression and decodes its value.
func (t *tab) eval(expr string, out any) {
	t.tb.Helper()
	t.run(chromedp.Evaluate(expr, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
}

// wait polls a JavaScript expression until it is true.
func (t *tab) wait(what, expr string, timeout time.Duration) {
	t.tb.Helper()
	// The bound only ends a failing test (a passing one returns as soon
	// as the page shows the state): generous, for a machine where
	// starting the gateway and the browser alone took 2.5 minutes.
	timeout = max(4*timeout, time.Minute)
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		err := chromedp.Run(ctx, chromedp.Evaluate("!!("+expr+")", &ok))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var body string
			_ = chromedp.Run(t.ctx, chromedp.Evaluate(`document.getElementById('main') ? document.getElementById('main').innerText.slice(0, 2000) : ''`, &body))
			t.tb.Fatalf("waited %v for %s (%s): err %v; page text:\n%s", timeout, what, expr, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// click clicks the first element matching a CSS selector (by script: the
// element need not be in view, as a keyboard user would reach it).
func (t *tab) click(sel string) {
	t.tb.Helper()
	var ok bool
	t.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, sel), &ok)
	if !ok {
		t.tb.Fatalf("no element %s to click", sel)
	}
}

// setValue sets a form control's value and tells the page it changed.
func (t *tab) setValue(sel, value string) {
	t.tb.Helper()
	var ok bool
	t.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.value = %q;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value), &ok)
	if !ok {
		t.tb.Fatalf("no element %s to set", sel)
	}
}

// screenshot writes the page at each size to ScreenshotDir/name-WxH.png.
func (t *tab) screenshot(name string) {
	t.tb.Helper()
	dir := filepath.Join(repoRoot(t.tb), ScreenshotDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.tb.Fatal(err)
	}
	// make test shoots the desktop size only; make soak both.
	for _, s := range sizes[:testlevel.Pick(1, len(sizes))] {
		var png []byte
		t.run(chromedp.EmulateViewport(s.w, s.h, func(p *emulation.SetDeviceMetricsOverrideParams, _ *emulation.SetTouchEmulationEnabledParams) {
			p.Mobile = s.w < 500
			if p.Mobile {
				p.DeviceScaleFactor = 1
			}
		}), chromedp.Sleep(150*time.Millisecond), chromedp.CaptureScreenshot(&png))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%dx%d.png", name, s.w, s.h)), png, 0o644); err != nil {
			t.tb.Fatal(err)
		}
	}
	t.run(chromedp.EmulateViewport(1280, 800))
}

func repoRoot(tb testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			tb.Fatal(errors.New("no go.mod above " + dir))
		}
	}
}

// streamEvent is one event of GET /v1/events as a test reads it.
type streamEvent struct {
	N     uint64 `json:"n,string"`
	Board string `json:"board"`
	Type  string `json:"type"`
	Kind  string `json:"kind"`
	Data  string `json:"data"`
	Time  string `json:"time"`
}

// eventWatch reads the fleet's SSE stream in the background until the
// test ends.
type eventWatch struct {
	mu  sync.Mutex
	evs []streamEvent
}

func watchEvents(tb testing.TB, base string) *eventWatch {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	w := &eventWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			var ev streamEvent
			if json.Unmarshal([]byte(line[6:]), &ev) == nil {
				w.mu.Lock()
				w.evs = append(w.evs, ev)
				w.mu.Unlock()
			}
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return w
}

// waitEvents waits until cond holds for the events seen so far.
func waitEvents(tb testing.TB, w *eventWatch, what string, cond func([]streamEvent) bool) {
	tb.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(w.events()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("the gateway's event stream never showed %s", what)
		}
	}
}

func (w *eventWatch) events() []streamEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.evs)
}
