package installation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation/boardstate"
	"github.com/holofleet/holofleet/gateway/metricname"
)

// EventSource is the fleet's event stream (*fleet.Fleet has one). With
// it the installer checks a board as soon as something may have changed
// it; without it only on the period.
type EventSource interface {
	Watch(ctx context.Context, f fleet.Filter, after uint64) *fleet.Watcher
}

// Defaults of the drift watcher.
const (
	DefaultCheckEvery = time.Minute
	DefaultSettle     = 500 * time.Millisecond
	DefaultHealRetry  = 30 * time.Second
)

// Drift is what the watcher last found on a board: its plan state, and
// when it was checked.
type Drift struct {
	BoardPlan
	Checked time.Time `json:"checked"`
	// Healed counts the heals of the board by this process.
	Healed int `json:"healed,omitempty"`
}

// watcher keeps every assigned board's drift state. Guarded by mu.
type watcher struct {
	mu      sync.Mutex
	due     map[string]time.Time // board -> when to check it
	running map[string]bool      // checks in progress
	last    map[string]Drift
	nextTry map[string]time.Time // a failed heal is not tried again before
	heals   uint64
	wake    chan struct{}
}

func (w *watcher) init() {
	w.due, w.running, w.last, w.nextTry = map[string]time.Time{}, map[string]bool{}, map[string]Drift{}, map[string]time.Time{}
	w.wake = make(chan struct{}, 1)
}

func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// schedule marks board to be checked at t (an earlier mark stays).
func (w *watcher) schedule(board string, t time.Time) {
	w.mu.Lock()
	if cur, ok := w.due[board]; !ok || t.Before(cur) {
		w.due[board] = t
	}
	w.mu.Unlock()
	w.poke()
}

// Drifts returns the watcher's last finding on every board it checked,
// by board id.
func (in *Installer) Drifts() map[string]Drift {
	w := &in.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.last)
}

// Findings is Drifts with the revision the boards were checked against
// (0 before any is applied): what the MQTT bridge's installation sensor
// shows.
func (in *Installer) Findings() (int, map[string]Drift) {
	rev := 0
	if r, _, err := in.currentCached(); err == nil {
		rev = r.N
	}
	return rev, in.Drifts()
}

// CheckBoard asks the watcher to check board soon.
func (in *Installer) CheckBoard(board string) {
	in.watch.schedule(board, in.o.Clock.Now())
}

// watchLoop follows the fleet's events and the period, and checks boards
// that may have drifted (healing them when the revision says heal).
func (in *Installer) watchLoop(ctx context.Context) {
	w := &in.watch
	var wg sync.WaitGroup
	defer wg.Wait()
	src, _ := in.o.Fleet.(EventSource)
	var events <-chan fleet.Event
	subscribe := func() {
		if src != nil {
			events = src.Watch(ctx, fleet.Filter{}, fleet.Live).C
		}
	}
	subscribe()
	every := in.o.CheckEvery
	tick := in.o.Clock.NewTicker(min(in.o.Settle, every))
	defer tick.Stop()
	nextRound := in.o.Clock.Now()
	sem := make(chan struct{}, in.o.Parallel)
	for {
		now := in.o.Clock.Now()
		if !now.Before(nextRound) {
			nextRound = now.Add(every)
			for _, v := range in.o.Fleet.Boards(fleet.Filter{}) {
				w.schedule(v.ID, now)
			}
		}
		w.mu.Lock()
		var start []string
		for id, t := range w.due {
			if !t.After(now) && !w.running[id] {
				start = append(start, id)
				delete(w.due, id)
				w.running[id] = true
			}
		}
		w.mu.Unlock()
		slices.Sort(start)
		for _, id := range start {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				in.checkBoard(ctx, id)
				w.mu.Lock()
				delete(w.running, id)
				w.mu.Unlock()
			})
		}
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				subscribe() // cut off for falling behind: look at everyone again
				nextRound = in.o.Clock.Now()
				continue
			}
			switch {
			case ev.Type == fleet.EventOnline || ev.Type == fleet.EventRestarted:
				w.schedule(ev.Board, in.o.Clock.Now().Add(in.o.Settle))
			case ev.Type == fleet.EventState && (ev.Kind == "scenes" || ev.Kind == "settings" || ev.Kind == "link"):
				w.schedule(ev.Board, in.o.Clock.Now().Add(in.o.Settle))
			case ev.Type == fleet.EventOffline:
				w.mu.Lock()
				if d, ok := w.last[ev.Board]; ok {
					d.State, d.Summary, d.Diff = StateUnreachable, "offline: "+ev.Reason, nil
					w.last[ev.Board] = d
				}
				w.mu.Unlock()
			}
		case <-tick.C():
		case <-w.wake:
		}
	}
}

// checkBoard plans the current revision on one board, records what it
// found, and heals the board when the revision says heal and no run is
// applying it.
func (in *Installer) checkBoard(ctx context.Context, id string) {
	rev, d, err := in.currentCached()
	if err != nil {
		return // nothing applied yet
	}
	w := &in.watch
	view, err := boardView(in.o.Fleet, id)
	if err != nil {
		return
	}
	if !in.owns(id) {
		// Another gateway of the cluster owns it: it checks and heals it.
		w.mu.Lock()
		delete(w.last, id)
		w.mu.Unlock()
		return
	}
	t, ok, err := d.Resolve(view)
	now := in.o.Clock.Now().UTC()
	var bp BoardPlan
	switch {
	case err != nil:
		bp = BoardPlan{Board: id, State: StateFailed, Summary: err.Error(), Error: err.Error()}
	case !ok:
		w.mu.Lock()
		_, had := w.last[id]
		delete(w.last, id)
		w.mu.Unlock()
		if had || in.o.Shared != nil {
			in.drop(id)
		}
		return
	case !view.Online:
		bp = BoardPlan{Board: id, Profile: t.Profile, State: StateUnreachable, Summary: "offline"}
	case in.inRun(id):
		bp = BoardPlan{Board: id, Profile: t.Profile, State: StateApplying, Summary: "applying"}
	default:
		bp = in.planOne(ctx, t)
	}
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	prev := w.last[id]
	dr := Drift{BoardPlan: bp, Checked: now, Healed: prev.Healed}
	w.last[id] = dr
	heal := d.Heal && bp.State == StateDrifted && !now.Before(w.nextTry[id])
	w.mu.Unlock()
	late := !heal && bp.State == StateDrifted && in.uncovered(rev.N, id)
	heal = heal || late
	if in.o.Shared != nil && (prev.State != bp.State || prev.Summary != bp.Summary || now.Sub(prev.Checked) >= in.o.CheckEvery) {
		in.publish(bp, rev.N, 0, now)
	}
	if prev.State != bp.State {
		in.o.Log.Info("installation: board state", "board", id, "state", bp.State, "was", prev.State, "summary", bp.Summary)
	}
	if !heal {
		return
	}
	if other, err := in.answersAs(ctx, id); err == nil && other != id {
		// Another board answers where this one was (swapped at the same
		// line address, not yet told apart by the driver): heal neither
		// under the wrong name. The new board is checked once the fleet
		// knows it; this one is looked at again.
		in.o.Log.Info("installation: another board answers for this one; heal deferred", "board", id, "answers", other)
		w.schedule(id, in.o.Clock.Now().Add(in.o.Settle))
		return
	}
	diff, err := in.ApplyBoard(ctx, t, rev.N, in.o.Step)
	if ctx.Err() != nil {
		return
	}
	code, reason := auth.CodeOK, ""
	if diff != nil {
		reason = diff.Summary()
	}
	w.mu.Lock()
	if err != nil {
		code, reason = "Aborted", err.Error()
		w.nextTry[id] = now.Add(in.o.HealRetry)
	} else if !late {
		delete(w.nextTry, id)
		dr := w.last[id]
		dr.Healed++
		w.last[id] = dr
		w.heals++
	}
	w.mu.Unlock()
	if err != nil && late {
		in.uncover(id) // tried again at its next check
	}
	if in.o.Audit != nil {
		a := Author{}.attrs("installation-heal", rev.N, "", "installation.heal")
		if late {
			// A board the gateway's run of the revision did not take (in
			// a cluster): applied as the run would have, for the
			// revision's author.
			a = rev.Author.attrs(rev.Who, rev.N, in.gateway(), "installation.apply_board")
		}
		a.Boards = []string{id}
		in.o.Audit.Audit(auth.Record{Time: in.o.Clock.Now().UTC(), Allowed: true, Code: code, Reason: reason, Attributes: a})
	}
	// Look again once the board's stream has caught up.
	w.schedule(id, in.o.Clock.Now().Add(in.o.Settle))
}

// answersAs asks the board reached as id for its own id (GET /info): one
// request before a heal, which nobody asked for, so that a heal is never
// applied to, and audited for, a board other than the one it names.
func (in *Installer) answersAs(ctx context.Context, id string) (string, error) {
	rep, err := in.o.Fleet.Call(ctx, id, "GET", "/info", nil)
	if err != nil {
		return "", err
	}
	var info struct {
		ID string `json:"id"`
	}
	if rep.Status != 200 || json.Unmarshal(rep.Body, &info) != nil || info.ID == "" {
		return "", fmt.Errorf("%w: GET /info of %s: status %d", ErrBoard, id, rep.Status)
	}
	return info.ID, nil
}

// inRun reports whether an unfinished run has yet to finish board id.
func (in *Installer) inRun(id string) bool {
	e := &in.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == nil {
		return false
	}
	b, ok := e.active.boards[id]
	return ok && !Terminal(b.Phase)
}

// currentCached is Current without parsing the same revision again.
func (in *Installer) currentCached() (Revision, *Description, error) {
	in.curMu.Lock()
	defer in.curMu.Unlock()
	var n int
	if in.o.Shared != nil {
		n = int(in.sharedCur.Load())
	} else if ok, err := in.st.Get(currentKey, &n); err != nil || !ok {
		n = 0
	}
	if n == 0 {
		return Revision{}, nil, fmt.Errorf("%w: nothing applied yet", ErrNotFound)
	}
	if in.cur != nil && in.curRev.N == n {
		return in.curRev, in.cur, nil
	}
	rev, err := in.Revision(n)
	if err != nil {
		return Revision{}, nil, err
	}
	d, err := Parse(fmt.Sprintf("revision %d", n), rev.Description)
	if err != nil {
		return Revision{}, nil, err
	}
	rev.Description = nil
	in.curRev, in.cur = rev, d
	return rev, d, nil
}

// Metrics of the installation.
var (
	descBoards = prometheus.NewDesc(metricname.GatewayInstallationBoards,
		"Assigned boards by the drift watcher's last finding (in_sync, drifted, applying, unreachable, failed, needs_lan).", []string{"state"}, nil)
	descBoardInSync = prometheus.NewDesc(metricname.GatewayInstallationBoardInSync,
		"1 when the board held the current revision at its last check, else 0.", []string{"board", "profile"}, nil)
	descRevision = prometheus.NewDesc(metricname.GatewayInstallationRevision, "The revision applied last (0 before any).", nil, nil)
	descHeals    = prometheus.NewDesc(metricname.GatewayInstallationHealsTotal, "Boards brought back by heal, by this process.", nil, nil)
)

// BoardStates are the states a board's drift may show, in order.
var BoardStates = boardstate.Checked

// Collector exports the drift watcher's findings to Prometheus.
func (in *Installer) Collector() prometheus.Collector { return collector{in} }

type collector struct{ in *Installer }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBoards, descBoardInSync, descRevision, descHeals} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	drifts := c.in.Drifts()
	counts := map[string]int{}
	for id, d := range drifts {
		counts[d.State]++
		v := 0.0
		if d.State == StateInSync {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descBoardInSync, prometheus.GaugeValue, v, id, d.Profile)
	}
	for _, s := range BoardStates {
		ch <- prometheus.MustNewConstMetric(descBoards, prometheus.GaugeValue, float64(counts[s]), s)
	}
	rev := 0
	if r, _, err := c.in.currentCached(); err == nil {
		rev = r.N
	}
	ch <- prometheus.MustNewConstMetric(descRevision, prometheus.GaugeValue, float64(rev))
	c.in.watch.mu.Lock()
	heals := c.in.watch.heals
	c.in.watch.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descHeals, prometheus.CounterValue, float64(heals))
}
