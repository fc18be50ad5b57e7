package installation_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/installation"
)

// backlightDesc gives every board of r the backlight, one board at a
// time (max_in_flight 1), settings only.
func backlightDesc(t *testing.T, r *rig, backlight int) *installation.Description {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nname: race\nprofiles:\n  show:\n    settings: {screen: {backlight: %d}}\nassignments:\n", backlight)
	for _, bd := range r.boards {
		fmt.Fprintf(&b, "  - {profile: show, board: %q}\n", bd.ID)
	}
	b.WriteString("rollout: {max_in_flight: 1}\n")
	return r.parse(t, b.String())
}

// TestFollowLateWordOfOlderRevision forces the interleaving two gateways
// applying at the same moment can produce: gateway A makes revision 2
// current, gateway B (this one) numbers its apply after it (3) and
// starts its run, and only then hears from the watch that 2 became
// current, then that 3 did. B must treat 2 as done with: its run of 3
// goes on and every board ends at revision 3. (Before the fix B aborted
// its own run of 3 for the older 2, the boards the run had not started
// were cancelled, and when the watch told of 3 B took its aborted run
// for done: those boards stayed on the older settings.)
func TestFollowLateWordOfOlderRevision(t *testing.T) {
	sh := newMemShared("gw2")
	gate := make(chan struct{})
	var mu sync.Mutex
	hold, held := false, ""
	r := startRig(t, 2, nil, func(o *installation.Options) {
		o.Shared = sh
		o.Step = func(board, step, what string) {
			mu.Lock()
			h := hold
			if h {
				hold, held = false, board
			}
			mu.Unlock()
			if h {
				<-gate
			}
		}
	})
	ctx := context.Background()
	first, _ := r.apply(t, backlightDesc(t, r, 41), "first")
	sh.watch <- first.N

	// Gateway A's revision 2 (backlight 50) is current; B has not heard.
	d2 := backlightDesc(t, r, 50)
	sh.store(installation.Revision{N: first.N + 1, Who: "gw1", When: time.Now().UTC(), Message: "gw1's", Description: d2.JSON()})

	// B applies backlight 50 as revision 3; its first board is held in
	// its first step, the other waits (one in flight).
	mu.Lock()
	hold = true
	mu.Unlock()
	rev, st, err := r.in.Apply(ctx, backlightDesc(t, r, 50), "test", "gw2's")
	if err != nil {
		t.Fatal(err)
	}
	if rev.N != first.N+2 {
		t.Fatalf("apply: revision %d, want %d", rev.N, first.N+2)
	}
	waitFor(t, 10*time.Second, "a board of the run held", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return held != ""
	})
	// The watch tells of 2, then of 3: the second send returns once the
	// follower has dealt with the first.
	sh.watch <- first.N + 1
	sh.watch <- rev.N
	close(gate)

	end := r.waitRun(t, st.ID)
	if end.State != installation.RunDone || end.Phases[installation.PhaseInSync] != len(r.boards) {
		t.Fatalf("run of revision %d: %s (%s), phases %v; want done with every board in sync", rev.N, end.State, end.Reason, end.Phases)
	}
	for _, bp := range r.in.Plan(ctx, backlightDesc(t, r, 50)) {
		if bp.State != installation.StateInSync {
			t.Errorf("board %s: %s (%s) after the run of revision %d", bp.Board, bp.State, bp.Summary, rev.N)
		}
	}
	for _, b := range r.boards {
		var s struct {
			Screen struct {
				Backlight int `json:"backlight"`
			} `json:"screen"`
		}
		get(t, b.URL, "/settings", &s)
		if s.Screen.Backlight != 50 {
			t.Errorf("board %s: backlight %d, want 50", b.ID, s.Screen.Backlight)
		}
	}
	if n, _ := r.in.Findings(); n != rev.N {
		t.Fatalf("the drift watcher checks against revision %d, want %d", n, rev.N)
	}
}

// TestSectionsPutBackWhenRevisionTaken: in a cluster the gateway's own
// sections (the DMX patch, the cue lists) are set before the revision is
// stored by compare-and-set on its number; when another gateway took the
// number meanwhile, the apply is refused and the patch and the lists are
// put back as they were, nothing audited. The next apply stores and
// audits them.
func TestSectionsPutBackWhenRevisionTaken(t *testing.T) {
	sh := newMemShared("gw2")
	r := startSectionRig(t, nil, true, func(o *installation.Options) { o.Shared = sh })
	id := r.boards[0].ID
	keep := cue.List{Name: "keep", Cues: []cue.Cue{{Number: "1", Actions: []cue.Action{{Kind: "scene_end", Selector: fleetAll()}}}}}
	if _, err := r.cues.Put(keep); err != nil {
		t.Fatal(err)
	}
	d := r.parse(t, fmt.Sprintf(sectionsDesc, id, id))
	// Another gateway stores the same number between this one's look at
	// the latest revision and its compare-and-set.
	sh.creating = func(rv installation.Revision) error {
		sh.creating = nil
		sh.revs[rv.N] = installation.Revision{N: rv.N, Who: "gw1", When: time.Now().UTC(), Description: rv.Description}
		return nil
	}
	_, _, err := r.in.Apply(context.Background(), d, "test", "")
	if !errors.Is(err, installation.ErrRevisionTaken) {
		t.Fatalf("apply: %v, want ErrRevisionTaken", err)
	}
	if p := r.dmx.Patch(); len(p.Fixtures) != 0 || len(p.Universes) != 0 {
		t.Fatalf("patch not put back: %+v", p)
	}
	if got := listNames(r.cues.Lists()); !cmp.Equal(got, []string{"keep"}) {
		t.Fatalf("lists %v, want the old ones put back", got)
	}
	if a := r.audit.sections(); len(a) != 0 {
		t.Fatalf("audited a change that was put back: %v", a)
	}
	rev, st := r.apply(t, d, "again")
	if st.State != installation.RunDone {
		t.Fatalf("run %+v", st)
	}
	if diff := cmp.Diff(d.DMX.Patch, r.dmx.Patch()); diff != "" {
		t.Fatalf("live patch (-want +got):\n%s", diff)
	}
	if got := listNames(r.cues.Lists()); !cmp.Equal(got, []string{"demo"}) {
		t.Fatalf("lists %v after the stored apply", got)
	}
	want := []string{
		fmt.Sprintf("test dmx revision %d: dmx patch: 3 patch entries to add", rev.N),
		fmt.Sprintf("test cues revision %d: cue lists: 1 cue list to add, 1 cue list to remove", rev.N),
	}
	if diff := cmp.Diff(want, r.audit.sections()); diff != "" {
		t.Fatalf("audit (-want +got):\n%s", diff)
	}
}
