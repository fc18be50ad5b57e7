package rollout_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// phases maps every board of the rollout to its phase.
func phases(t *testing.T, g *gateway, id string) map[string]string {
	t.Helper()
	bs, err := g.eng.Boards(id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range bs {
		out[b.Board] = b.Phase
	}
	return out
}

func TestCleanThreeWaves(t *testing.T) {
	bs := startBoards(t, 7)
	g := startGateway(t, t.TempDir(), bs.urls, nil)
	g.waitOnline(t, 7)
	a := g.add(t, testImage(t, "2.0.0", 40000))
	plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, Canaries: []string{bs.ids[3]},
		Waves: []rollout.Wave{{Count: 2}, {Percent: 100}}, MaxInFlight: 2, Soak: rollout.Duration(100 * time.Millisecond)}
	sel, err := g.eng.DryRun(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Waves) != 3 || len(sel.Waves[0]) != 1 || len(sel.Waves[1]) != 2 || len(sel.Waves[2]) != 4 || len(sel.Refused) != 0 {
		t.Fatalf("dry run %+v", sel)
	}
	ctx := context.Background()
	w := g.eng.Watch(ctx, "", 0)
	st, err := g.eng.Create(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.eng.Create(ctx, plan); !errors.Is(err, rollout.ErrPlan) {
		t.Fatalf("second rollout on the same boards: %v", err)
	}
	st = g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	want := map[string]string{}
	for _, id := range bs.ids {
		want[id] = rollout.PhaseSucceeded
	}
	if d := cmp.Diff(phases(t, g, st.ID), want); d != "" {
		t.Fatalf("phases (-got +want):\n%s", d)
	}
	for i := range bs.ids {
		if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version, "2.0.0"}) {
			t.Errorf("board %d booted %v", i, got)
		}
	}
	// Waves ran in order: no board of wave k+1 started before wave k ended.
	var order []int
	waveOf := map[string]int{}
	for wi, ids := range st.Waves {
		for _, id := range ids {
			waveOf[id] = wi
		}
	}
	for ev := range w {
		if ev.Board != "" && ev.Phase == rollout.PhaseStaging {
			order = append(order, waveOf[ev.Board])
		}
		if ev.Board == "" && ev.State == rollout.StateDone {
			break
		}
	}
	if !slices.IsSorted(order) || len(order) != 7 {
		t.Fatalf("staging order by wave %v", order)
	}
	// A second rollout of the same image skips every board.
	st2, err := g.eng.Create(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st2.ID, 30*time.Second, rollout.StateDone)
	for id, ph := range phases(t, g, st2.ID) {
		if ph != rollout.PhaseSkipped {
			t.Errorf("board %s: %s, want skipped", id, ph)
		}
	}
}

func TestBadPlansRefused(t *testing.T) {
	bs := startBoards(t, 2)
	g := startGateway(t, t.TempDir(), bs.urls, nil)
	g.waitOnline(t, 2)
	a := g.add(t, testImage(t, "2.0.0", 1000))
	ok := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}}
	cases := []struct {
		name string
		edit func(*rollout.Plan)
		want error
	}{
		{"empty target", func(p *rollout.Plan) { p.Target = rollout.Target{} }, rollout.ErrPlan},
		{"selects nothing", func(p *rollout.Plan) { p.Target = rollout.Target{Labels: map[string]string{"room": "none"}} }, rollout.ErrPlan},
		{"unknown artifact", func(p *rollout.Plan) { p.Artifact = "00" + a.SHA256[2:] }, rollout.ErrArtifact},
		{"artifact not hex", func(p *rollout.Plan) { p.Artifact = "latest" }, rollout.ErrArtifact},
		{"success above 1", func(p *rollout.Plan) { p.Thresholds.Success = 1.5 }, rollout.ErrPlan},
		{"failure negative", func(p *rollout.Plan) { p.Thresholds.WaveFailure = -0.1 }, rollout.ErrPlan},
		{"bad action", func(p *rollout.Plan) { p.Thresholds.Action = "explode" }, rollout.ErrPlan},
		{"wave both", func(p *rollout.Plan) { p.Waves = []rollout.Wave{{Count: 1, Percent: 10}} }, rollout.ErrPlan},
		{"percent > 100", func(p *rollout.Plan) { p.Waves = []rollout.Wave{{Percent: 120}} }, rollout.ErrPlan},
		{"in flight", func(p *rollout.Plan) { p.MaxInFlight = -1 }, rollout.ErrPlan},
		{"window", func(p *rollout.Plan) { p.Window = &rollout.Window{Start: "25:00", End: "01:00"} }, rollout.ErrPlan},
		{"canary not a target", func(p *rollout.Plan) { p.Target = rollout.Target{Boards: bs.ids[:1]}; p.Canaries = bs.ids[1:] }, rollout.ErrPlan},
		{"pull without https", func(p *rollout.Plan) { p.Method = rollout.MethodPull }, rollout.ErrPlan},
		{"group range", func(p *rollout.Plan) { p.Target = rollout.Target{Groups: []int{0}} }, rollout.ErrPlan},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			_, err := g.eng.Create(context.Background(), p)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			t.Log(err)
		})
	}
	if l := g.eng.List(); len(l) != 0 {
		t.Fatalf("rollouts created: %v", l)
	}
}

func TestFailingTrial(t *testing.T) {
	for _, action := range []string{rollout.ActionPause, rollout.ActionRevert} {
		t.Run(action, func(t *testing.T) {
			bs := startBoards(t, 6, "3.0.0")
			g := startGateway(t, t.TempDir(), bs.urls, nil)
			g.waitOnline(t, 6)
			good := g.add(t, testImage(t, "2.0.0", 3000))
			ctx := context.Background()
			// Half the boards run 2.0.0 first, so revert has something to do.
			st, err := g.eng.Create(ctx, rollout.Plan{Artifact: good.SHA256, Target: rollout.Target{Boards: bs.ids[:3]}, MaxInFlight: 3})
			if err != nil {
				t.Fatal(err)
			}
			g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
			bad := g.add(t, testImage(t, "3.0.0", 3000))
			st, err = g.eng.Create(ctx, rollout.Plan{Artifact: bad.SHA256, Target: rollout.Target{All: true},
				Waves: []rollout.Wave{{Count: 4}, {Count: 2}}, MaxInFlight: 4,
				Thresholds: rollout.Thresholds{WaveFailure: 0.5, MinSample: 2, Action: action}})
			if err != nil {
				t.Fatal(err)
			}
			want := rollout.StatePaused
			if action == rollout.ActionRevert {
				want = rollout.StateReverted
			}
			st = g.waitState(t, st.ID, 90*time.Second, want)
			t.Logf("%s: %s", st.State, st.Reason)
			// Boards in flight when it paused finish their steps.
			var ph map[string]string
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				ph = phases(t, g, st.ID)
				if !slices.ContainsFunc(slices.Collect(maps.Values(ph)), func(p string) bool { return !rollout.Terminal(p) && p != rollout.PhasePending }) {
					break
				}
			}
			rolled := 0
			for _, id := range st.Waves[0] {
				switch ph[id] {
				case rollout.PhaseRolledBack:
					rolled++
				case rollout.PhasePending, rollout.PhaseCancelled:
				default:
					t.Errorf("board %s of wave 1: %s", id, ph[id])
				}
			}
			if rolled < 2 {
				t.Errorf("%d boards rolled back, want at least 2", rolled)
			}
			for _, id := range st.Waves[1] {
				if ph[id] != rollout.PhasePending && ph[id] != rollout.PhaseCancelled {
					t.Errorf("board %s of wave 2 went to %s", id, ph[id])
				}
			}
			for i := range bs.ids {
				if b := bs.bootsOf(i); slices.Contains(b, "3.0.0") && b[len(b)-1] == "3.0.0" {
					t.Errorf("board %d still on the failing image: %v", i, b)
				}
			}
			if action == rollout.ActionRevert {
				if g.eng.Active(bs.ids[5]) != "" {
					t.Error("boards still held by the reverted rollout")
				}
			}
		})
	}
}

func TestOfflineBoards(t *testing.T) {
	bs := startBoards(t, 4)
	// Past the settle period at once: an unreachable board spends retries.
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.Settle = time.Millisecond })
	g.waitOnline(t, 4)
	if err := bs.fm.PowerOff(1); err != nil {
		t.Fatal(err)
	}
	a := g.add(t, testImage(t, "2.0.0", 3000))
	plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true, OnlineOnly: true}}
	deadline := time.Now().Add(20 * time.Second)
	var sel rollout.Selection
	for {
		var err error
		sel, err = g.eng.DryRun(context.Background(), plan)
		if err != nil {
			t.Fatal(err)
		}
		if len(sel.Refused) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(sel.Refused) != 1 || sel.Refused[0].Board != bs.ids[1] || sel.Boards() != 3 {
		t.Fatalf("dry run with online_only: %+v", sel)
	}
	// Without online_only the offline board is tried, retried, and ends
	// unreachable; a board that goes away during the rollout comes back.
	plan.Target.OnlineOnly = false
	plan.Retries, plan.Backoff = 2, rollout.Duration(100*time.Millisecond)
	plan.Thresholds.Success = 0.5
	st, err := g.eng.Create(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	st = g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	ph := phases(t, g, st.ID)
	if ph[bs.ids[1]] != rollout.PhaseUnreachable {
		t.Fatalf("offline board: %s", ph[bs.ids[1]])
	}
	for i, id := range bs.ids {
		if i != 1 && ph[id] != rollout.PhaseSucceeded {
			t.Errorf("board %d: %s", i, ph[id])
		}
	}
}

func TestRevert(t *testing.T) {
	bs := startBoards(t, 3)
	g := startGateway(t, t.TempDir(), bs.urls, nil)
	g.waitOnline(t, 3)
	a := g.add(t, testImage(t, "2.0.0", 3000))
	ctx := context.Background()
	st, err := g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if _, err := g.eng.Pause(ctx, st.ID, ""); !errors.Is(err, rollout.ErrState) {
		t.Fatalf("pause a finished rollout: %v", err)
	}
	if _, err := g.eng.Revert(ctx, st.ID, "test"); err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 60*time.Second, rollout.StateReverted)
	for id, ph := range phases(t, g, st.ID) {
		if ph != rollout.PhaseReverted {
			t.Errorf("board %s: %s", id, ph)
		}
	}
	for i := range bs.ids {
		if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version, "2.0.0", buildinfo.Version}) {
			t.Errorf("board %d booted %v", i, got)
		}
	}
	bds, _ := g.eng.Boards(st.ID)
	var tl []string
	for _, s := range bds[0].Timeline {
		tl = append(tl, s.Phase)
	}
	want := []string{"pending", "staging", "staged", "activating", "restarting", "succeeded", "reverting", "reverting", "reverted"}
	if d := cmp.Diff(tl, want); d != "" {
		t.Errorf("timeline (-got +want):\n%s", d)
	}
}

// TestInFlightAndRestarts: max_in_flight bounds the boards being sent
// the image and activated; a board asked to restart leaves that count,
// and max_restarting, when set, bounds the boards between activation and
// their end. Counted from the rollout's events, which follow the records.
func TestInFlightAndRestarts(t *testing.T) {
	inFlight := map[string]bool{rollout.PhasePending: false, rollout.PhaseStaging: true, rollout.PhaseStaged: true, rollout.PhaseActivating: true}
	restarting := map[string]bool{rollout.PhaseActivating: true, rollout.PhaseRestarting: true}
	for _, tc := range []struct {
		name                 string
		maxInFlight, maxRest int
		inline               bool // the upload carries the activation
	}{
		{"no restart cap", 2, 0, true},
		{"one restart at a time", 3, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 6
			bs := startBoards(t, n)
			g := startGateway(t, t.TempDir(), bs.urls, nil)
			g.waitOnline(t, n)
			a := g.add(t, testImage(t, "2.0.0", 40000))
			ctx := context.Background()
			w := g.eng.Watch(ctx, "", 0)
			st, err := g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true},
				MaxInFlight: tc.maxInFlight, MaxRestarting: tc.maxRest})
			if err != nil {
				t.Fatal(err)
			}
			st = g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
			if st.Progress.Phases[rollout.PhaseSucceeded] != n {
				t.Fatalf("progress %+v", st.Progress)
			}
			phase := map[string]string{}
			maxFlight, maxRest := 0, 0
			count := func(in map[string]bool) int {
				k := 0
				for _, p := range phase {
					if in[p] {
						k++
					}
				}
				return k
			}
			for ev := range w {
				if ev.Board == "" && ev.State == rollout.StateDone {
					break
				}
				if ev.Board == "" {
					continue
				}
				phase[ev.Board] = ev.Phase
				maxFlight = max(maxFlight, count(inFlight))
				maxRest = max(maxRest, count(restarting))
			}
			if maxFlight > tc.maxInFlight {
				t.Errorf("%d boards in flight at once, max_in_flight %d", maxFlight, tc.maxInFlight)
			}
			if tc.maxRest > 0 && maxRest > tc.maxRest {
				t.Errorf("%d boards activating or restarting at once, max_restarting %d", maxRest, tc.maxRest)
			}
			boards, err := g.eng.Boards(st.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range boards {
				inline := slices.ContainsFunc(b.Timeline, func(s rollout.Step) bool { return s.Note == "activated with the upload" })
				if inline != tc.inline || b.Inline != tc.inline {
					t.Errorf("board %s: activated with the upload %v, want %v; timeline %+v", b.Board, inline, tc.inline, b.Timeline)
				}
				if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version, "2.0.0"}) {
					t.Errorf("board %d booted %v", i, got)
				}
			}
		})
	}
}
