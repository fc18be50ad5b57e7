package cue

import (
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestLive: a list is live (in the middle of a show) while a cue waits to
// fire and between two GOs; not before its first GO, once its standby is
// back on the first cue, or once it ran past its last cue. Live names
// every selector of the list.
func TestLive(t *testing.T) {
	r := newRig(t, Options{ASAP: true}, demoList())
	live := func() (string, []fleet.Selector) {
		t.Helper()
		ls := r.e.Live()
		switch len(ls) {
		case 0:
			return "", nil
		case 1:
			return ls[0].Why, ls[0].Selectors
		}
		t.Fatalf("live %+v", ls)
		return "", nil
	}
	if why, _ := live(); why != "" {
		t.Fatalf("live before any GO: %q", why)
	}
	if _, err := r.e.Go("demo", true); err != nil {
		t.Fatal(err)
	}
	r.fl.next(t)
	waitState(t, r.e, "demo", func(s State) bool { return s.Last != nil && len(s.Running) == 0 })
	why, sels := live()
	if why != "standing by on cue 2 of 3" || len(sels) != 3 || !sels[2].All {
		t.Fatalf("between two GOs: %q %+v", why, sels)
	}
	// Cue 2 fires and cue 3 follows it after 2 s: a cue waits.
	if _, err := r.e.Go("demo", true); err != nil {
		t.Fatal(err)
	}
	r.fl.next(t)
	waitState(t, r.e, "demo", func(s State) bool { return len(s.Running) == 1 && s.Running[0].Cue == "3" })
	if why, _ := live(); !strings.Contains(why, "cue 3 waits to fire") {
		t.Fatalf("during a follow: %q", why)
	}
	if _, err := r.e.Stop("demo"); err != nil {
		t.Fatal(err)
	}
	// Stopped, past the last cue: the show ran to its end.
	if why, _ := live(); why != "" {
		t.Fatalf("past the last cue: %q", why)
	}
	if _, err := r.e.SetStandby("demo", "2"); err != nil {
		t.Fatal(err)
	}
	if why, _ := live(); why == "" {
		t.Fatal("standby on cue 2 after a fire is not live")
	}
	if _, err := r.e.SetStandby("demo", "1"); err != nil {
		t.Fatal(err)
	}
	if why, _ := live(); why != "" {
		t.Fatalf("standby back on the first cue: %q", why)
	}
}
