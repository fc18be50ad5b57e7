package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

// conProc is a holo-board started with its console on a pty, its stdout
// read line by line (the pty paths it prints).
type conProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	url   string
	lines chan string
	// backlog holds lines read while awaiting another pattern.
	backlog []string
	errs    bytes.Buffer
	done    chan struct{}
}

var (
	conListenRE = regexp.MustCompile(`listening on (http://\S+)`)
	conOnRE     = regexp.MustCompile(`holo-board console on (\S+)`)
	conLinkRE   = regexp.MustCompile(`holo-board link on (\S+)`)
	// conStatusRE is the status line, as docs/simulator.md tells scripts.
	conStatusRE = regexp.MustCompile(`^(ok|error [a-z0-9_]+: .*)$`)
)

func startConsoleBoard(t *testing.T, extra ...string) *conProc {
	t.Helper()
	args := append([]string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--console", "pty"}, extra...)
	cmd := exec.Command(boardtest.Binary(t), args...)
	cmd.Env = boardtest.Env()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &conProc{t: t, cmd: cmd, lines: make(chan string, 256), done: make(chan struct{})}
	cmd.Stderr = &lockedBuffer{b: &p.errs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// await reads stdout lines until one matches re and returns its group.
func (p *conProc) await(re *regexp.Regexp) string {
	p.t.Helper()
	for i, l := range p.backlog {
		if m := re.FindStringSubmatch(l); m != nil {
			p.backlog = append(p.backlog[:i], p.backlog[i+1:]...)
			return m[1]
		}
	}
	timeout := time.After(120 * time.Second) // a bound: a start takes seconds, longer on a loaded machine
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("holo-board ended before printing %s", re)
			}
			if m := re.FindStringSubmatch(l); m != nil {
				return m[1]
			}
			p.backlog = append(p.backlog, l)
		case <-timeout:
			p.t.Fatalf("holo-board did not print %s", re)
		}
	}
}

// term is the host's end of a pty: the console or the link.
type term struct {
	t    *testing.T
	f    *os.File
	mu   sync.Mutex
	buf  []byte
	more chan struct{}
}

func openTerm(t *testing.T, path string) *term {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	tm := &term{t: t, f: f, more: make(chan struct{}, 1)}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			if n > 0 {
				tm.mu.Lock()
				tm.buf = append(tm.buf, b[:n]...)
				tm.mu.Unlock()
				select {
				case tm.more <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { f.Close() })
	return tm
}

// line waits for the next CRLF- or LF-ended line.
func (tm *term) line(timeout time.Duration) (string, bool) {
	deadline := time.After(timeout)
	for {
		tm.mu.Lock()
		if i := bytes.IndexByte(tm.buf, '\n'); i >= 0 {
			l := strings.TrimSuffix(string(tm.buf[:i]), "\r")
			tm.buf = tm.buf[i+1:]
			tm.mu.Unlock()
			return l, true
		}
		tm.mu.Unlock()
		select {
		case <-tm.more:
		case <-deadline:
			return "", false
		}
	}
}

func (tm *term) send(s string) {
	tm.t.Helper()
	if _, err := tm.f.Write([]byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// run types a command line and returns its output lines and status line.
func (tm *term) run(cmdline string) (out []string, status string) {
	tm.t.Helper()
	tm.send(cmdline + "\r")
	for {
		l, ok := tm.line(30 * time.Second)
		if !ok {
			tm.t.Fatalf("%q: no status line; output so far %q", cmdline, out)
		}
		switch {
		case l == "holo> "+cmdline:
		case strings.HasPrefix(l, "holo> "):
			out = nil // an earlier prompt; not ours yet
		case conStatusRE.MatchString(l):
			return out, l
		default:
			out = append(out, l)
		}
	}
}

// ok runs a command that must succeed.
func (tm *term) ok(cmdline string) []string {
	tm.t.Helper()
	out, st := tm.run(cmdline)
	if st != "ok" {
		tm.t.Fatalf("%q: %s\n%s", cmdline, st, strings.Join(out, "\n"))
	}
	return out
}

// fails runs a command that must fail with code.
func (tm *term) fails(cmdline, code string) {
	tm.t.Helper()
	_, st := tm.run(cmdline)
	if !strings.HasPrefix(st, "error "+code+": ") {
		tm.t.Errorf("%q: got %q, want error %s", cmdline, st, code)
	}
}

// sse collects the board's event stream.
type sse struct {
	mu   sync.Mutex
	msgs []string // "kind data"
	resp *http.Response
}

func openSSE(t *testing.T, url string) *sse {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/v1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	s := &sse{resp: resp}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		kind := ""
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				kind = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: "):
				s.mu.Lock()
				s.msgs = append(s.msgs, kind+" "+strings.TrimPrefix(l, "data: "))
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s
}

// wait returns the first message (from index from on) of kind whose data
// holds every part.
func (s *sse) wait(t *testing.T, from int, kind string, parts ...string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for i := from; i < len(s.msgs); i++ {
			m := s.msgs[i]
			if !strings.HasPrefix(m, kind+" ") {
				continue
			}
			all := true
			for _, p := range parts {
				all = all && strings.Contains(m, p)
			}
			if all {
				s.mu.Unlock()
				return i
			}
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s event with %q on the stream", kind, parts)
	return 0
}

func (s *sse) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

func (s *sse) since(from int, kind string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs[from:] {
		if strings.HasPrefix(m, kind+" ") {
			out = append(out, m)
		}
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleOverPty(t *testing.T) {
	t.Parallel()
	p := startConsoleBoard(t, "--uart", "pty")
	conPath := p.await(conOnRE)
	linkPath := p.await(conLinkRE)
	p.url = p.await(conListenRE)
	con := openTerm(t, conPath)
	link := openTerm(t, linkPath)
	events := openSSE(t, p.url)
	api := p.url + "/api/v1"

	// help names every command with its arguments.
	help := strings.Join(con.ok("help"), "\n")
	for _, want := range []string{"info", "restart [MS]", "wifi ap on|off", "touch on|off", "password set PASSWORD",
		"sites add ORIGIN", "ota update PATH|URL", "ota rollback", "link", "log level", "boot", "power off", "touch down X Y"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if out := con.ok("help wifi"); out[0] != "wifi" || !strings.Contains(strings.Join(out, "\n"), "wifi join SSID [PASSPHRASE]") {
		t.Errorf("help wifi: %q", out)
	}

	// Bad input: one status line each, nothing changes.
	con.fails("fly", "unknown_command")
	con.fails("leds blink", "bad_arguments")
	con.fails("wifi ap maybe", "bad_arguments")
	con.fails("restart 10", "bad_request") // the API's own range check
	con.fails(`wifi join "unterminated`, "bad_arguments")
	con.fails("screen show /nope.mov", "not_found")
	con.fails("scene apply nope", "unknown_scene")
	con.fails("scene end", "not_running")
	con.fails("ota rollback", "no_rollback")
	con.fails("x"+strings.Repeat("y", 2000), "bad_arguments")

	// info, as people and as JSON.
	var info map[string]any
	getJSON(t, api+"/info", &info)
	if out := strings.Join(con.ok("info"), "\n"); !strings.Contains(out, "hostname") || !strings.Contains(out, info["hostname"].(string)) {
		t.Errorf("info:\n%s", out)
	}
	out := con.ok("info --json")
	var js map[string]any
	if len(out) != 1 || json.Unmarshal([]byte(out[0]), &js) != nil || js["id"] != info["id"] {
		t.Errorf("info --json: %q", out)
	}

	// LEDs and screen: the same events as over HTTP.
	from := events.count()
	con.ok("leds rainbow brightness 40")
	events.wait(t, from, "leds", `"mode":"rainbow"`, `"brightness":40`)
	con.ok("screen colour red")
	events.wait(t, from, "screen", `"showing":"colour"`)
	con.ok("screen backlight 30")
	events.wait(t, from, "screen", `"backlight":30`)
	con.ok("screen calibration")
	con.ok("screen off")
	events.wait(t, from, "screen", `"powered":false`)
	if out := con.ok("scene list"); len(out) == 0 {
		t.Error("scene list printed nothing")
	}

	// Wi-Fi and the access point; the BOOT button.
	con.ok("wifi")
	con.ok("wifi scan")
	con.fails("wifi join nowhere", "not_found")
	con.ok("wifi ap on")
	var ni struct {
		AP struct {
			On     bool `json:"on"`
			OffInS *int `json:"off_in_s"`
		} `json:"ap"`
	}
	getJSON(t, api+"/info", &ni)
	if !ni.AP.On || ni.AP.OffInS != nil {
		t.Errorf("after wifi ap on: %+v", ni.AP)
	}
	con.ok("wifi ap off")
	boardtest.WaitFor(t, 30*time.Second, "the access point off", func() bool {
		getJSON(t, api+"/info", &ni)
		return !ni.AP.On
	})
	con.ok("boot")
	getJSON(t, api+"/info", &ni)
	// Five minutes from the press; a loaded machine may take a while to
	// answer, so a minute of slack (the countdown only proves a timed AP).
	if !ni.AP.On || ni.AP.OffInS == nil || *ni.AP.OffInS < 240 || *ni.AP.OffInS > 300 {
		t.Errorf("after boot: %+v", ni.AP)
	}
	con.ok("wifi ap off")

	// Password and trusted sites.
	con.ok("password set s3cret")
	getJSON(t, api+"/info", &info)
	if info["auth"] != true {
		t.Errorf("password set: auth %v", info["auth"])
	}
	req, _ := http.NewRequest("PATCH", api+"/settings", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("change without the password: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	con.ok("sites add https://stage.example") // the console needs no password
	con.fails("sites add https://stage.example", "exists")
	if out := strings.Join(con.ok("sites"), "\n"); !strings.Contains(out, "https://stage.example") {
		t.Errorf("sites: %s", out)
	}
	con.ok("sites remove https://stage.example")
	con.fails("sites remove https://stage.example", "not_found")
	con.ok("password clear")
	getJSON(t, api+"/info", &info)
	if info["auth"] != false {
		t.Errorf("password clear: auth %v", info["auth"])
	}

	// Touch reporting: off by default; on, touches reach SSE and the link.
	link.send(`PATCH /link/events {"kinds":["touch"],"push":true}` + "\n")
	for {
		l, ok := link.line(30 * time.Second)
		if !ok {
			t.Fatal("no reply to PATCH /link/events over the link")
		}
		if strings.HasPrefix(l, "! ") && strings.Contains(l, `"ready"`) {
			continue // the link's start
		}
		if !strings.HasPrefix(l, "200") {
			t.Fatalf("link events: %q", l)
		}
		break
	}
	from = events.count()
	con.ok("touch down 1 1")
	con.ok("touch up 1 1")
	if out := con.ok("touch"); out[0] != "reporting  off" {
		t.Errorf("touch: %q", out)
	}
	con.ok("touch on")
	con.ok("touch down 10 239")
	con.ok("touch up 10 239")
	first := events.wait(t, from, "touch", `"action":"down"`, `"x":10`, `"y":239`)
	events.wait(t, first, "touch", `"action":"up"`)
	if got := events.since(from, "touch"); len(got) != 2 {
		t.Errorf("touch happenings: %q (only those while reporting is on)", got)
	}
	for _, action := range []string{"down", "up"} {
		l, ok := link.line(30 * time.Second)
		if !ok || !strings.HasPrefix(l, "! ") || !strings.Contains(l, `"event":"touch"`) || !strings.Contains(l, `"action":"`+action+`"`) {
			t.Errorf("link event %s: %q", action, l)
		}
	}
	con.ok("touch off")
	con.fails("touch down 240 0", "bad_request")

	// Updates: a file that is no image fails, and the session says console.
	bad := filepath.Join(t.TempDir(), "bad.bin")
	if err := os.WriteFile(bad, bytes.Repeat([]byte{0x42}, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	con.fails("ota update "+bad, "invalid_image")
	var st struct {
		Session struct{ State, Source string } `json:"session"`
	}
	getJSON(t, api+"/ota", &st)
	if st.Session.Source != "console" || st.Session.State != "failed" {
		t.Errorf("session after ota update: %+v", st.Session)
	}
	con.ok("ota cancel")
	con.fails("ota update /nonexistent/fw.bin", "not_found")
	if out := strings.Join(con.ok("ota"), "\n"); !strings.Contains(out, "ota_0") {
		t.Errorf("ota:\n%s", out)
	}

	// Link counters and the log level.
	if out := strings.Join(con.ok("link"), "\n"); !strings.Contains(out, "counters.lines") {
		t.Errorf("link:\n%s", out)
	}
	con.ok("log level debug")
	con.ok("json on")
	if out := con.ok("touch"); out[0] != `{"reporting":false}` {
		t.Errorf("json on: %q", out)
	}
	con.ok("json off")

	// A restart: touch reporting ends with the boot; the console comes
	// back (process mode: a new firmware process, a new pty).
	con.ok("touch on")
	con.ok("restart 200")
	con = openTerm(t, p.await(conOnRE))
	if out := con.ok("touch"); out[0] != "reporting  off" {
		t.Errorf("touch after restart: %q", out)
	}
	con.ok("info")
}

func TestConsolePowerOff(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"process", "direct"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var extra []string
			if mode == "direct" {
				extra = []string{"--bootloader=false"}
			}
			p := startConsoleBoard(t, extra...)
			con := openTerm(t, p.await(conOnRE))
			p.url = p.await(conListenRE)
			// The power goes PowerCutDelay after the board heard the
			// command; whether the console's status line made it out
			// before is the racer, not the promise (a loaded machine can
			// take longer than that to print it). What it printed, if
			// anything, is not an error.
			con.send("power off\r")
			select {
			case <-p.done:
			case <-time.After(time.Minute):
				t.Fatal("still running after power off")
			}
			for {
				l, ok := con.line(0)
				if !ok {
					break
				}
				if conStatusRE.MatchString(l) && l != "ok" {
					t.Errorf("power off: %s", l)
				}
			}
			ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
			killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL
			if !killed && ws.ExitStatus() != 137 {
				t.Errorf("power off: %v, want SIGKILL or exit 137", p.cmd.ProcessState)
			}
			if _, err := http.Get(p.url + "/api/v1/info"); err == nil {
				t.Error("the board still answers after power off")
			}
		})
	}
}

func TestSimInputsHTTP(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	if r := b.Do("POST", "/sim/boot", `{}`); r.Status != 204 {
		t.Fatalf("POST /sim/boot: %d %s", r.Status, r.Body)
	}
	var ni struct {
		AP struct {
			On bool `json:"on"`
		} `json:"ap"`
	}
	b.Do("GET", "/info", nil).JSON(t, &ni)
	if !ni.AP.On {
		t.Error("BOOT did not turn the access point on")
	}
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"action":"down","x":0,"y":239}`, 204, ""},
		{`{"action":"up","x":0,"y":239}`, 204, ""},
		{`{"action":"tap","x":0,"y":0}`, 400, "bad_request"},
		{`{"action":"down","x":240,"y":0}`, 400, "bad_request"},
		{`{"action":"down","x":1}`, 400, "bad_request"},
		{`{"action":"down","x":1,"y":1,"z":1}`, 400, "bad_request"},
		{`[`, 400, "bad_json"},
	} {
		if r := b.Do("POST", "/sim/touch", tc.body); r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Errorf("POST /sim/touch %s: %d %s", tc.body, r.Status, r.Body)
		}
	}
	if r := b.Do("POST", "/sim/touch", `{"action":"down","x":1,"y":1}`, boardtest.Host("evil.example")); r.Status != 403 {
		t.Errorf("sim inputs ignore the Host rule: %d", r.Status)
	}
	if r := b.Do("POST", "/sim/power", `{}`); r.Status != 202 {
		t.Fatalf("POST /sim/power: %d %s", r.Status, r.Body)
	}
	done := make(chan error, 1)
	go func() { done <- b.Cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Errorf("after POST /sim/power: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running after POST /sim/power")
	}
}
