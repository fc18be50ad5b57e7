package installation_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/installation"
)

// twoGroups is the demo's shape: boards in group 1 show a clip, boards in
// group 2 an image; each profile has two scenes with slots and a boot
// scene.
const twoGroups = `
version: 1
name: test
prune: %PRUNE%
content:
  clip: {file: $MEDIA/clip-240-30fps.mov}
  image: {file: $MEDIA/image-240.png}
  other: {file: $MEDIA/image-baseline.jpg}
profiles:
  left:
    files:
      /clips/intro.mov: clip
      /images/logo.png: %LOGO%
    scenes:
      intro: {slot: 1, screen: {path: /clips/intro.mov, loop: true}, leds: {mode: solid, colour: "#ff8800", brightness: 20}}
      logo: {slot: 2, screen: {path: /images/logo.png}}
    settings:
      boot_scene: logo
      screen: {backlight: 70}
      leds: {brightness: 25}
  right:
    files:
      /images/logo.png: image
    scenes:
      logo: {slot: 2, screen: {path: /images/logo.png}, then: stay}
    settings:
      boot_scene: logo
assignments:
  - {profile: left, labels: {side: left}}
  - {profile: right, labels: {side: right}}
rollout: {max_in_flight: 2}
`

func desc(prune bool, logo string) string {
	s := strings.ReplaceAll(twoGroups, "%LOGO%", logo)
	if prune {
		return strings.ReplaceAll(s, "%PRUNE%", "true")
	}
	return strings.ReplaceAll(s, "%PRUNE%", "false")
}

// label gives even boards the left side, odd ones the right.
func (r *rig) label(t *testing.T) {
	t.Helper()
	for i, b := range r.boards {
		side := "left"
		if i%2 == 1 {
			side = "right"
		}
		if _, err := r.fleet.SetLabels(b.ID, map[string]string{"side": side}); err != nil {
			t.Fatal(err)
		}
	}
}

// settle waits until a plan of d finds every board in sync, which holds
// once the boards' event streams have reported what the apply saved.
func (r *rig) settle(t *testing.T, d *installation.Description) {
	t.Helper()
	waitFor(t, 20*time.Second, "every board in sync", func() bool {
		for _, bp := range r.in.Plan(context.Background(), d) {
			if bp.State != installation.StateInSync || bp.Diff.Requests > 2 {
				return false
			}
		}
		return true
	})
}

func TestApplyReapplyChangePruneRollback(t *testing.T) {
	r := startRig(t, 4, nil, nil)
	r.label(t)
	ctx := context.Background()
	d1 := r.parse(t, desc(false, "image"))

	// The plan of an empty fleet: every file added, every scene saved.
	plans := r.in.Plan(ctx, d1)
	if len(plans) != 4 {
		t.Fatalf("plan covers %d boards, want 4: %+v", len(plans), plans)
	}
	for _, bp := range plans {
		if bp.State != installation.StateDrifted {
			t.Fatalf("board %s: %s (%s), want drifted", bp.Board, bp.State, bp.Summary)
		}
		want := 1
		if bp.Profile == "left" {
			want = 2
		}
		if got := len(bp.Diff.Files); got != want {
			t.Errorf("board %s (%s): %d file changes, want %d: %+v", bp.Board, bp.Profile, got, want, bp.Diff.Files)
		}
	}

	rev, st := r.apply(t, d1, "first")
	if rev.N != 1 || st.State != installation.RunDone || st.Phases[installation.PhaseInSync] != 4 {
		bs, _ := r.in.RunBoards(st.ID)
		t.Fatalf("revision %d run %+v boards %+v", rev.N, st, bs)
	}
	for _, b := range r.boards {
		checkNoDanglingScene(t, b.URL)
		var s struct {
			BootScene *string `json:"boot_scene"`
		}
		get(t, b.URL, "/settings", &s)
		if s.BootScene == nil || *s.BootScene != "logo" {
			t.Errorf("board %s: boot_scene %v, want logo", b.ID, s.BootScene)
		}
	}

	// Re-apply with nothing changed: at most two requests per board.
	r.settle(t, d1)
	r.count.reset()
	_, st = r.apply(t, d1, "again")
	if st.Phases[installation.PhaseInSync] != 4 {
		t.Fatalf("re-apply: %+v", st)
	}
	for _, b := range r.boards {
		t.Logf("re-apply with no change: board %s: %d requests", b.ID, r.count.of(b.URL))
		if n := r.count.of(b.URL); n > 2 {
			t.Errorf("re-apply with no change sent %d requests to board %s, want at most 2", n, b.ID)
		}
	}
	bs, _ := r.in.RunBoards(st.ID)
	for _, b := range bs {
		if b.Summary != "in sync" {
			t.Errorf("re-apply: board %s: %q", b.Board, b.Summary)
		}
	}

	// Change one file of the left profile: only that file is replaced.
	d2 := r.parse(t, desc(false, "other"))
	for _, bp := range r.in.Plan(ctx, d2) {
		if bp.Profile == "right" {
			if bp.State != installation.StateInSync {
				t.Errorf("right board %s: %s", bp.Board, bp.Summary)
			}
			continue
		}
		if len(bp.Diff.Files) != 1 || bp.Diff.Files[0].Op != installation.OpReplace || bp.Diff.Files[0].Path != "/images/logo.png" {
			t.Errorf("left board %s: files %+v, want one replace of /images/logo.png", bp.Board, bp.Diff.Files)
		}
		if len(bp.Diff.Scenes) != 0 || len(bp.Diff.Settings) != 0 {
			t.Errorf("left board %s: scenes %+v settings %+v, want none", bp.Board, bp.Diff.Scenes, bp.Diff.Settings)
		}
	}
	_, st = r.apply(t, d2, "new logo")
	if st.Phases[installation.PhaseInSync] != 4 {
		t.Fatalf("change: %+v", st)
	}
	r.settle(t, d2)

	// A file put on a board by hand; prune removes it, and so the left
	// profile's clip when the profile drops it.
	left := r.boards[0] // index 0 is in group 1
	d3text := strings.Replace(desc(true, "other"), "      /clips/intro.mov: clip\n", "", 1)
	d3text = strings.Replace(d3text, `      intro: {slot: 1, screen: {path: /clips/intro.mov, loop: true}, leds: {mode: solid, colour: "#ff8800", brightness: 20}}`+"\n", "", 1)
	d3 := r.parse(t, d3text)
	_, st = r.apply(t, d3, "prune the clip")
	if st.Phases[installation.PhaseInSync] != 4 {
		bs, _ := r.in.RunBoards(st.ID)
		t.Fatalf("prune: %+v %+v", st, bs)
	}
	if code := get(t, left.URL, "/fs/entry?path=/clips/intro.mov", nil); code != 404 {
		t.Errorf("prune: the clip is still on board %s (%d)", left.ID, code)
	}
	for _, s := range scenesOf(t, left.URL) {
		if s.Name == "intro" {
			t.Errorf("prune: scene intro still saved on %s", left.ID)
		}
	}
	checkNoDanglingScene(t, left.URL)

	// Rollback to revision 1: the clip, its scene and the first logo.
	hist, err := r.in.History()
	if err != nil || len(hist) != 4 {
		t.Fatalf("history: %d revisions, %v", len(hist), err)
	}
	rb, st, err := r.in.Rollback(ctx, 1, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	st = r.waitRun(t, st.ID)
	if rb.N != 5 || rb.RollbackOf != 1 || st.Phases[installation.PhaseInSync] != 4 {
		t.Fatalf("rollback: revision %+v run %+v", rb, st)
	}
	r.settle(t, d1)
	if code := get(t, left.URL, "/fs/entry?path=/clips/intro.mov", nil); code != 200 {
		t.Errorf("rollback: the clip is not back on %s", left.ID)
	}

	// A file deleted by hand: the board is reported drifted, with how.
	del(t, left.URL, "/fs/entry?path=/clips/intro.mov")
	// A scene naming the file stays; drifted until the next apply.
	var found bool
	for _, bp := range r.in.Plan(ctx, d1) {
		if bp.Board != left.ID {
			continue
		}
		found = true
		if bp.State != installation.StateDrifted || len(bp.Diff.Files) != 1 || bp.Diff.Files[0].Op != installation.OpAdd {
			t.Errorf("after a hand delete: %s %+v", bp.State, bp.Diff)
		}
	}
	if !found {
		t.Fatal("board missing from the plan")
	}
}

func TestCutOffMidApplyThenFinish(t *testing.T) {
	var cut atomic.Bool
	var r *rig
	r = startRig(t, 1, nil, func(o *installation.Options) {
		o.Step = func(board, step, what string) {
			// The board loses power after its first file landed, before
			// the second is sent.
			if step == installation.StepUpload && what == "/images/logo.png" && cut.CompareAndSwap(false, true) {
				if err := r.fm.PowerOff(0); err != nil {
					t.Error(err)
				}
			}
		}
	})
	r.label(t)
	b := r.boards[0]
	d := r.parse(t, desc(false, "image"))
	_, st := r.apply(t, d, "cut off")
	if st.Phases[installation.PhaseInSync] != 0 {
		t.Fatalf("a board cut off mid-apply is reported in sync: %+v", st)
	}
	bs, _ := r.in.RunBoards(st.ID)
	if len(bs) != 1 || (bs[0].Phase != installation.PhaseUnreachable && bs[0].Phase != installation.PhaseFailed) {
		t.Fatalf("boards: %+v", bs)
	}
	if err := r.fm.PowerOn(0); err != nil {
		t.Fatal(err)
	}
	r.waitOnline(t, 1)
	// The first file is there, the second not, and no scene was saved.
	if code := get(t, b.URL, "/fs/entry?path=/clips/intro.mov", nil); code != 200 {
		t.Errorf("the first file did not land (%d)", code)
	}
	if code := get(t, b.URL, "/fs/entry?path=/images/logo.png", nil); code != 404 {
		t.Errorf("the second file is there (%d) though the board was off", code)
	}
	if n := len(scenesOf(t, b.URL)); n != 0 {
		t.Errorf("%d scenes saved before their files were in place", n)
	}
	checkNoDanglingScene(t, b.URL)
	// The next apply finishes the job, sending only what is missing.
	r.count.reset()
	_, st = r.apply(t, d, "again")
	if st.Phases[installation.PhaseInSync] != 1 {
		bs, _ := r.in.RunBoards(st.ID)
		t.Fatalf("second apply: %+v %+v", st, bs)
	}
	bs, _ = r.in.RunBoards(st.ID)
	t.Logf("second apply: %s, %d requests", bs[0].Summary, bs[0].Requests)
	if !strings.Contains(bs[0].Summary, "1 file to add") {
		t.Errorf("second apply did %q, want only the missing file added", bs[0].Summary)
	}
	checkNoDanglingScene(t, b.URL)
	if n := len(scenesOf(t, b.URL)); n != 2 {
		t.Errorf("%d scenes after the second apply, want 2", n)
	}
}
