package rollout_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/gateway/rollout"
	"github.com/holofleet/holofleet/store"
)

// Environment of the gateway child process of TestKillAndResume.
const (
	envChildDir  = "ROLLOUT_CHILD_DIR"
	envChildURLs = "ROLLOUT_CHILD_URLS"
	envChildImg  = "ROLLOUT_CHILD_IMAGE"
)

// TestGatewayChild is the gateway of TestKillAndResume: it runs only in
// the child process and until it is killed.
func TestGatewayChild(t *testing.T) {
	dir := os.Getenv(envChildDir)
	if dir == "" {
		t.Skip("runs as the child of TestKillAndResume")
	}
	urls := strings.Split(os.Getenv(envChildURLs), ",")
	g := startGateway(t, dir, urls, nil)
	img, err := os.ReadFile(os.Getenv(envChildImg))
	if err != nil {
		t.Fatal(err)
	}
	a := g.add(t, img)
	if !slices.ContainsFunc(g.eng.List(), func(st rollout.Status) bool { return st.Image.SHA256 == a.SHA256 }) {
		g.waitOnline(t, len(urls))
		if _, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true},
			Waves: []rollout.Wave{{Count: 2}, {Percent: 100}}, MaxInFlight: 3, Bandwidth: 400 << 10, Retries: 5, Backoff: rollout.Duration(50 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println(childReady) // the parent's kill clock starts now
	select {}               // until killed
}

// childReady is the line the child prints once its gateway runs with the
// rollout made (or found).
const childReady = "rollout-child-ready"

// readRollout reads the one rollout and its boards from the file.
func readRollout(t *testing.T, path, sha string) (*rollout.Rollout, []rollout.Board) {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bk := db.Bucket("rollouts")
	keys, err := bk.Keys()
	if err != nil {
		t.Fatal(err)
	}
	var r *rollout.Rollout
	var bs []rollout.Board
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "r/"):
			var x rollout.Rollout
			bk.Get(k, &x)
			if x.Image.SHA256 == sha {
				r = &x
			}
		}
	}
	if r == nil {
		return nil, nil
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "b/"+r.ID+"/") {
			var b rollout.Board
			bk.Get(k, &b)
			bs = append(bs, b)
		}
	}
	return r, bs
}

// TestKillAndResume runs the gateway in a child process, SIGKILLs it at
// random moments and starts it again on the same file until the rollout
// finishes. Every board must then run the new image confirmed, having
// booted it exactly once, with nothing left staged.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	const n = 6
	bs := startBoards(t, n)
	dir := t.TempDir()
	imgPath := filepath.Join(dir, "fw.bin")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	kills, midway := 0, 0
	booted := []string{buildinfo.Version}
	for round := range killRounds {
		version := fmt.Sprintf("%d.0.0", round+2)
		img := testImage(t, version, 200<<10)
		if err := os.WriteFile(imgPath, img, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(img)
		sha := hex.EncodeToString(sum[:])
		var last *rollout.Rollout
		window, lastProgress := minKillWindow, ""
		deadline := time.Now().Add(3 * time.Minute)
		for {
			if time.Now().After(deadline) {
				if last != nil {
					_, boards := readRollout(t, filepath.Join(dir, "gateway.db"), sha)
					for _, b := range boards {
						t.Logf("board %s: %s attempts %d inline %v to %s: %s; timeline %+v", b.Board, b.Phase, b.Attempts, b.Inline, b.ToSlot, b.Error, b.Timeline)
					}
					for _, u := range bs.urls {
						t.Logf("%s: %+v", u, getOTA(t, u))
					}
				}
				t.Fatalf("round %d: rollout not finished after %d kills", round, kills)
			}
			cmd := exec.Command(exe, "-test.run=^TestGatewayChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildURLs+"="+strings.Join(bs.urls, ","), envChildImg+"="+imgPath)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The kill falls at a random moment of the child's work, counted
			// from when its gateway runs (not from the process start, which a
			// loaded machine makes slow). A life that changed nothing doubles
			// the window, so every round finishes however slow the machine.
			waitReady(t, out)
			time.Sleep(time.Duration(rng.Int64N(int64(window)))) // the moment of the kill is the test's subject
			cmd.Process.Kill()
			cmd.Wait()
			kills++
			r, boards := readRollout(t, filepath.Join(dir, "gateway.db"), sha)
			if p := progressOf(r, boards); p == lastProgress {
				window = min(2*window, maxKillWindow)
			} else {
				lastProgress, window = p, minKillWindow
			}
			if r == nil {
				continue
			}
			last = r
			if r.Finished {
				break
			}
			if slices.ContainsFunc(boards, func(b rollout.Board) bool { return b.Phase != rollout.PhasePending }) {
				midway++
			}
		}
		if last.State != rollout.StateDone {
			t.Fatalf("round %d: rollout %s: %s", round, last.State, last.Reason)
		}
		_, boards := readRollout(t, filepath.Join(dir, "gateway.db"), sha)
		for _, b := range boards {
			if b.Phase != rollout.PhaseSucceeded {
				t.Errorf("round %d: board %s: %s (%s)", round, b.Board, b.Phase, b.Error)
			}
		}
		booted = append(booted, version)
		for i, u := range bs.urls {
			if got := bs.bootsOf(i); !slices.Equal(got, booted) {
				t.Errorf("round %d: board %d booted %v, want %v", round, i, got, booted)
			}
			st := getOTA(t, u)
			if st.Session.State == boardapi.SessionStaged {
				t.Errorf("round %d: board %d left staged", round, i)
			}
			for _, s := range st.Slots {
				if s.Running && (s.App == nil || s.App.Version != version || s.State == nil || *s.State != "confirmed") {
					t.Errorf("round %d: board %d runs %+v", round, i, s)
				}
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d rollouts, %d kills, %d of them mid-rollout", killRounds, kills, midway)
}

// killRounds is how many rollouts TestKillAndResume runs one after the
// other, each killed many times.
var killRounds = testlevel.Pick(2, 8)

// The window a kill falls in after the child is ready: from min, doubled
// after each life that changed nothing on file, up to max.
const (
	minKillWindow = 500 * time.Millisecond
	maxKillWindow = 8 * time.Second
)

// waitReady reads the child's output until it says its gateway runs.
func waitReady(t *testing.T, out io.Reader) {
	t.Helper()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == childReady {
				ready <- true
				break
			}
		}
		ready <- false
		_, _ = io.Copy(io.Discard, out) // until the kill closes it
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the gateway child ended before it was ready")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the gateway child not ready after 2 minutes")
	}
}

// progressOf is what a life of the child may change on file: the
// rollout's state and each board's phase and attempts.
func progressOf(r *rollout.Rollout, boards []rollout.Board) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v", r.State, r.Finished)
	for _, x := range boards {
		fmt.Fprintf(&b, "|%s %s %d", x.Board, x.Phase, x.Attempts)
	}
	return b.String()
}

func getOTA(t *testing.T, url string) boardapi.OTAStatus {
	t.Helper()
	resp, err := httpGet(url + "/api/v1/ota")
	if err != nil {
		t.Fatal(err)
	}
	var st boardapi.OTAStatus
	if err := json.Unmarshal(resp, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
