package rollout_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/metricname"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// waitBoard waits (in real time) until board id's row satisfies ok.
func waitBoard(t *testing.T, g *gateway, rid, id string, what string, ok func(rollout.Board) bool) rollout.Board {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b := boardRows(t, g, rid)[id]
		if ok(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("board %s: %s %q, waiting for %s", id, b.Phase, b.Waiting, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func boardPost(t *testing.T, url, path, body string) {
	t.Helper()
	resp, err := http.Post(url+"/api/v1"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
}

// TestStrictWindowOpens: a strict window on Tuesdays 01:00-03:00 in
// Europe/Paris. Created on Monday evening, the rollout starts no board
// (nothing is sent, every board stays pending) and its status names the
// next opening; once the fake clock passes Tuesday 01:00 Paris time every
// board is updated.
func TestStrictWindowOpens(t *testing.T) {
	const n = 2
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	monday := time.Date(2026, 3, 9, 22, 0, 0, 0, paris)
	fake := clock.NewFake(monday)
	bs := startBoards(t, n)
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.Clock, o.Kick = fake, time.Hour })
	g.waitOnline(t, n)
	a := g.add(t, testImage(t, "2.0.0", 30000))
	win := &rollout.Window{Start: "01:00", End: "03:00", Days: []string{"tue"}, TimeZone: "Europe/Paris", Strict: true}
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true},
		MaxInFlight: n, Window: win, Timeouts: rollout.Timeouts{Restart: rollout.Duration(time.Hour), Confirm: rollout.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	opens := time.Date(2026, 3, 10, 1, 0, 0, 0, paris)
	if st.WindowOpen || st.NextWindow == nil || !st.NextWindow.Equal(opens) {
		t.Fatalf("window open=%v next=%v, want closed until %v", st.WindowOpen, st.NextWindow, opens)
	}
	// Real time for a wrong start to show, the fake clock moving on
	// towards the opening.
	for range 5 {
		fake.Advance(time.Minute)
		time.Sleep(60 * time.Millisecond)
	}
	fake.Set(opens.Add(-time.Minute))
	time.Sleep(100 * time.Millisecond)
	for id, p := range phases(t, g, st.ID) {
		if p != rollout.PhasePending {
			t.Fatalf("board %s is %s outside a strict window", id, p)
		}
	}
	// The metric an alert reads to tell a planned wait from a stall.
	if v := windowOpenGauge(t, g.eng, st.ID); v != 0 {
		t.Errorf("%s = %v before the window opens, want 0", metricname.GatewayRolloutWindowOpen, v)
	}
	for i := range bs.urls {
		if b, _ := httpGet(bs.urls[i] + "/api/v1/ota/image"); !strings.Contains(string(b), `"idle"`) {
			t.Fatalf("board %d got an image outside the window: %s", i, b)
		}
	}
	// The fake time now runs across the opening, 100 ms every 5 ms.
	fake.Set(opens.Add(-2 * time.Second))
	defer fake.Run(100 * time.Millisecond)()
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if v := windowOpenGauge(t, g.eng, st.ID); v != 1 {
		t.Errorf("%s = %v in the window, want 1", metricname.GatewayRolloutWindowOpen, v)
	}
	for _, b := range boardRows(t, g, st.ID) {
		if b.Phase != rollout.PhaseSucceeded {
			t.Fatalf("board %s %s %s", b.Board, b.Phase, b.Error)
		}
		if started := b.Timeline[1].Time; started.Before(opens) {
			t.Errorf("board %s started at %v, before the window opened at %v", b.Board, started, opens)
		}
	}
}

// TestSceneHoldsBoard: a board playing a scene to its end waits, the dry
// run names it, the rollout says what it waits for, and it is updated once
// the scene ends; the other board does not wait for it.
func TestSceneHoldsBoard(t *testing.T) {
	bs := startBoards(t, 2)
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.Recheck = 50 * time.Millisecond })
	g.waitOnline(t, 2)
	boardPost(t, bs.urls[0], "/scenes/apply", `{"scene": {"then": "off", "duration_s": 3600}}`)
	a := g.add(t, testImage(t, "2.0.0", 30000))
	plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, MaxInFlight: 2}
	sel, err := g.eng.DryRun(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Waiting) != 1 || sel.Waiting[0].Board != bs.ids[0] || !strings.Contains(sel.Waiting[0].Reason, "scene") {
		t.Fatalf("dry run waiting %+v", sel.Waiting)
	}
	st, err := g.eng.Create(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	waitBoard(t, g, st.ID, bs.ids[1], "succeeded", func(b rollout.Board) bool { return b.Phase == rollout.PhaseSucceeded })
	held := waitBoard(t, g, st.ID, bs.ids[0], "waiting for the scene", func(b rollout.Board) bool { return b.Waiting != "" })
	if held.Phase != rollout.PhasePending || !strings.Contains(held.Waiting, "scene") {
		t.Fatalf("held board %s %q", held.Phase, held.Waiting)
	}
	if s, _ := g.eng.Get(st.ID); s.Progress.Waiting != 1 || s.Progress.Failed != 0 {
		t.Fatalf("progress %+v", s.Progress)
	}
	if got := bs.bootsOf(0); !slices.Equal(got, []string{buildinfo.Version}) {
		t.Fatalf("the board playing a scene booted %v", got)
	}
	boardPost(t, bs.urls[0], "/scenes/end", "")
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if p := phases(t, g, st.ID); p[bs.ids[0]] != rollout.PhaseSucceeded {
		t.Fatalf("phases %v", p)
	}
}

// guard is a ShowGuard a test drives (gateway/cue and gateway/dmx plug
// in the same way).
type guard struct {
	mu   sync.Mutex
	busy map[string]string
}

func (g *guard) Busy(_ context.Context, id string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy[id]
}

func (g *guard) set(id, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy[id] = why
}

// TestShowGuardAndLabel: a board a ShowGuard calls busy waits until the
// guard lets it go; a board labelled show=live waits until the label goes.
func TestShowGuardAndLabel(t *testing.T) {
	bs := startBoards(t, 2)
	gd := &guard{busy: map[string]string{}}
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) {
		o.Recheck = 50 * time.Millisecond
		o.ShowGuards = []rollout.ShowGuard{gd}
	})
	g.waitOnline(t, 2)
	gd.set(bs.ids[0], "cue list intro is running on it")
	if _, err := g.fleet.SetLabels(bs.ids[1], map[string]string{"show": "live"}); err != nil {
		t.Fatal(err)
	}
	a := g.add(t, testImage(t, "2.0.0", 30000))
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitBoard(t, g, st.ID, bs.ids[0], "the cue guard", func(b rollout.Board) bool { return strings.Contains(b.Waiting, "cue list") })
	waitBoard(t, g, st.ID, bs.ids[1], "the label", func(b rollout.Board) bool { return strings.Contains(b.Waiting, "show=live") })
	gd.set(bs.ids[0], "")
	waitBoard(t, g, st.ID, bs.ids[0], "succeeded", func(b rollout.Board) bool { return b.Phase == rollout.PhaseSucceeded })
	if b := boardRows(t, g, st.ID)[bs.ids[1]]; b.Phase != rollout.PhasePending {
		t.Fatalf("labelled board is %s", b.Phase)
	}
	if _, err := g.fleet.SetLabels(bs.ids[1], map[string]string{}); err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
}

// TestHealthConditions: a board below the plan's free-memory floor waits
// (dry run and rollout say why) and, with skip, is skipped; neither counts
// as a failure.
func TestHealthConditions(t *testing.T) {
	bs := startBoards(t, 1)
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.Recheck = 50 * time.Millisecond })
	g.waitOnline(t, 1)
	a := g.add(t, testImage(t, "2.0.0", 30000))
	health := &rollout.Health{MinHeapFree: 1 << 50, ClockSynced: false}
	plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, Health: health}
	sel, err := g.eng.DryRun(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Waiting) != 1 || !strings.Contains(sel.Waiting[0].Reason, "bytes free") {
		t.Fatalf("dry run %+v", sel)
	}
	st, err := g.eng.Create(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	waitBoard(t, g, st.ID, bs.ids[0], "waiting on health", func(b rollout.Board) bool { return strings.HasPrefix(b.Waiting, "health:") })
	if _, err := g.eng.Abort(context.Background(), st.ID, "test"); err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 30*time.Second, rollout.StateAborted)

	skip := *health
	skip.Skip = true
	plan.Health = &skip
	sel, err = g.eng.DryRun(context.Background(), plan)
	if err != nil || len(sel.Skipped) != 1 || len(sel.Waiting) != 0 {
		t.Fatalf("dry run with skip %+v %v", sel, err)
	}
	st, err = g.eng.Create(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	done := g.waitState(t, st.ID, 30*time.Second, rollout.StateDone)
	if b := boardRows(t, g, st.ID)[bs.ids[0]]; b.Phase != rollout.PhaseSkipped || done.Progress.Failed != 0 {
		t.Fatalf("board %s, progress %+v", b.Phase, done.Progress)
	}
}

// windowOpenGauge is the engine's holo_gateway_rollout_window_open for
// rollout id.
func windowOpenGauge(t *testing.T, eng *rollout.Engine, id string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(eng.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != metricname.GatewayRolloutWindowOpen {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rollout" && l.GetValue() == id {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for rollout %s", metricname.GatewayRolloutWindowOpen, id)
	return 0
}
