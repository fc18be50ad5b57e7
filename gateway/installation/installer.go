package installation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation/boardstate"
	"github.com/holofleet/holofleet/store"
)

// Store keeps the installation's records (a store.Bucket by default).
// Batch writes every key or none (nil deletes) durably.
type Store interface {
	Get(key string, v any) (bool, error)
	Batch(puts map[string]any) error
	Scan(from, to string, reverse bool, fn func(key string, raw []byte) (bool, error)) error
}

// Bucket is the store bucket of the installation's records.
const Bucket = "installation"

// Options configure an Installer.
type Options struct {
	DB *store.DB
	// Store, when set, keeps the records instead of DB.
	Store    Store
	Fleet    Fleet
	Contents *Contents
	Clock    clock.Clock
	Log      *slog.Logger
	// Audit receives a record of every board an apply changed, with the
	// revision; nil keeps none.
	Audit auth.Auditor
	// BusyWait is how long a board's 409 busy is retried (default 10 s).
	BusyWait time.Duration
	// Parallel bounds the boards planned at once (default 16).
	Parallel int
	// Tick is how often the engine looks at a running apply (default
	// 100 ms); finished boards wake it sooner.
	Tick time.Duration
	// Step, when set, is told of every step of the applies the engine
	// runs, before it is done (progress; tests cut boards off there).
	Step StepFunc
	// CheckEvery is how often the drift watcher checks every assigned
	// board (default DefaultCheckEvery; negative: no watcher). Boards are
	// also checked Settle after they come online, restart, or report a
	// change of scenes, settings or link (DefaultSettle). A failed heal is
	// tried again after HealRetry (DefaultHealRetry).
	CheckEvery time.Duration
	Settle     time.Duration
	HealRetry  time.Duration
	// StartSettle is how long after Run starts a board of a run that is
	// not online yet is waited for rather than found unreachable
	// (default 10 s): a gateway restarted mid-run finds its boards first.
	StartSettle time.Duration
	// Shared, when set, keeps the revisions, content and board findings
	// in a cluster of gateways (shared.go); the installer then applies to
	// the boards this gateway owns only.
	Shared Shared
	// DMX and Cues, when set, hold the gateway sections of a description
	// (dmx.patch and cuelists): plan compares them, apply sets them,
	// export reads them. Without one, a description with its section is
	// refused before anything changes.
	DMX  PatchEngine
	Cues CueEngine
}

// Installer plans and applies installations over a fleet and keeps
// their revisions. Its methods are safe for concurrent use; Run drives
// applies until its context ends.
type Installer struct {
	o     Options
	st    Store
	cache StateCache
	// j writes run records and written records in group commits.
	j *store.Journal

	recMu sync.Mutex // orders written-record updates

	// boardMu holds one lock per board: a run and a heal never apply
	// to the same board at once.
	boardMu sync.Map // board -> *sync.Mutex

	eng   engine
	watch watcher

	curMu  sync.Mutex
	curRev Revision
	cur    *Description
	// sharedCur is the cluster's current revision this gateway took
	// (runs or ran), as last watched; a refused record is not taken.
	sharedCur atomic.Int64
}

// New returns an installer. Run must run for applies to progress.
func New(o Options) (*Installer, error) {
	if (o.DB == nil && o.Store == nil) || o.Fleet == nil || o.Contents == nil {
		return nil, errors.New("installation: DB (or Store), Fleet and Contents are required")
	}
	if o.Store == nil {
		o.Store = o.DB.Bucket(Bucket)
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.BusyWait = defaults.Positive(o.BusyWait, 10*time.Second)
	o.Parallel = defaults.Positive(o.Parallel, 16)
	o.Tick = defaults.Positive(o.Tick, 100*time.Millisecond)
	if o.CheckEvery == 0 {
		o.CheckEvery = DefaultCheckEvery
	}
	o.Settle = defaults.Positive(o.Settle, DefaultSettle)
	o.HealRetry = defaults.Positive(o.HealRetry, DefaultHealRetry)
	o.StartSettle = defaults.Positive(o.StartSettle, 10*time.Second)
	in := &Installer{o: o, st: o.Store}
	in.j = store.NewJournal(o.Store)
	in.cache, _ = o.Fleet.(StateCache)
	in.watch.init()
	if err := in.eng.init(in); err != nil {
		return nil, err
	}
	return in, nil
}

// Contents is the installer's content store.
func (in *Installer) Contents() *Contents { return in.o.Contents }

func (in *Installer) client(id string) *boardClient {
	return &boardClient{f: in.o.Fleet, cache: in.cache, id: id, busyWait: in.o.BusyWait, sleep: in.sleep}
}

func (in *Installer) sleep(ctx context.Context, d time.Duration) error {
	t := in.o.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

func writtenKey(board string) string { return "w/" + board }

// written reads what the gateway remembers writing to board.
func (in *Installer) written(board string) (Written, error) {
	var w Written
	if _, err := in.st.Get(writtenKey(board), &w); err != nil {
		return Written{}, err
	}
	if w.Files == nil {
		w.Files = map[string]WrittenFile{}
	}
	return w, nil
}

// Board states of a plan or status (package boardstate says what each
// means).
const (
	StateInSync      = boardstate.InSync
	StateDrifted     = boardstate.Drifted
	StateApplying    = boardstate.Applying
	StateUnreachable = boardstate.Unreachable
	StateFailed      = boardstate.Failed
	StateNeedsLAN    = boardstate.NeedsLAN
	StateUnassigned  = boardstate.Unassigned
)

// BoardPlan is one board's part of a plan or status.
type BoardPlan struct {
	Board   string `json:"board"`
	Profile string `json:"profile,omitempty"`
	State   string `json:"state"`
	// Summary is the diff in one line, or why the board failed.
	Summary string `json:"summary"`
	Diff    *Diff  `json:"diff,omitempty"`
	Error   string `json:"error,omitempty"`
	// Gateway is the gateway of the cluster that owns the board (empty
	// when the gateway runs alone).
	Gateway string `json:"gateway,omitempty"`
}

// Targets resolves d against the fleet's boards: every board some
// assignment gives a profile, by id. Conflicts come back per board. In a
// cluster (Options.Shared) only the boards this gateway owns count.
func (in *Installer) Targets(d *Description) (map[string]Target, map[string]error, []fleet.BoardView) {
	views := in.o.Fleet.Boards(fleet.Filter{})
	slices.SortFunc(views, func(a, b fleet.BoardView) int { return strings.Compare(a.ID, b.ID) })
	ts, errs := map[string]Target{}, map[string]error{}
	own := views[:0]
	for _, v := range views {
		if in.owns(v.ID) {
			own = append(own, v)
		}
	}
	views = own
	for _, v := range views {
		t, ok, err := d.Resolve(v)
		if err != nil {
			errs[v.ID] = err
			continue
		}
		if ok {
			ts[v.ID] = t
		}
	}
	return ts, errs, views
}

// PlanBoard compares one board with its target.
func (in *Installer) PlanBoard(ctx context.Context, t Target) (*Diff, error) {
	rec, err := in.written(t.Board)
	if err != nil {
		return nil, err
	}
	c := in.client(t.Board)
	d, err := c.plan(ctx, t, rec)
	if d != nil {
		d.Requests = c.n
	}
	return d, err
}

// Plan compares every assigned board with d (at most Options.Parallel
// at once) and tells what an apply would change. Nothing is written.
func (in *Installer) Plan(ctx context.Context, d *Description) []BoardPlan {
	ts, errs, views := in.Targets(d)
	online := map[string]bool{}
	for _, v := range views {
		online[v.ID] = v.Online
	}
	out := make([]BoardPlan, 0, len(ts)+len(errs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, in.o.Parallel)
	for id, err := range errs {
		out = append(out, BoardPlan{Board: id, State: StateFailed, Summary: err.Error(), Error: err.Error()})
	}
	for id, t := range ts {
		if !online[id] {
			out = append(out, BoardPlan{Board: id, Profile: t.Profile, State: StateUnreachable, Summary: "offline"})
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			bp := in.planOne(ctx, t)
			mu.Lock()
			out = append(out, bp)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b BoardPlan) int { return strings.Compare(a.Board, b.Board) })
	return out
}

func (in *Installer) planOne(ctx context.Context, t Target) BoardPlan {
	bp := BoardPlan{Board: t.Board, Profile: t.Profile}
	if in.o.Shared != nil {
		bp.Gateway = in.o.Shared.Gateway()
	}
	diff, err := in.PlanBoard(ctx, t)
	switch {
	case errors.Is(err, ErrUnreachable):
		bp.State, bp.Summary, bp.Error = StateUnreachable, "unreachable", err.Error()
	case err != nil:
		bp.State, bp.Summary, bp.Error = StateFailed, err.Error(), err.Error()
	case diff.Empty():
		bp.State, bp.Summary, bp.Diff = StateInSync, diff.Summary(), diff
		in.remember(t.Board, diff.seen)
	default:
		bp.State, bp.Summary, bp.Diff = StateDrifted, diff.Summary(), diff
		if diff.FilesNeedLAN && onlyLANFiles(diff) {
			bp.State = StateNeedsLAN
		}
		in.remember(t.Board, diff.seen)
	}
	return bp
}

// onlyLANFiles: what differs is files a line cannot carry.
func onlyLANFiles(d *Diff) bool {
	return len(d.Scenes) == 0 && len(d.Settings) == 0 && len(d.Files) > 0
}

// remember keeps what a plan confirmed (files hashed and found right)
// so the next plan need not hash them again.
func (in *Installer) remember(board string, w Written) {
	in.recMu.Lock()
	defer in.recMu.Unlock()
	var cur Written
	if _, err := in.st.Get(writtenKey(board), &cur); err != nil {
		return
	}
	if equalWritten(cur, w) {
		return
	}
	if err := in.j.Write(context.Background(), map[string]any{writtenKey(board): w}); err != nil {
		in.o.Log.Warn("installation: remembering a board's files", "board", board, "err", err)
	}
}

func equalWritten(a, b Written) bool {
	if len(a.Files) != len(b.Files) {
		return false
	}
	for p, x := range a.Files {
		if y, ok := b.Files[p]; !ok || x != y {
			return false
		}
	}
	return true
}

// ApplyBoard brings one board to its target: it plans, then carries out
// the plan in the safe order. rev is the revision it applies (for the
// log). It returns the plan it carried out.
func (in *Installer) ApplyBoard(ctx context.Context, t Target, rev int, step StepFunc) (*Diff, error) {
	mu, _ := in.boardMu.LoadOrStore(t.Board, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	rec, err := in.written(t.Board)
	if err != nil {
		return nil, err
	}
	c := in.client(t.Board)
	d, err := c.plan(ctx, t, rec)
	if err != nil {
		return d, err
	}
	save := func(w Written) error {
		return in.j.Write(context.Background(), map[string]any{writtenKey(t.Board): w})
	}
	if d.Empty() {
		// Nothing to write, and nothing new to remember unless the plan
		// hashed files (then once).
		in.remember(t.Board, d.seen)
		d.Requests = c.n
		return d, nil
	}
	err = c.apply(ctx, t, d, in.o.Contents, save, step)
	d.Requests = c.n
	if err != nil {
		return d, fmt.Errorf("board %s: %w", t.Board, err)
	}
	in.o.Log.Debug("installation: board applied", "board", t.Board, "revision", rev, "summary", d.Summary(), "requests", c.n)
	return d, nil
}
