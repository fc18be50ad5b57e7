package rollout

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/eventlog"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
)

// Fleet is what the engine needs of the fleet core (*fleet.Fleet).
type Fleet = fleet.Caller

// Artifacts is what the engine needs of the firmware store.
type Artifacts interface {
	Get(sha string) (artifact.Artifact, error)
	Open(sha string) (*os.File, artifact.Artifact, error)
	// Admit tells whether the gateway's own keys allow installing a.
	Admit(a artifact.Artifact) error
}

// Store keeps the engine's records (the store.Bucket of DB by default;
// a cluster of gateways keeps them in its engine). Batch writes every
// key at once or none (nil values delete) and returns once they are
// durable.
type Store interface {
	Keys() ([]string, error)
	Get(key string, v any) (bool, error)
	Batch(puts map[string]any) error
}

// Options configure an Engine.
type Options struct {
	DB *store.DB
	// Store, when set, keeps the records instead of DB.
	Store     Store
	Fleet     Fleet
	Artifacts Artifacts
	Clock     clock.Clock
	Log       *slog.Logger
	// Tick is how often the scheduler looks at running rollouts
	// (default 100 ms); board changes wake it sooner.
	Tick time.Duration
	// Poll is how often a board is asked GET /ota while it restarts
	// (default 100 ms). The first question waits until the restart
	// delay has passed: before that the board cannot have restarted.
	Poll time.Duration
	// RestartDelay is the delay_ms of the POST /restart sent after an
	// activation (default 200 ms, the board's minimum).
	RestartDelay time.Duration
	// Kick is how long a board may keep running the old image with the
	// new one set to boot before POST /restart is sent again (default 5 s).
	Kick time.Duration
	// Settle is how long after Run starts a board the fleet cannot reach
	// (not found again yet, or unknown) is waited for without spending
	// its retries (default 10 s): a gateway restarted mid-rollout finds
	// its boards again first.
	Settle time.Duration
	// TrustTimeout bounds the reading of the selected boards' trusted
	// keys (GET /ota) at dry run and create (default
	// DefaultTrustTimeout); boards not read by then stay selected and are
	// checked before their image is sent (trust.go).
	TrustTimeout time.Duration
	// ShowGuards tell which boards are busy with a show beyond what the
	// boards report (a cue list, DMX input): such boards do not start
	// (gate.go).
	ShowGuards []ShowGuard
	// Recheck is how often a board waiting at the gate (a show, a health
	// condition) is asked again (default DefaultRecheck).
	Recheck time.Duration
	// PullBase is the https URL under which boards find the artifact
	// handler's images (<PullBase>images/<sha>.bin) for the pull method;
	// empty refuses pull plans.
	PullBase string
}

// Engine runs rollouts. Its methods are safe for concurrent use; Run
// drives the rollouts until its context ends.
type Engine struct {
	o Options
	j *store.Journal

	mu     sync.Mutex
	runs   map[string]*run
	active map[string]string // board -> rollout
	events *eventlog.Log[Event]
	wake   chan struct{}
	// warm are the deltas to make ahead (Create): base -> target.
	warm [][2]string

	// bytesSent counts image bytes sent to boards.
	bytesSent atomic.Uint64
	// settled is when the Settle period after Run's start ends.
	settled atomic.Pointer[time.Time]
}

// run is one rollout in memory. Guarded by Engine.mu except ctl.
type run struct {
	r       Rollout
	boards  map[string]*Board
	working map[string]bool
	// reserved holds the boards about to be activated under a
	// MaxRestarting cap.
	reserved map[string]bool
	// ctl serialises changes of the rollout record.
	ctl sync.Mutex
	lim *limiter
	// sent counts image bytes sent to the rollout's boards (this
	// process's life).
	sent atomic.Uint64
}

// New returns an engine over o.DB. Call Load (or Run) before use.
func New(o Options) (*Engine, error) {
	if (o.DB == nil && o.Store == nil) || o.Fleet == nil || o.Artifacts == nil {
		return nil, errors.New("rollout: DB (or Store), Fleet and Artifacts are required")
	}
	if o.Store == nil {
		o.Store = o.DB.Bucket(bucket)
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.Tick = defaults.Positive(o.Tick, 100*time.Millisecond)
	o.Poll = defaults.Positive(o.Poll, 100*time.Millisecond)
	o.RestartDelay = defaults.Positive(o.RestartDelay, 200*time.Millisecond)
	o.Kick = defaults.Positive(o.Kick, 5*time.Second)
	o.Settle = defaults.Positive(o.Settle, 10*time.Second)
	o.TrustTimeout = defaults.Positive(o.TrustTimeout, DefaultTrustTimeout)
	o.Recheck = defaults.Positive(o.Recheck, DefaultRecheck)
	e := &Engine{o: o, j: store.NewJournal(o.Store), runs: map[string]*run{}, active: map[string]string{},
		events: newEventLog(4096), wake: make(chan struct{}, 1)}
	if err := e.load(); err != nil {
		return nil, err
	}
	return e, nil
}

// load reads every rollout from the store.
func (e *Engine) load() error {
	bk := e.o.Store
	keys, err := bk.Keys()
	if err != nil {
		return err
	}
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "r/"):
			var r Rollout
			if _, err := bk.Get(k, &r); err != nil {
				return err
			}
			e.runs[r.ID] = e.newRun(r)
		case strings.HasPrefix(k, "a/"):
			var id string
			if _, err := bk.Get(k, &id); err != nil {
				return err
			}
			e.active[strings.TrimPrefix(k, "a/")] = id
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "b/") {
			continue
		}
		var b Board
		if _, err := bk.Get(k, &b); err != nil {
			return err
		}
		if r := e.runs[b.Rollout]; r != nil {
			r.boards[b.Board] = &b
		}
	}
	return nil
}

func (e *Engine) newRun(r Rollout) *run {
	return &run{r: r, boards: map[string]*Board{}, working: map[string]bool{}, reserved: map[string]bool{}, lim: newLimiter(e.o.Clock, r.Plan.Bandwidth)}
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// prepare checks p and resolves it against the fleet and the store:
// the artifact must be one the gateway's keys admit, and every selected
// board that would refuse its signature is refused (trust.go).
func (e *Engine) prepare(ctx context.Context, p *Plan) (Selection, Image, error) {
	if err := p.normalise(); err != nil {
		return Selection{}, Image{}, err
	}
	if p.Method == MethodPull && !strings.HasPrefix(e.o.PullBase, "https://") {
		return Selection{}, Image{}, fmt.Errorf("%w: method pull needs the gateway to serve images over https (no pull base configured)", ErrPlan)
	}
	a, err := e.o.Artifacts.Get(p.Artifact)
	if err != nil {
		return Selection{}, Image{}, fmt.Errorf("%w: %w", ErrArtifact, err)
	}
	if err := e.o.Artifacts.Admit(a); err != nil {
		return Selection{}, Image{}, fmt.Errorf("%w: %w", ErrArtifact, err)
	}
	p.Artifact = a.SHA256
	img := Image{SHA256: a.SHA256, Size: a.Size, App: a.App, Trust: a.Trust}
	for _, sg := range a.Signers {
		if sg.Valid {
			img.Signers = append(img.Signers, sg.KeyDigest)
		}
	}
	views := e.o.Fleet.Boards(fleet.Filter{})
	online := map[string]bool{}
	for _, v := range views {
		online[v.ID] = v.Online
	}
	e.mu.Lock()
	sel, picked := pickBoards(p, views, func(id string) string { return e.active[id] })
	e.mu.Unlock()
	picked = e.checkTrust(ctx, a, picked, online, &sel)
	return sel, img, sel.formWaves(p, picked)
}

// DryRun tells who p would update, wave by wave, and who it refuses and
// why (boards whose secure boot would refuse the image included),
// without writing anything.
func (e *Engine) DryRun(ctx context.Context, p Plan) (Selection, error) {
	sel, _, err := e.prepare(ctx, &p)
	if err != nil {
		return sel, err
	}
	e.gateAll(ctx, &p, &sel)
	return sel, nil
}

// gateAll asks the gate about every selected board (bounded by
// TrustTimeout overall) and names in sel those that would wait or be
// skipped if the rollout started now.
func (e *Engine) gateAll(ctx context.Context, p *Plan, sel *Selection) {
	ctx, cancel := context.WithTimeout(ctx, e.o.TrustTimeout)
	defer cancel()
	for _, wave := range sel.Waves {
		for _, id := range wave {
			v, err := e.gate(ctx, p, id)
			switch {
			case err != nil:
				sel.Waiting = append(sel.Waiting, Refusal{id, "not checked: " + err.Error()})
			case v.Skip:
				sel.Skipped = append(sel.Skipped, Refusal{id, v.Why()})
			case v.Why() != "":
				sel.Waiting = append(sel.Waiting, Refusal{id, v.Why()})
			}
		}
	}
}

// Create checks p, freezes its waves and starts the rollout. Boards in
// another active rollout are refused (listed in Refused).
func (e *Engine) Create(ctx context.Context, p Plan) (Status, error) {
	sel, img, err := e.prepare(ctx, &p)
	if err != nil {
		return Status{}, err
	}
	now := e.o.Clock.Now().UTC()
	r := Rollout{ID: newID(), Plan: p, Image: img, State: StateRunning, Waves: sel.Waves, Refused: sel.Refused, Created: now, Updated: now}
	kv := map[string]any{rolloutKey(r.ID): r}
	boards := map[string]*Board{}
	for w, ids := range sel.Waves {
		for _, id := range ids {
			b := &Board{Rollout: r.ID, Board: id, Wave: w, Phase: PhasePending, Timeline: []Step{{Time: now, Phase: PhasePending}}}
			boards[id] = b
			kv[boardKey(r.ID, id)] = b
			kv[activeKey(id)] = r.ID
		}
	}
	// Holding mu across the write keeps two creations from claiming one
	// board.
	e.mu.Lock()
	if p.Method == MethodPush && !p.FullImages {
		for base := range sel.bases {
			e.warm = append(e.warm, [2]string{base, img.SHA256})
		}
	}
	for id := range boards {
		if other := e.active[id]; other != "" {
			e.mu.Unlock()
			return Status{}, fmt.Errorf("%w: board %s joined rollout %s meanwhile", ErrState, id, other)
		}
	}
	if err := e.j.Write(ctx, kv); err != nil {
		e.mu.Unlock()
		return Status{}, err
	}
	rn := e.newRun(r)
	rn.boards = boards
	e.runs[r.ID] = rn
	for id := range boards {
		e.active[id] = r.ID
	}
	e.emitLocked(Event{Rollout: r.ID, State: r.State, Note: fmt.Sprintf("created: %d boards in %d waves", sel.Boards(), len(sel.Waves))})
	st := e.statusLocked(rn)
	e.mu.Unlock()
	e.poke()
	return st, nil
}

func (e *Engine) get(id string) (*run, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.runs[id]
	if r == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return r, nil
}

// Get returns one rollout with its progress.
func (e *Engine) Get(id string) (Status, error) {
	r, err := e.get(id)
	if err != nil {
		return Status{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statusLocked(r), nil
}

// List returns every rollout, newest first.
func (e *Engine) List() []Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Status, 0, len(e.runs))
	for _, r := range e.runs {
		out = append(out, e.statusLocked(r))
	}
	slices.SortFunc(out, func(a, b Status) int { return b.Created.Compare(a.Created) })
	return out
}

// Boards returns a rollout's boards with their timelines, by wave then id.
func (e *Engine) Boards(id string) ([]Board, error) {
	r, err := e.get(id)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Board, 0, len(r.boards))
	for _, b := range r.boards {
		out = append(out, *b.clone())
	}
	slices.SortFunc(out, func(a, b Board) int {
		if a.Wave != b.Wave {
			return a.Wave - b.Wave
		}
		return strings.Compare(a.Board, b.Board)
	})
	return out, nil
}

// Active returns the rollout board id belongs to now ("" when none).
func (e *Engine) Active(board string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active[board]
}

// Uses reports whether an unfinished rollout installs artifact sha.
func (e *Engine) Uses(sha string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.runs {
		if r.r.Image.SHA256 == sha && !r.r.Finished {
			return true
		}
	}
	return false
}

func (e *Engine) statusLocked(r *run) Status {
	p := Progress{Boards: len(r.boards), Phases: map[string]int{}}
	for _, b := range r.boards {
		p.Phases[b.Phase]++
		if Terminal(b.Phase) {
			p.Done++
		}
		if failed(b.Phase) {
			p.Failed++
		}
	}
	for _, b := range r.boards {
		if b.Waiting != "" && b.Phase == PhasePending {
			p.Waiting++
		}
	}
	if p.Boards > 0 {
		p.Percent = float64(p.Done) * 100 / float64(p.Boards)
	}
	rr := r.r
	rr.Waves = slices.Clone(rr.Waves)
	st := Status{Rollout: rr, Progress: p}
	if w := rr.Plan.Window; w != nil && !rr.Finished {
		now := e.o.Clock.Now()
		st.WindowOpen = w.Open(now)
		if next := w.Next(now); !next.IsZero() {
			next = next.UTC()
			st.NextWindow = &next
		}
	}
	return st
}

// setState changes the rollout's state (durably first).
func (e *Engine) setState(ctx context.Context, r *run, change func(*Rollout) error) (Status, error) {
	r.ctl.Lock()
	defer r.ctl.Unlock()
	e.mu.Lock()
	next := r.r
	e.mu.Unlock()
	next.Waves = slices.Clone(next.Waves)
	if err := change(&next); err != nil {
		return Status{}, err
	}
	next.Updated = e.o.Clock.Now().UTC()
	kv := map[string]any{rolloutKey(next.ID): next}
	if next.Finished {
		e.mu.Lock()
		for b, id := range e.active {
			if id == next.ID {
				kv[activeKey(b)] = nil
			}
		}
		e.mu.Unlock()
	}
	if err := e.j.Write(ctx, kv); err != nil {
		return Status{}, err
	}
	e.mu.Lock()
	prev := r.r
	r.r = next
	if next.Finished {
		for b, id := range e.active {
			if id == next.ID {
				delete(e.active, b)
			}
		}
	}
	if prev.State != next.State || prev.Wave != next.Wave || prev.Finished != next.Finished || !prev.SoakUntil.Equal(next.SoakUntil) {
		e.emitLocked(Event{Rollout: next.ID, State: next.State, Wave: min(next.Wave, max(len(next.Waves)-1, 0)), Note: next.Reason})
	}
	st := e.statusLocked(r)
	e.mu.Unlock()
	e.poke()
	return st, nil
}

// Pause stops starting boards; boards in flight finish their steps.
func (e *Engine) Pause(ctx context.Context, id, reason string) (Status, error) {
	r, err := e.get(id)
	if err != nil {
		return Status{}, err
	}
	return e.setState(ctx, r, func(x *Rollout) error {
		if x.State != StateRunning {
			return fmt.Errorf("%w: %s is %s", ErrState, id, x.State)
		}
		x.State, x.Reason = StatePaused, cmp.Or(reason, "paused by an operator")
		return nil
	})
}

// Resume continues a paused rollout. A wave that stopped below the
// success threshold counts as good enough then: the operator decided.
func (e *Engine) Resume(ctx context.Context, id string) (Status, error) {
	r, err := e.get(id)
	if err != nil {
		return Status{}, err
	}
	return e.setState(ctx, r, func(x *Rollout) error {
		if x.State != StatePaused {
			return fmt.Errorf("%w: %s is %s", ErrState, id, x.State)
		}
		x.State, x.Reason = StateRunning, "resumed by an operator"
		// The operator accepts the failures so far and the current wave
		// as it stands.
		x.AckWave = x.Wave + 1
		x.AckFailed = 0
		e.mu.Lock()
		for _, b := range r.boards {
			if failed(b.Phase) {
				x.AckFailed++
			}
		}
		e.mu.Unlock()
		return nil
	})
}

// Abort stops the rollout: no board starts, images staged but not
// activated are discarded, boards already activating finish.
func (e *Engine) Abort(ctx context.Context, id, reason string) (Status, error) {
	r, err := e.get(id)
	if err != nil {
		return Status{}, err
	}
	return e.setState(ctx, r, func(x *Rollout) error {
		if x.State != StateRunning && x.State != StatePaused {
			return fmt.Errorf("%w: %s is %s", ErrState, id, x.State)
		}
		x.State, x.Reason = StateAborted, cmp.Or(reason, "aborted by an operator")
		return nil
	})
}

// Revert aborts the rollout and makes every board it updated boot its
// previous image again.
func (e *Engine) Revert(ctx context.Context, id, reason string) (Status, error) {
	r, err := e.get(id)
	if err != nil {
		return Status{}, err
	}
	return e.setState(ctx, r, func(x *Rollout) error {
		if x.State == StateReverting || x.State == StateReverted {
			return fmt.Errorf("%w: %s is %s", ErrState, id, x.State)
		}
		x.State, x.Reason, x.Finished = StateReverting, cmp.Or(reason, "reverted by an operator"), false
		return nil
	})
}

// Run drives the rollouts until ctx ends, then waits for its board
// workers. A rollout interrupted by a crash carries on from its records.
func (e *Engine) Run(ctx context.Context) error {
	until := e.o.Clock.Now().Add(e.o.Settle)
	e.settled.Store(&until)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := e.o.Clock.NewTicker(e.o.Tick)
	defer t.Stop()
	warming := false
	warmed := make(chan struct{}, 1)
	for {
		e.mu.Lock()
		if !warming && len(e.warm) > 0 {
			// Deltas for the bases a new rollout's boards run, made ahead
			// one at a time (each holds two images and the encoder) so the
			// first board on a base does not wait for it.
			if ds, ok := e.o.Artifacts.(DeltaSource); ok {
				warming = true
				todo := e.warm
				wg.Go(func() {
					defer func() { warmed <- struct{}{} }()
					for _, w := range todo {
						if ctx.Err() != nil {
							return
						}
						if f, _, err := ds.OpenDelta(ctx, w[0], w[1]); err == nil {
							f.Close()
						}
					}
				})
			}
			e.warm = nil
		}
		runs := make([]*run, 0, len(e.runs))
		for _, r := range e.runs {
			if !r.r.Finished {
				runs = append(runs, r)
			}
		}
		e.mu.Unlock()
		for _, r := range runs {
			if err := e.schedule(ctx, r, &wg); err != nil && ctx.Err() == nil {
				e.o.Log.Error("rollout: scheduling", "rollout", r.r.ID, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-e.wake:
		case <-warmed:
			warming = false
		}
	}
}

// schedule looks at one rollout: thresholds, wave changes, workers.
func (e *Engine) schedule(ctx context.Context, r *run, wg *sync.WaitGroup) error {
	now := e.o.Clock.Now()
	e.mu.Lock()
	x := r.r
	p := x.Plan
	var start []string
	switch x.State {
	case StateRunning:
		if x.Wave >= len(x.Waves) {
			e.mu.Unlock()
			return e.finish(ctx, r, StateDone, "every wave finished")
		}
		// Failure thresholds, per wave and overall.
		var wFin, wFail, wOK, tFin, tFail int
		for _, b := range r.boards {
			fin := Terminal(b.Phase) && b.Phase != PhaseCancelled
			if fin {
				tFin++
			}
			if failed(b.Phase) {
				tFail++
			}
			if b.Wave == x.Wave {
				if fin {
					wFin++
				}
				if failed(b.Phase) {
					wFail++
				}
				if b.Phase == PhaseSucceeded || b.Phase == PhaseSkipped {
					wOK++
				}
			}
		}
		th := p.Thresholds
		wave := x.Waves[x.Wave]
		var why string
		switch {
		case x.AckWave != x.Wave+1 && wFin >= th.MinSample && wFail > 0 && float64(wFail) >= th.WaveFailure*float64(len(wave)):
			why = fmt.Sprintf("wave %d: %d of %d boards failed (threshold %.0f%%)", x.Wave+1, wFail, len(wave), th.WaveFailure*100)
		default:
			why = OverallFailure(tFail, tFin, x.AckFailed, th.MinSample, th.TotalFailure)
		}
		if why != "" {
			e.mu.Unlock()
			_, err := e.setState(ctx, r, func(y *Rollout) error {
				if y.State != StateRunning {
					return nil
				}
				y.State, y.Reason = StatePaused, why
				if th.Action == ActionRevert {
					y.State = StateReverting
				}
				return nil
			})
			return err
		}
		if wFin+countPhase(r, x.Wave, PhaseCancelled) == len(wave) {
			e.mu.Unlock()
			return e.waveDone(ctx, r, now, wOK, len(wave))
		}
		// Boards asked to restart wait outside the in-flight count.
		inFlight := 0
		for id := range r.working {
			if r.boards[id].Phase != PhaseRestarting {
				inFlight++
			}
		}
		open := p.Window.Open(now)
		for _, id := range wave {
			if inFlight >= p.MaxInFlight {
				break
			}
			b := r.boards[id]
			if r.working[id] || Terminal(b.Phase) || b.NextTry.After(now) || (b.Phase == PhaseStaged && !open) ||
				(b.Phase == PhasePending && !open && p.Window.Strict) {
				continue
			}
			start = append(start, id)
			inFlight++
		}
	case StatePaused:
		// Boards past the point of no return finish; nothing starts.
		for id, b := range r.boards {
			if !r.working[id] && (b.Phase == PhaseActivating || b.Phase == PhaseRestarting) {
				start = append(start, id)
			}
		}
	case StateAborted, StateReverting:
		left := 0
		for id, b := range r.boards {
			todo := !Terminal(b.Phase) || (x.State == StateReverting && b.Phase == PhaseSucceeded)
			if !todo {
				continue
			}
			left++
			if !r.working[id] && len(r.working)+len(start) < p.MaxInFlight {
				start = append(start, id)
			}
		}
		if left == 0 && len(r.working) == 0 {
			e.mu.Unlock()
			if x.State == StateReverting {
				return e.finish(ctx, r, StateReverted, x.Reason)
			}
			return e.finish(ctx, r, StateAborted, x.Reason)
		}
	}
	for _, id := range start {
		r.working[id] = true
	}
	e.mu.Unlock()
	for _, id := range start {
		wg.Go(func() {
			defer func() {
				e.mu.Lock()
				delete(r.working, id)
				e.mu.Unlock()
				e.poke()
			}()
			w := &worker{e: e, r: r, id: id}
			if err := w.drive(ctx); err != nil && ctx.Err() == nil {
				e.o.Log.Warn("rollout: board step", "rollout", r.r.ID, "board", id, "err", err)
			}
		})
	}
	return nil
}

func countPhase(r *run, wave int, phase string) int {
	n := 0
	for _, b := range r.boards {
		if b.Wave == wave && b.Phase == phase {
			n++
		}
	}
	return n
}

// waveDone advances past a finished wave: below the success threshold
// the rollout pauses; else it soaks, then the next wave starts.
func (e *Engine) waveDone(ctx context.Context, r *run, now time.Time, ok, n int) error {
	_, err := e.setState(ctx, r, func(y *Rollout) error {
		if y.State != StateRunning {
			return nil
		}
		th := y.Plan.Thresholds
		if float64(ok) < th.Success*float64(n)-1e-9 && y.AckWave != y.Wave+1 {
			y.State = StatePaused
			y.Reason = fmt.Sprintf("wave %d: %d of %d boards updated, below the success threshold %.0f%%", y.Wave+1, ok, n, th.Success*100)
			return nil
		}
		if y.SoakUntil.IsZero() && y.Plan.Soak > 0 {
			y.SoakUntil = now.Add(y.Plan.Soak.D()).UTC()
			y.Reason = fmt.Sprintf("wave %d finished: soaking", y.Wave+1)
			return nil
		}
		if now.Before(y.SoakUntil) {
			return nil
		}
		y.SoakUntil = time.Time{}
		y.Wave++
		y.Reason = fmt.Sprintf("wave %d of %d", min(y.Wave+1, len(y.Waves)), len(y.Waves))
		return nil
	})
	return err
}

// finish marks the rollout finished and frees its boards.
func (e *Engine) finish(ctx context.Context, r *run, state, reason string) error {
	_, err := e.setState(ctx, r, func(y *Rollout) error {
		y.State, y.Reason, y.Finished = state, reason, true
		return nil
	})
	return err
}

// save writes b as the board's record, then makes it current.
func (e *Engine) save(ctx context.Context, r *run, b *Board, note string) error {
	return e.saveVia(ctx, r, b, nil, note)
}

// saveVia is save for a board that went through the steps via (already
// done, recorded in the same write) on its way to b.Phase.
func (e *Engine) saveVia(ctx context.Context, r *run, b *Board, via []Step, note string) error {
	b.Timeline = append(b.Timeline, via...)
	b.Timeline = append(b.Timeline, Step{Time: e.o.Clock.Now().UTC(), Phase: b.Phase, Note: note})
	if len(b.Timeline) > MaxTimeline {
		b.Timeline = slices.Delete(b.Timeline, 1, len(b.Timeline)-MaxTimeline+1)
	}
	if err := e.j.Write(ctx, map[string]any{boardKey(b.Rollout, b.Board): b}); err != nil {
		return err
	}
	e.mu.Lock()
	r.boards[b.Board] = b.clone()
	for _, s := range via {
		e.emitLocked(Event{Rollout: b.Rollout, Board: b.Board, Phase: s.Phase, Wave: b.Wave, Note: s.Note})
	}
	e.emitLocked(Event{Rollout: b.Rollout, Board: b.Board, Phase: b.Phase, Wave: b.Wave, Note: note})
	e.mu.Unlock()
	if Terminal(b.Phase) || b.Phase == PhaseRestarting {
		e.poke() // a board left the in-flight count
	}
	return nil
}

// reserveRestart takes one of the plan's restart slots for board id
// (boards activating or restarting, and those holding a reservation);
// false when none is free. release gives it back once the board's record
// shows it activating (or the attempt ended).
func (e *Engine) reserveRestart(r *run, id string, limit int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for other, b := range r.boards {
		if other != id && (b.Phase == PhaseActivating || b.Phase == PhaseRestarting || r.reserved[other]) {
			n++
		}
	}
	if n >= limit {
		return false
	}
	r.reserved[id] = true
	return true
}

func (e *Engine) releaseRestart(r *run, id string) {
	e.mu.Lock()
	delete(r.reserved, id)
	e.mu.Unlock()
}

// settling reports whether err, a failure to reach a board, falls in the
// Settle period after Run started.
func (e *Engine) settling(err error) bool {
	until := e.settled.Load()
	return until != nil && e.o.Clock.Now().Before(*until) &&
		(errors.Is(err, fleet.ErrUnreachable) || errors.Is(err, fleet.ErrUnknownBoard))
}

// BytesSent is how many image bytes the engine has sent to boards.
func (e *Engine) BytesSent() uint64 { return e.bytesSent.Load() }
