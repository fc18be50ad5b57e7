package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testbin"
)

// readmeInstallBlock returns the commands of the README's installation
// walk (the sh block under "## The installation as code"), one entry per
// shell command: continued lines joined, a for loop whole, comments cut.
func readmeInstallBlock(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## The installation as code\n")
	if i < 0 {
		t.Fatal("README has no installation section")
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	open := strings.Index(s, "```sh\n")
	if open < 0 {
		t.Fatal("no sh block in the README's installation section")
	}
	s = s[open+len("```sh\n"):]
	s = s[:strings.Index(s, "```")]
	comment := regexp.MustCompile(`\s+#\s.*$`)
	var cmds []string
	cur, depth := "", 0
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimSpace(comment.ReplaceAllString(l, ""))
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "for ") && strings.HasSuffix(l, "; do") {
			depth++
		}
		if l == "done" {
			depth--
		}
		more := strings.HasSuffix(l, "\\")
		cur += strings.TrimSuffix(l, "\\")
		if more || depth > 0 {
			cur += "\n"
			continue
		}
		cmds = append(cmds, cur)
		cur = ""
	}
	return cmds
}

// shell is one sh process the walk's commands run in one after another,
// as a user pastes them into a terminal (a variable set by one is there
// for the next).
type shell struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func newShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	cmd := exec.Command("sh", "-s")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
		w.Close()
	})
	return &shell{in: in, out: bufio.NewReader(r)}
}

// run runs one command and returns its output and exit status.
func (s *shell) run(t *testing.T, c string) (string, int) {
	t.Helper()
	if _, err := fmt.Fprintf(s.in, "{\n%s\n} </dev/null 2>&1\necho \"@@done $?\"\n", c); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		l, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out.String())
		}
		if code, ok := strings.CutPrefix(l, "@@done "); ok {
			var n int
			fmt.Sscan(code, &n)
			return out.String(), n
		}
		out.WriteString(l)
	}
}

// fleetEvents follows the gateway's event stream and keeps the
// scene_started happenings: board -> names started.
type fleetEvents struct {
	mu      sync.Mutex
	started map[string][]string
}

func followEvents(t *testing.T, base string) *fleetEvents {
	t.Helper()
	resp, err := http.Get(base + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ev := &fleetEvents{started: map[string][]string{}}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var e struct {
				Result struct {
					Board string `json:"board"`
					Kind  string `json:"kind"`
					Data  string `json:"data"`
				} `json:"result"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Result.Kind != "scene_started" {
				continue
			}
			var d struct {
				Name string `json:"name"`
			}
			json.Unmarshal([]byte(e.Result.Data), &d)
			ev.mu.Lock()
			ev.started[e.Result.Board] = append(ev.started[e.Result.Board], d.Name)
			ev.mu.Unlock()
		}
	}()
	return ev
}

// reset forgets the scenes seen so far.
func (e *fleetEvents) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = map[string][]string{}
}

// startedOn reports whether every board in ids started scene name.
func (e *fleetEvents) startedOn(ids []string, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		found := false
		for _, n := range e.started[id] {
			found = found || n == name
		}
		if !found {
			return false
		}
	}
	return true
}

// installStatesOf returns each assigned board's state in the gateway's
// installation status (a fresh check).
func installStatesOf(t *testing.T, base string) map[string]string {
	t.Helper()
	code, body := get(t, base+"/v1/installation/status", "")
	var st struct {
		Boards []struct {
			Board string `json:"board"`
			State string `json:"state"`
		} `json:"boards"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("installation status: %d %s", code, body)
	}
	m := map[string]string{}
	for _, b := range st.Boards {
		m[b.Board] = b.State
	}
	return m
}

func countState(m map[string]string, state string) int {
	n := 0
	for _, s := range m {
		if s == state {
			n++
		}
	}
	return n
}

// TestREADMEInstallationWalk runs the README's installation walk, command
// by command as written, against the demo's eight boards: the plan, the
// apply, the intro fired by slot over RS485 and the poster by name over
// REST (each seen starting on its four boards in the fleet's events), a
// file deleted on a board behind the gateway's back reported as drift and
// repaired, the export, every board wiped by hand, and the restore from
// the export. holoctl is the one the README runs (built once, and kept
// between runs by bus/testbin).
func TestREADMEInstallationWalk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the README's walk uses jq")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeInstallBlock(t)
	base, _ := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--mqtt", noBroker)
	// holoctl (kept between runs by bus/testbin) while the demo's boards
	// come up.
	bin := testbin.Build(t, "./cmd/holoctl", false)
	ids := demoBoards(t, base, 8)
	group := map[int][]string{} // the demo puts odd addresses in group 1, even in group 2
	for a, id := range ids {
		group[2-a%2] = append(group[2-a%2], id)
	}
	events := followEvents(t, base)
	work := t.TempDir()
	sh := newShell(t, work, []string{"HOLO_GATEWAY=" + base, "HOLO_TOKEN="})

	// What the walk promises after each of its commands, in its order;
	// every step must be met by a command of the block.
	type step struct {
		match string // the command contains this
		check func(t *testing.T, out string)
	}
	wantAll := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}
	steps := []step{
		{"install plan -f docs/examples/installation.yaml", func(t *testing.T, out string) {
			wantAll(out, "+ file /clips/intro.mov", "+ file /images/poster.jpg", "+ scene intro", "settings.boot_scene")
			// The example's dmx and cuelists sections are the demo's patch
			// and its demo list: nothing to change there.
			wantAll(out, "dmx       in_sync", "cuelists  in_sync")
			if n := strings.Count(out, " drifted "); n != 8 {
				t.Errorf("plan: %d boards drifted, want 8:\n%s", n, out)
			}
		}},
		{"install apply -f docs/examples/installation.yaml -m \"first show\"", func(t *testing.T, out string) {
			wantAll(out, "revision 1", "8/8 boards")
			if st := installStatesOf(t, base); countState(st, "in_sync") != 8 {
				t.Fatalf("after the apply: %v", st)
			}
		}},
		{`scene_apply '{"slot":1}'`, func(t *testing.T, out string) {
			if n := strings.Count(out, " group "); n != 4 {
				t.Errorf("by slot: %d boards reached by a group frame, want 4:\n%s", n, out)
			}
			waitFor(t, "intro started on group 1", 30*time.Second, func() bool { return events.startedOn(group[1], "intro") })
		}},
		{`scene_apply '{"name":"poster"}'`, func(t *testing.T, out string) {
			waitFor(t, "poster started on group 2", 30*time.Second, func() bool { return events.startedOn(group[2], "poster") })
		}},
		{"DELETE '/fs/entry?path=/images/poster.jpg'", func(t *testing.T, out string) {}},
		{"install status", func(t *testing.T, out string) {
			wantAll(out, "+ file /images/poster.jpg")
			if n := strings.Count(out, " drifted "); n != 1 {
				t.Errorf("status: %d boards drifted, want the one broken:\n%s", n, out)
			}
		}},
		{"-m repair", func(t *testing.T, out string) {
			if st := installStatesOf(t, base); countState(st, "in_sync") != 8 {
				t.Fatalf("after the repair: %v", st)
			}
		}},
		{"install export -f backup/installation.yaml", func(t *testing.T, out string) {
			for _, f := range []string{"installation.yaml", "content/intro.mov", "content/poster.jpg", "content/logo.png", "content/sparkle.gif"} {
				if _, err := os.Stat(filepath.Join(work, "backup", f)); err != nil {
					t.Errorf("export: %v", err)
				}
			}
		}},
		{"DELETE /settings", func(t *testing.T, out string) {
			if st := installStatesOf(t, base); countState(st, "drifted") != 8 {
				t.Fatalf("after the wipe: %v, want every board drifted", st)
			}
		}},
		{"install apply -f backup/installation.yaml -m restore", func(t *testing.T, out string) {
			if st := installStatesOf(t, base); countState(st, "in_sync") != 8 {
				t.Fatalf("after the restore: %v", st)
			}
			// The restored boards fire again: the poster by slot 3 on group 2.
			events.reset()
			code, body := post(t, base+"/v1/actions", "application/json",
				[]byte(`{"selector":{"groups":[2]},"kind":"scene_apply","body":{"slot":3}}`))
			if code != 200 {
				t.Fatalf("fire after the restore: %d %s", code, body)
			}
			waitFor(t, "poster started on group 2 after the restore", 30*time.Second, func() bool { return events.startedOn(group[2], "poster") })
		}},
	}
	next := 0
	for _, c := range cmds {
		run := strings.ReplaceAll(c, "go run ./cmd/holoctl", bin)
		run = strings.ReplaceAll(run, "docs/examples/", filepath.Join(root, "docs", "examples")+"/")
		out, code := sh.run(t, run)
		t.Logf("$ %s\n%s", c, out)
		// The wipe's loop ends on a command every board answers; every
		// other command of the walk succeeds.
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", c, code, out)
		}
		if next < len(steps) && strings.Contains(strings.Join(strings.Fields(c), " "), steps[next].match) {
			steps[next].check(t, out)
			next++
		}
	}
	if next != len(steps) {
		t.Fatalf("the README's installation walk lacks the step %q (commands: %q)", steps[next].match, cmds)
	}
}
