package installation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// Revision is one applied description, numbered from 1.
type Revision struct {
	N       int       `json:"n"`
	Who     string    `json:"who"`
	When    time.Time `json:"when"`
	Message string    `json:"message,omitempty"`
	// RollbackOf is the revision this one restored (0 when none).
	RollbackOf int `json:"rollback_of,omitempty"`
	// Run is the apply that carried the revision to the fleet.
	Run int `json:"run"`
	Author
	// Description is the description as canonical JSON, content named
	// by SHA-256.
	Description json.RawMessage `json:"description,omitempty"`
}

// Author is what the gateway an apply came in on established of its
// caller besides the name (Revision.Who): every board the revision
// changes, on every gateway of a cluster, is audited under it.
type Author struct {
	Role      string `json:"role,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Gateway is the gateway of the cluster the apply came in on.
	Gateway string `json:"gateway,omitempty"`
}

// authorOf is the author of an apply made with ctx (the identity and
// request id the surface attached).
func (in *Installer) authorOf(ctx context.Context) Author {
	a := Author{RequestID: auth.RequestIDFrom(ctx)}
	if id, ok := auth.FromContext(ctx); ok && id.Name != "" {
		a.Role = id.Role.String()
	}
	a.Gateway = in.gateway()
	return a
}

// attrs are the audit attributes of a change made for author who under
// revision rev: the author's identity and request id, and the gateway the
// apply came in on when it is another than this one.
func (a Author) attrs(who string, rev int, here, op string) auth.Attributes {
	id := auth.Identity{Name: who}
	id.Role, _ = auth.ParseRole(a.Role)
	if a.Gateway != "" && a.Gateway != here {
		op += " (applied on gateway " + a.Gateway + ")"
	}
	return auth.Attributes{Who: id, Verb: auth.VerbUpdate, Resource: auth.ResInstallation,
		Name: fmt.Sprintf("revision %d", rev), Operation: op, RequestID: a.RequestID}
}

// Run states.
const (
	RunRunning = "running"
	RunPaused  = "paused"
	RunAborted = "aborted"
	RunDone    = "done"
)

// Board phases of a run. The terminal ones end a board's part.
const (
	PhasePending     = "pending"
	PhaseApplying    = "applying"
	PhaseInSync      = "in_sync"
	PhaseFailed      = "failed"
	PhaseUnreachable = "unreachable"
	PhaseNeedsLAN    = "needs_lan"
	PhaseCancelled   = "cancelled"
)

// Terminal reports whether a phase ends a board's part in a run.
func Terminal(phase string) bool {
	switch phase {
	case PhaseInSync, PhaseFailed, PhaseUnreachable, PhaseNeedsLAN, PhaseCancelled:
		return true
	}
	return false
}

// Default strategy of an apply.
const (
	DefaultMaxInFlight      = 8
	DefaultFailureThreshold = 0.25
	DefaultMinSample        = 3
)

func (s Strategy) normalised(boards int) Strategy {
	if s.WaveSize <= 0 {
		s.WaveSize = max(boards, 1)
	}
	s.MaxInFlight = defaults.Positive(s.MaxInFlight, DefaultMaxInFlight)
	s.FailureThreshold = defaults.Positive(s.FailureThreshold, DefaultFailureThreshold)
	s.MinSample = defaults.Positive(s.MinSample, DefaultMinSample)
	return s
}

// Run is the apply of one revision over the fleet: its boards in waves,
// at most MaxInFlight at once, paused when failures pass the threshold.
type Run struct {
	ID       int    `json:"id"`
	Revision int    `json:"revision"`
	Who      string `json:"who"`
	Author
	State    string     `json:"state"`
	Reason   string     `json:"reason,omitempty"`
	Strategy Strategy   `json:"strategy"`
	Waves    [][]string `json:"waves"`
	Wave     int        `json:"wave"`
	// AckFailed is how many boards had failed when an operator resumed:
	// the threshold counts failures beyond those.
	AckFailed int       `json:"ack_failed,omitempty"`
	Finished  bool      `json:"finished,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
}

// RunBoard is one board's part in a run.
type RunBoard struct {
	Run      int       `json:"run"`
	Board    string    `json:"board"`
	Wave     int       `json:"wave"`
	Phase    string    `json:"phase"`
	Summary  string    `json:"summary,omitempty"`
	Error    string    `json:"error,omitempty"`
	Requests int       `json:"requests,omitempty"`
	Updated  time.Time `json:"updated"`
}

// RunStatus is a run with its boards' phases counted.
type RunStatus struct {
	Run
	Phases map[string]int `json:"phases"`
	Boards int            `json:"boards"`
	Done   int            `json:"done"`
}

func revKey(n int) string                { return fmt.Sprintf("rev/%08d", n) }
func runKey(n int) string                { return fmt.Sprintf("run/%08d", n) }
func runBoardKey(n int, b string) string { return fmt.Sprintf("rb/%08d/%s", n, b) }

const currentKey = "current"

// engine drives runs. Guarded by mu except where said.
type engine struct {
	in *Installer

	mu      sync.Mutex
	lastRev int
	lastRun int
	active  *runMem // the unfinished run, if any
	wake    chan struct{}
	// settled is when the StartSettle period after Run's start ends.
	settled atomic.Pointer[time.Time]
	// covered holds the boards the last run (of revision coverRev) took
	// or that were applied that revision since (uncovered).
	coverRev int
	covered  map[string]bool
}

type runMem struct {
	r       Run
	boards  map[string]*RunBoard
	working map[string]bool
	desc    *Description
}

func (e *engine) init(in *Installer) error {
	e.in = in
	e.wake = make(chan struct{}, 1)
	st := in.st
	if err := st.Scan("rev/", "rev0", true, func(k string, raw []byte) (bool, error) {
		fmt.Sscanf(k, "rev/%d", &e.lastRev)
		return false, nil
	}); err != nil {
		return err
	}
	var last Run
	if err := st.Scan("run/", "run0", true, func(k string, raw []byte) (bool, error) {
		return false, json.Unmarshal(raw, &last)
	}); err != nil {
		return err
	}
	e.lastRun = last.ID
	if last.ID != 0 {
		rm, err := e.loadRun(last)
		if err != nil {
			return err
		}
		if !last.Finished {
			e.active = rm
		}
		e.coverRev, e.covered = last.Revision, map[string]bool{}
		for id := range rm.boards {
			e.covered[id] = true
		}
	}
	return nil
}

func (e *engine) loadRun(r Run) (*runMem, error) {
	rm := &runMem{r: r, boards: map[string]*RunBoard{}, working: map[string]bool{}}
	prefix := fmt.Sprintf("rb/%08d/", r.ID)
	err := e.in.st.Scan(prefix, prefix+"\xff", false, func(k string, raw []byte) (bool, error) {
		var b RunBoard
		if err := json.Unmarshal(raw, &b); err != nil {
			return false, err
		}
		rm.boards[b.Board] = &b
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	rev, err := e.in.Revision(r.Revision)
	if err != nil {
		return nil, err
	}
	if rm.desc, err = Parse(fmt.Sprintf("revision %d", rev.N), rev.Description); err != nil {
		return nil, err
	}
	return rm, nil
}

func (e *engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Revision returns revision n with its description.
func (in *Installer) Revision(n int) (Revision, error) {
	var r Revision
	ok, err := in.st.Get(revKey(n), &r)
	if err != nil {
		return Revision{}, err
	}
	if !ok {
		if in.o.Shared != nil {
			ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
			defer cancel()
			return in.o.Shared.Revision(ctx, n)
		}
		return Revision{}, fmt.Errorf("%w: revision %d", ErrNotFound, n)
	}
	return r, nil
}

// currentN is the current revision's number (0 before any): the
// cluster's in a cluster, else the store's.
func (in *Installer) currentN() (int, error) {
	if in.o.Shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		_, cur, err := in.o.Shared.Latest(ctx)
		return cur, err
	}
	var n int
	_, err := in.st.Get(currentKey, &n)
	return n, err
}

// Current returns the revision applied last (ErrNotFound before any).
func (in *Installer) Current() (Revision, *Description, error) {
	n, err := in.currentN()
	if err != nil {
		return Revision{}, nil, err
	}
	if n == 0 {
		return Revision{}, nil, fmt.Errorf("%w: nothing applied yet", ErrNotFound)
	}
	r, err := in.Revision(n)
	if last := int(in.sharedCur.Load()); errors.Is(err, ErrInvalid) && last != 0 && last != n {
		// The cluster's current record is refused (no gateway signed
		// it): the revision this gateway last took stands.
		in.o.Log.Warn("installation: the cluster's current revision is refused; showing the last one taken", "current", n, "taken", last, "err", err)
		n = last
		r, err = in.Revision(n)
	}
	if err != nil {
		return Revision{}, nil, err
	}
	d, err := Parse(fmt.Sprintf("revision %d", n), r.Description)
	return r, d, err
}

// History lists the revisions, newest first, without their
// descriptions.
func (in *Installer) History() ([]Revision, error) {
	if in.o.Shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		return in.o.Shared.History(ctx)
	}
	var out []Revision
	err := in.st.Scan("rev/", "rev0", true, func(_ string, raw []byte) (bool, error) {
		var r Revision
		if err := json.Unmarshal(raw, &r); err != nil {
			return false, err
		}
		r.Description = nil
		out = append(out, r)
		return true, nil
	})
	return out, err
}

// Apply stores d as the next revision and starts applying it over the
// fleet. d's content must be in the store (Contents.Load). Only one run
// goes at a time: ErrState while another is unfinished.
func (in *Installer) Apply(ctx context.Context, d *Description, who, message string) (Revision, RunStatus, error) {
	return in.apply(ctx, d, who, message, 0)
}

// Rollback applies revision n's description again as a new revision.
func (in *Installer) Rollback(ctx context.Context, n int, who, message string) (Revision, RunStatus, error) {
	r, err := in.Revision(n)
	if err != nil {
		return Revision{}, RunStatus{}, err
	}
	d, err := Parse(fmt.Sprintf("revision %d", n), r.Description)
	if err != nil {
		return Revision{}, RunStatus{}, err
	}
	if message == "" {
		message = fmt.Sprintf("rollback to revision %d", n)
	}
	return in.apply(ctx, d, who, message, n)
}

func (in *Installer) apply(ctx context.Context, d *Description, who, message string, rollbackOf int) (Revision, RunStatus, error) {
	if err := in.ensureContent(ctx, d); err != nil {
		return Revision{}, RunStatus{}, err
	}
	for name, c := range d.Content {
		if n, ok := in.o.Contents.Has(c.SHA256); !ok || n != c.Size {
			return Revision{}, RunStatus{}, fmt.Errorf("%w: content %s (%s) is not in the gateway's store", ErrContent, name, c.SHA256)
		}
	}
	if err := in.shareContent(ctx, d); err != nil {
		return Revision{}, RunStatus{}, err
	}
	if err := in.checkSectionsApply(d); err != nil {
		return Revision{}, RunStatus{}, err
	}
	e := &in.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active != nil {
		return Revision{}, RunStatus{}, fmt.Errorf("%w: run %d (revision %d) is %s; abort it first", ErrState, e.active.r.ID, e.active.r.Revision, e.active.r.State)
	}
	now := in.o.Clock.Now().UTC()
	rev := Revision{N: e.lastRev + 1, Who: who, When: now, Message: message, RollbackOf: rollbackOf, Run: e.lastRun + 1,
		Author: in.authorOf(ctx), Description: d.JSON()}
	sh := in.o.Shared
	if sh != nil {
		// The cluster numbers the revisions: the next after the highest
		// any gateway stored, taken by compare-and-set below, so that two
		// gateways applying at once cannot both store it.
		last, _, err := sh.Latest(ctx)
		if err != nil {
			return Revision{}, RunStatus{}, err
		}
		rev.N = max(last, e.lastRev) + 1
	}
	// The gateway's own sections first: they are set whole or put back,
	// and a revision is stored only once they hold it. They are put back
	// too when the revision is not stored (another gateway of the
	// cluster took its number, the store failed), and audited once it is.
	sections, err := in.applySections(d, rev)
	if err != nil {
		return Revision{}, RunStatus{}, err
	}
	if sh != nil {
		if err := sh.CreateRevision(ctx, rev); err != nil {
			sections.putBack()
			return Revision{}, RunStatus{}, err
		}
		// Taken here at once: the watch may yet tell of an older
		// revision another gateway made current a moment before.
		in.takeCur(rev.N)
		defer func() { go in.checkAll() }()
	}
	local, st, err := in.startRunLocked(rev, d)
	if err != nil && sh == nil {
		// Nothing stored: the revision is not there to hold them. (In
		// a cluster it is, and this gateway runs it when it follows.)
		sections.putBack()
		return local, st, err
	}
	sections.audit(in.o.Audit)
	return local, st, err
}

// startRunLocked starts the run of rev over this gateway's assigned
// boards, storing the revision (a copy, in a cluster), the run and its
// boards at once. e.mu is held and no run is active.
func (in *Installer) startRunLocked(rev Revision, d *Description) (Revision, RunStatus, error) {
	e := &in.eng
	ts, errs, _ := in.Targets(d)
	now := in.o.Clock.Now().UTC()
	ids := make([]string, 0, len(ts)+len(errs))
	for id := range ts {
		ids = append(ids, id)
	}
	for id := range errs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var strat Strategy
	if d.Rollout != nil {
		strat = *d.Rollout
	}
	strat = strat.normalised(len(ids))
	run := Run{ID: e.lastRun + 1, Revision: rev.N, Who: rev.Who, Author: rev.Author, State: RunRunning, Strategy: strat, Created: now, Updated: now}
	for i := 0; i < len(ids); i += strat.WaveSize {
		run.Waves = append(run.Waves, ids[i:min(i+strat.WaveSize, len(ids))])
	}
	local := rev
	local.Run = run.ID
	kv := map[string]any{revKey(rev.N): local, runKey(run.ID): run, currentKey: rev.N}
	rm := &runMem{r: run, boards: map[string]*RunBoard{}, working: map[string]bool{}, desc: d}
	for w, wave := range run.Waves {
		for _, id := range wave {
			b := &RunBoard{Run: run.ID, Board: id, Wave: w, Phase: PhasePending, Updated: now}
			if err := errs[id]; err != nil {
				b.Phase, b.Error = PhaseFailed, err.Error()
			}
			rm.boards[id] = b
			kv[runBoardKey(run.ID, id)] = b
		}
	}
	if err := in.st.Batch(kv); err != nil {
		return Revision{}, RunStatus{}, err
	}
	e.lastRev, e.lastRun, e.active = rev.N, run.ID, rm
	e.coverRev, e.covered = rev.N, map[string]bool{}
	for id := range rm.boards {
		e.covered[id] = true
	}
	e.poke()
	return local, statusOf(rm), nil
}

func statusOf(rm *runMem) RunStatus {
	st := RunStatus{Run: rm.r, Phases: map[string]int{}, Boards: len(rm.boards)}
	st.Waves = slices.Clone(st.Waves)
	for _, b := range rm.boards {
		st.Phases[b.Phase]++
		if Terminal(b.Phase) {
			st.Done++
		}
	}
	return st
}

// RunStatus returns run id's state.
func (in *Installer) RunStatus(id int) (RunStatus, error) {
	e := &in.eng
	e.mu.Lock()
	if e.active != nil && e.active.r.ID == id {
		defer e.mu.Unlock()
		return statusOf(e.active), nil
	}
	e.mu.Unlock()
	var r Run
	ok, err := in.st.Get(runKey(id), &r)
	if err != nil {
		return RunStatus{}, err
	}
	if !ok {
		return RunStatus{}, fmt.Errorf("%w: run %d", ErrNotFound, id)
	}
	rm, err := in.eng.loadRun(r)
	if err != nil {
		return RunStatus{}, err
	}
	return statusOf(rm), nil
}

// RunBoards returns a run's boards, by wave then id.
func (in *Installer) RunBoards(id int) ([]RunBoard, error) {
	var out []RunBoard
	prefix := fmt.Sprintf("rb/%08d/", id)
	e := &in.eng
	e.mu.Lock()
	if e.active != nil && e.active.r.ID == id {
		for _, b := range e.active.boards {
			out = append(out, *b)
		}
		e.mu.Unlock()
	} else {
		e.mu.Unlock()
		err := in.st.Scan(prefix, prefix+"\xff", false, func(_ string, raw []byte) (bool, error) {
			var b RunBoard
			if err := json.Unmarshal(raw, &b); err != nil {
				return false, err
			}
			out = append(out, b)
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b RunBoard) int {
		if a.Wave != b.Wave {
			return a.Wave - b.Wave
		}
		return strings.Compare(a.Board, b.Board)
	})
	return out, nil
}

// ActiveRun returns the unfinished run's id (0 when none).
func (in *Installer) ActiveRun() int {
	e := &in.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == nil {
		return 0
	}
	return e.active.r.ID
}

// Pause stops starting boards in the active run; boards applying finish.
func (in *Installer) Pause(id int, reason string) (RunStatus, error) {
	return in.setState(id, func(r *Run) error {
		if r.State != RunRunning {
			return fmt.Errorf("%w: run %d is %s", ErrState, id, r.State)
		}
		r.State, r.Reason = RunPaused, cmp.Or(reason, "paused by an operator")
		return nil
	})
}

// Resume continues a paused run; the failures so far are accepted.
func (in *Installer) Resume(id int) (RunStatus, error) {
	return in.setState(id, func(r *Run) error {
		if r.State != RunPaused {
			return fmt.Errorf("%w: run %d is %s", ErrState, id, r.State)
		}
		r.State, r.Reason = RunRunning, "resumed by an operator"
		r.AckFailed = 0
		for _, b := range in.eng.active.boards {
			if b.Phase == PhaseFailed {
				r.AckFailed++
			}
		}
		return nil
	})
}

// Abort stops the run: no board starts; boards applying finish their
// apply (each is safe to stop only between its steps, which it does on
// its own when cut off).
func (in *Installer) Abort(id int, reason string) (RunStatus, error) {
	return in.setState(id, func(r *Run) error {
		if r.State != RunRunning && r.State != RunPaused {
			return fmt.Errorf("%w: run %d is %s", ErrState, id, r.State)
		}
		r.State, r.Reason = RunAborted, cmp.Or(reason, "aborted by an operator")
		return nil
	})
}

// setState changes the active run durably.
func (in *Installer) setState(id int, change func(*Run) error) (RunStatus, error) {
	e := &in.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == nil || e.active.r.ID != id {
		if _, err := in.RunStatusStored(id); err != nil {
			return RunStatus{}, err
		}
		return RunStatus{}, fmt.Errorf("%w: run %d is finished", ErrState, id)
	}
	next := e.active.r
	if err := change(&next); err != nil {
		return RunStatus{}, err
	}
	next.Updated = in.o.Clock.Now().UTC()
	if err := in.st.Batch(map[string]any{runKey(id): next}); err != nil {
		return RunStatus{}, err
	}
	e.active.r = next
	e.poke()
	return statusOf(e.active), nil
}

// RunStatusStored reads a run's record from the store.
func (in *Installer) RunStatusStored(id int) (Run, error) {
	var r Run
	ok, err := in.st.Get(runKey(id), &r)
	if err != nil {
		return Run{}, err
	}
	if !ok {
		return Run{}, fmt.Errorf("%w: run %d", ErrNotFound, id)
	}
	return r, nil
}

// decision is what the engine does next with a run: a state change
// (with its reason), a wave change, boards to start, whether it is
// finished.
type decision struct {
	state  string
	reason string
	wave   int
	start  []string
	cancel []string
	finish bool
}

// decide looks at a run and its boards (working: boards being applied
// now) and says what to do. It is pure: no I/O, no clock.
func decide(r Run, boards map[string]*RunBoard, working map[string]bool) decision {
	d := decision{state: r.State, reason: r.Reason, wave: r.Wave}
	switch r.State {
	case RunAborted:
		for _, id := range slices.Sorted(mapsKeys(boards)) {
			if b := boards[id]; !Terminal(b.Phase) && !working[id] {
				d.cancel = append(d.cancel, id)
			}
		}
		d.finish = len(working) == 0
		return d
	case RunPaused:
		return d
	case RunDone:
		d.finish = true
		return d
	}
	var fin, failed int
	for _, b := range boards {
		if Terminal(b.Phase) && b.Phase != PhaseCancelled {
			fin++
		}
		if b.Phase == PhaseFailed {
			failed++
		}
	}
	s := r.Strategy
	if why := rollout.OverallFailure(failed, fin, r.AckFailed, min(s.MinSample, len(boards)), s.FailureThreshold); why != "" {
		d.state, d.reason = RunPaused, why
		return d
	}
	for d.wave < len(r.Waves) {
		wave := r.Waves[d.wave]
		left := 0
		for _, id := range wave {
			if !Terminal(boards[id].Phase) {
				left++
			}
		}
		if left > 0 {
			break
		}
		d.wave++
	}
	if d.wave >= len(r.Waves) {
		d.state, d.reason, d.finish = RunDone, "every board finished", len(working) == 0
		return d
	}
	if d.wave != r.Wave {
		d.reason = fmt.Sprintf("wave %d of %d", d.wave+1, len(r.Waves))
	}
	inFlight := len(working)
	for _, id := range r.Waves[d.wave] {
		if inFlight >= s.MaxInFlight {
			break
		}
		if b := boards[id]; b.Phase == PhasePending || (b.Phase == PhaseApplying && !working[id]) {
			d.start = append(d.start, id)
			inFlight++
		}
	}
	return d
}

// windowClosed begins a run's reason while its window holds boards back.
const windowClosed = "outside the window"

// windowed holds back the boards d would start while the run's window
// (Strategy.Window) is closed at now: pending boards wait; a board found
// applying after a restart (it had started) goes on. The run's reason
// says when the window next opens, and is cleared once it has.
func windowed(d *decision, r Run, boards map[string]*RunBoard, now time.Time) {
	w := r.Strategy.Window
	if w == nil || d.state != RunRunning {
		return
	}
	if w.Open(now) {
		if strings.HasPrefix(d.reason, windowClosed) {
			d.reason = fmt.Sprintf("wave %d of %d", d.wave+1, len(r.Waves))
		}
		return
	}
	held := 0
	kept := d.start[:0:0]
	for _, id := range d.start {
		if boards[id].Phase == PhasePending {
			held++
			continue
		}
		kept = append(kept, id)
	}
	d.start = kept
	if held == 0 {
		return
	}
	d.reason = windowClosed + ", it never opens again"
	if next := w.Next(now); !next.IsZero() {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			loc = time.UTC
		}
		d.reason = windowClosed + "; it next opens " + next.In(loc).Format("2006-01-02 15:04 MST")
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Run drives the active run until ctx ends, then waits for its board
// workers. A run cut off by a crash carries on from its records: boards
// found applying are applied again (an apply plans from what the board
// holds, so doing it twice is harmless).
func (in *Installer) Run(ctx context.Context) error {
	e := &in.eng
	var wg sync.WaitGroup
	defer wg.Wait()
	until := in.o.Clock.Now().Add(in.o.StartSettle)
	e.settled.Store(&until)
	if in.o.CheckEvery > 0 {
		wg.Go(func() { in.watchLoop(ctx) })
	}
	if in.o.Shared != nil {
		wg.Go(func() { in.followLoop(ctx) })
	}
	t := in.o.Clock.NewTicker(in.o.Tick)
	defer t.Stop()
	for {
		if err := in.step(ctx, &wg); err != nil && ctx.Err() == nil {
			in.o.Log.Error("installation: scheduling", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-e.wake:
		}
	}
}

// step decides once, writes the decision, then starts the workers.
func (in *Installer) step(ctx context.Context, wg *sync.WaitGroup) error {
	e := &in.eng
	e.mu.Lock()
	rm := e.active
	if rm == nil {
		e.mu.Unlock()
		return nil
	}
	d := decide(rm.r, rm.boards, rm.working)
	now := in.o.Clock.Now().UTC()
	windowed(&d, rm.r, rm.boards, now)
	kv := map[string]any{}
	next := rm.r
	if d.state != next.State || d.wave != next.Wave || d.reason != next.Reason || d.finish {
		next.State, next.Reason, next.Wave, next.Updated = d.state, d.reason, d.wave, now
		next.Finished = d.finish
		kv[runKey(next.ID)] = next
	}
	cancelled := map[string]*RunBoard{}
	for _, id := range d.cancel {
		b := *rm.boards[id]
		b.Phase, b.Updated = PhaseCancelled, now
		cancelled[id] = &b
		kv[runBoardKey(rm.r.ID, id)] = &b
	}
	started := map[string]*RunBoard{}
	for _, id := range d.start {
		// Applying is kept in memory only: a board found pending after a
		// crash is applied just as one found applying would be (an apply
		// plans from what the board holds), so the mark would cost a
		// write per board and buy nothing.
		b := *rm.boards[id]
		b.Phase, b.Updated, b.Error = PhaseApplying, now, ""
		started[id] = &b
	}
	if len(kv) > 0 {
		// Written before acted on: state changes and cancellations.
		if err := in.j.Write(context.Background(), kv); err != nil {
			e.mu.Unlock()
			return err
		}
	}
	rm.r = next
	for id, b := range cancelled {
		rm.boards[id] = b
	}
	for id, b := range started {
		rm.boards[id] = b
		rm.working[id] = true
	}
	if next.Finished {
		e.active = nil
	}
	desc := rm.desc
	e.mu.Unlock()
	for id := range started {
		wg.Go(func() {
			in.applyInRun(ctx, rm, desc, id)
			e.mu.Lock()
			delete(rm.working, id)
			e.mu.Unlock()
			e.poke()
		})
	}
	return nil
}

// applyInRun applies one board of a run and records how it ended.
func (in *Installer) applyInRun(ctx context.Context, rm *runMem, desc *Description, id string) {
	e := &in.eng
	e.mu.Lock()
	runID, rev, who, author := rm.r.ID, rm.r.Revision, rm.r.Who, rm.r.Author
	e.mu.Unlock()
	b := RunBoard{Run: runID, Board: id, Phase: PhaseInSync}
	view, err := in.awaitBoard(ctx, id)
	var diff *Diff
	if err == nil {
		var t Target
		var ok bool
		t, ok, err = desc.Resolve(view)
		switch {
		case err != nil:
		case !ok:
			b.Phase, b.Summary = PhaseCancelled, "no longer assigned"
		case !view.Online:
			err = fmt.Errorf("%w: board %s is offline (%s)", ErrUnreachable, id, view.OfflineReason)
		default:
			diff, err = in.ApplyBoard(ctx, t, rev, in.o.Step)
		}
	}
	if ctx.Err() != nil {
		return // the gateway stops: the board stays applying and is taken up again
	}
	if diff != nil {
		b.Summary, b.Requests = diff.Summary(), diff.Requests
	}
	code := auth.CodeOK
	switch {
	case err == nil:
	case errors.Is(err, ErrNeedsLAN):
		b.Phase, b.Error, code = PhaseNeedsLAN, err.Error(), "FailedPrecondition"
	case errors.Is(err, ErrUnreachable):
		b.Phase, b.Error, code = PhaseUnreachable, err.Error(), "Unavailable"
	default:
		b.Phase, b.Error, code = PhaseFailed, err.Error(), "Aborted"
	}
	b.Updated = in.o.Clock.Now().UTC()
	// The board's slot is given to the next board as soon as its record
	// is queued, not once it is on disk: the run's own state (its end)
	// is queued later and so never written before it, and a board whose
	// record a crash loses is only applied again (an apply plans from
	// what the board holds). Waiting for each group commit held 20 slots
	// for a disk sync each time and was most of a re-apply's cost.
	e.mu.Lock()
	b.Wave = rm.boards[id].Wave
	saved := in.j.Add(map[string]any{runBoardKey(runID, id): &b})
	rm.boards[id] = &b
	delete(rm.working, id)
	e.mu.Unlock()
	e.poke()
	if err := <-saved; err != nil {
		in.o.Log.Error("installation: recording a board", "board", id, "err", err)
		return
	}
	if state, ok := phaseState(b.Phase); ok && in.o.Shared != nil {
		in.publish(BoardPlan{Board: id, State: state, Summary: cmp.Or(b.Error, b.Summary), Error: b.Error}, rev, runID, b.Updated)
	}
	if in.o.Audit != nil && (diff == nil || !diff.Empty() || err != nil) {
		reason := b.Summary
		if b.Error != "" {
			reason = b.Error
		}
		a := author.attrs(who, rev, in.gateway(), "installation.apply_board")
		a.Boards = []string{id}
		in.o.Audit.Audit(auth.Record{Time: b.Updated, Allowed: true, Code: code, Reason: reason, Attributes: a})
	}
}

// awaitBoard finds board id in the fleet. In the StartSettle period after
// Run started, a board not online yet is waited for: a gateway restarted
// mid-run finds its boards again before it gives up on them.
func (in *Installer) awaitBoard(ctx context.Context, id string) (fleet.BoardView, error) {
	for {
		view, err := boardView(in.o.Fleet, id)
		if err == nil && view.Online {
			return view, nil
		}
		until := in.eng.settled.Load()
		if until == nil || !in.o.Clock.Now().Before(*until) {
			return view, err
		}
		if err := in.sleep(ctx, 50*time.Millisecond); err != nil {
			return view, err
		}
	}
}

// boardView finds board id in the fleet.
func boardView(f Fleet, id string) (fleet.BoardView, error) {
	vs := f.Boards(fleet.Filter{IDs: []string{id}})
	if len(vs) == 0 {
		return fleet.BoardView{}, fmt.Errorf("%w: board %s is not known to the fleet", ErrUnreachable, id)
	}
	return vs[0], nil
}
