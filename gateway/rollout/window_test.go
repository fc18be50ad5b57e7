package rollout_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// waitPhases waits (in real time) until every board of the rollout is in
// phase.
func waitPhases(t *testing.T, g *gateway, id, phase string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ph := phases(t, g, id)
		all := len(ph) > 0
		for _, p := range ph {
			all = all && p == phase
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("phases %v, want all %s", ph, phase)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMaintenanceWindow drives the engine with a fake clock through a
// window that spans midnight (22:00-02:00 UTC): created at 02:00, when
// the window has just closed, the rollout stages every image at once and
// activates none; at 21:59:30 nothing has moved yet; once the clock
// passes 22:00 every board is activated and updated. The boards run on
// real time. TestWindowOpen covers the hours after midnight.
func TestMaintenanceWindow(t *testing.T) {
	const n = 3
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(day.Add(2 * time.Hour))
	bs := startBoards(t, n)
	// Kick is long in fake time: the fake clock runs faster than the
	// boards restart, and a second restart during a trial would roll
	// the image back.
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.Clock, o.Kick = fake, time.Hour })
	g.waitOnline(t, n)
	a := g.add(t, testImage(t, "2.0.0", 30000))
	win := &rollout.Window{Start: "22:00", End: "02:00"}
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true},
		MaxInFlight: n, Window: win, Timeouts: rollout.Timeouts{Restart: rollout.Duration(time.Hour), Confirm: rollout.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	waitPhases(t, g, st.ID, rollout.PhaseStaged, 30*time.Second)

	still := func(when string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // real time for a wrong activation to show
		for id, ph := range phases(t, g, st.ID) {
			if ph != rollout.PhaseStaged {
				t.Fatalf("%s: board %s is %s, want staged", when, id, ph)
			}
		}
		for i := range n {
			if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version}) {
				t.Fatalf("%s: board %d booted %v", when, i, got)
			}
		}
	}
	still("02:00, the window just closed")
	fake.Set(day.Add(21*time.Hour + 59*time.Minute + 30*time.Second))
	still("21:59:30, before the window")

	// The fake time now runs, 100 ms every 5 ms of real time, across
	// 22:00 (a jump over the opening would have the engine act in the
	// middle of it, as a gateway whose clock leaps).
	opens := day.Add(22 * time.Hour)
	fake.Set(opens.Add(-2 * time.Second))
	defer fake.Run(100 * time.Millisecond)()
	st = g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if st.Progress.Phases[rollout.PhaseSucceeded] != n {
		t.Fatalf("progress %+v", st.Progress)
	}
	for i := range n {
		if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version, "2.0.0"}) {
			t.Errorf("board %d booted %v", i, got)
		}
	}
	boards, err := g.eng.Boards(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range boards {
		var staged, activating time.Time
		for _, s := range b.Timeline {
			switch {
			case s.Phase == rollout.PhaseStaged && staged.IsZero():
				staged = s.Time
			case s.Phase == rollout.PhaseActivating && activating.IsZero():
				activating = s.Time
			}
		}
		if staged.IsZero() || staged.After(day.Add(2*time.Hour)) {
			t.Errorf("board %s staged at %v, want at 02:00 (outside the window)", b.Board, staged)
		}
		if activating.Before(opens) || !win.Open(activating) {
			t.Errorf("board %s activated at %v, want inside the window from %v", b.Board, activating, opens)
		}
	}
}
