package installation

// The installation shared by the gateways of a cluster. Without
// Options.Shared a gateway keeps everything in its own store, as
// before; with it (gateway/cluster's Installation):
//
//   - revisions and the current revision live in the cluster: a new
//     revision N is created only when no gateway created N first
//     (ErrRevisionTaken for the loser, who stores nothing);
//   - content files go up to the cluster when added and come down once
//     into each gateway's own content store when it lacks them;
//   - each gateway runs every new current revision over the boards it
//     owns (Targets leaves the others out), started when it sees the
//     revision become current, its run kept in its own store as before;
//   - each gateway publishes its findings per board, so that Status on
//     any gateway lists every board of the installation.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// ErrRevisionTaken: another gateway of the cluster stored the same
// revision number first; nothing was stored or started.
var ErrRevisionTaken = errors.New("installation: revision taken by another gateway")

// BoardState is a gateway's last finding on a board it owns, as the
// cluster keeps it for every gateway's Status.
type BoardState struct {
	BoardPlan
	Gateway  string    `json:"gateway"`
	Revision int       `json:"revision"`
	Run      int       `json:"run,omitempty"`
	Checked  time.Time `json:"checked"`
}

// Shared is what the installation keeps in a cluster of gateways.
type Shared interface {
	// Gateway is this gateway's name.
	Gateway() string
	// Owns reports whether this gateway owns (applies to) board id.
	Owns(id string) bool
	// CreateRevision stores r as revision r.N, only when no revision N
	// exists (ErrRevisionTaken otherwise, nothing stored), and makes it
	// current.
	CreateRevision(ctx context.Context, r Revision) error
	// Revision returns revision n (ErrNotFound when none).
	Revision(ctx context.Context, n int) (Revision, error)
	// Latest returns the highest revision stored and the current one
	// (0, 0 before any).
	Latest(ctx context.Context) (last, current int, err error)
	// History lists the revisions, newest first, without descriptions.
	History(ctx context.Context) ([]Revision, error)
	// WatchCurrent sends the current revision when it is first read and
	// each time it changes, until ctx ends (a slow reader gets the
	// latest).
	WatchCurrent(ctx context.Context) <-chan int
	// PutBoard publishes this gateway's finding on one of its boards;
	// Boards reads every gateway's findings.
	PutBoard(ctx context.Context, s BoardState) error
	// DropBoard removes this gateway's finding on a board the current
	// revision no longer assigns.
	DropBoard(ctx context.Context, board string) error
	Boards(ctx context.Context) ([]BoardState, error)
	// ShareContent puts content sha of local in the cluster unless it is
	// there; FetchContent brings sha from the cluster into local
	// (ErrNotFound when no gateway shared it).
	ShareContent(ctx context.Context, sha string, local *Contents) error
	FetchContent(ctx context.Context, sha string, local *Contents) error
}

// sharedTimeout bounds one request to the cluster.
const sharedTimeout = 30 * time.Second

// owns reports whether this gateway applies to board id: always when it
// runs alone.
func (in *Installer) owns(id string) bool {
	return in.o.Shared == nil || in.o.Shared.Owns(id)
}

// ensureContent makes every content of d local, fetching from the
// cluster what this gateway lacks.
func (in *Installer) ensureContent(ctx context.Context, d *Description) error {
	if in.o.Shared == nil {
		return nil
	}
	for name, c := range d.Content {
		if c.SHA256 == "" {
			continue
		}
		if _, ok := in.o.Contents.Has(c.SHA256); ok {
			continue
		}
		if err := in.o.Shared.FetchContent(ctx, c.SHA256, in.o.Contents); err != nil {
			return fmt.Errorf("%w: content %s (%s): %v", ErrContent, name, c.SHA256, err)
		}
	}
	return nil
}

// shareContent puts every content of d in the cluster.
func (in *Installer) shareContent(ctx context.Context, d *Description) error {
	if in.o.Shared == nil {
		return nil
	}
	for name, c := range d.Content {
		if err := in.o.Shared.ShareContent(ctx, c.SHA256, in.o.Contents); err != nil {
			return fmt.Errorf("%w: sharing content %s with the cluster: %v", ErrContent, name, err)
		}
	}
	return nil
}

// AddContent keeps a content file in the gateway's store and, in a
// cluster, in the cluster's.
func (in *Installer) AddContent(ctx context.Context, sha string) error {
	if in.o.Shared == nil {
		return nil
	}
	return in.o.Shared.ShareContent(ctx, sha, in.o.Contents)
}

// publish records this gateway's finding on a board in the cluster.
func (in *Installer) publish(bp BoardPlan, rev, run int) {
	if in.o.Shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	s := BoardState{BoardPlan: bp, Gateway: in.o.Shared.Gateway(), Revision: rev, Run: run, Checked: in.o.Clock.Now().UTC()}
	s.BoardPlan.Gateway = s.Gateway
	if err := in.o.Shared.PutBoard(ctx, s); err != nil {
		in.o.Log.Warn("installation: publishing a board's state to the cluster", "board", bp.Board, "err", err)
	}
}

// followLoop runs each new current revision of the cluster over this
// gateway's boards: the gateway that stored it started its own run; the
// others start theirs when they see it become current (or, joining
// later, when they first read it). A run of an older revision still
// going here is aborted first (its boards finish the step they are in).
func (in *Installer) followLoop(ctx context.Context) {
	ch := in.o.Shared.WatchCurrent(ctx)
	t := in.o.Clock.NewTicker(in.o.Tick)
	defer t.Stop()
	want := 0
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-ch:
			if !ok {
				return
			}
			want = n
		case <-t.C():
		}
		if want > 0 && in.follow(ctx, want) {
			want = 0
		}
	}
}

// follow starts the run of revision n unless this gateway ran it; false
// means try again later.
func (in *Installer) follow(ctx context.Context, n int) bool {
	e := &in.eng
	e.mu.Lock()
	if e.active != nil && e.active.r.Revision == n {
		e.mu.Unlock()
		in.sharedCur.Store(int64(n))
		return true // this gateway's apply (or a run resumed at start)
	}
	e.mu.Unlock()
	rev, err := in.o.Shared.Revision(ctx, n)
	if errors.Is(err, ErrInvalid) {
		// Not a revision any gateway stored (unsigned): never applied.
		in.o.Log.Error("installation: the cluster's current revision is refused; not applied", "revision", n, "err", err)
		return true
	}
	if err != nil {
		in.o.Log.Warn("installation: reading the cluster's current revision", "revision", n, "err", err)
		return false
	}
	if in.ranLocally(rev) {
		in.sharedCur.Store(int64(n))
		return true
	}
	e.mu.Lock()
	if e.active != nil {
		abort := 0
		if e.active.r.State != RunAborted {
			abort = e.active.r.ID
		}
		e.mu.Unlock()
		if abort != 0 {
			if _, err := in.Abort(abort, fmt.Sprintf("revision %d is current (applied on another gateway)", n)); err != nil && !errors.Is(err, ErrState) {
				in.o.Log.Warn("installation: aborting a superseded run", "run", abort, "err", err)
			}
		}
		return false // once it has finished
	}
	e.mu.Unlock()
	d, err := Parse(fmt.Sprintf("revision %d", n), rev.Description)
	if err != nil {
		in.o.Log.Error("installation: the cluster's current revision does not parse; not applied", "revision", n, "err", err)
		return true
	}
	if err := in.ensureContent(ctx, d); err != nil {
		in.o.Log.Warn("installation: fetching the current revision's content", "revision", n, "err", err)
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active != nil {
		return false
	}
	in.sharedCur.Store(int64(n))
	if in.ranLocally(rev) {
		return true
	}
	_, st, err := in.startRunLocked(rev, d)
	if err != nil {
		in.o.Log.Error("installation: starting the run of the cluster's revision", "revision", n, "err", err)
		return false
	}
	go in.checkAll()
	in.o.Log.Info("installation: applying the cluster's current revision to this gateway's boards", "revision", n, "run", st.ID, "boards", st.Boards, "by", rev.Who)
	return true
}

// ranLocally reports whether this gateway's store holds a run of
// revision rev: its copy of the revision, made when the run started, is
// the same revision (same author and time) (a gateway that kept revisions of its own before it
// joined the cluster may hold another under the same number).
func (in *Installer) ranLocally(rev Revision) bool {
	var local Revision
	ok, err := in.st.Get(revKey(rev.N), &local)
	return err == nil && ok && local.Who == rev.Who && local.When.Equal(rev.When)
}

// phaseState is the board state a run's terminal phase reports.
func phaseState(phase string) (string, bool) {
	switch phase {
	case PhaseInSync:
		return StateInSync, true
	case PhaseFailed:
		return StateFailed, true
	case PhaseUnreachable:
		return StateUnreachable, true
	case PhaseNeedsLAN:
		return StateNeedsLAN, true
	}
	return "", false
}

// mergeShared adds to st the boards other gateways own, from their
// published findings, and publishes this gateway's. A finding against
// an older revision than st's is reported drifted: the board is not
// known to hold the current one yet.
func (in *Installer) mergeShared(ctx context.Context, st *Status) error {
	sh := in.o.Shared
	mine := map[string]bool{}
	for i, bp := range st.Boards {
		bp.Gateway = sh.Gateway()
		st.Boards[i] = bp
		mine[bp.Board] = true
		in.publish(bp, st.Revision.N, in.latestRun())
	}
	all, err := sh.Boards(ctx)
	if err != nil {
		return err
	}
	for _, s := range all {
		if mine[s.Board] || s.Gateway == sh.Gateway() {
			continue // this gateway's finding is fresh above (or the board is no longer its own)
		}
		bp := s.BoardPlan
		bp.Gateway = s.Gateway
		if s.Revision != st.Revision.N {
			bp.State, bp.Diff = StateDrifted, nil
			bp.Summary = fmt.Sprintf("checked against revision %d by gateway %s; revision %d not yet", s.Revision, s.Gateway, st.Revision.N)
		}
		mine[s.Board] = true
		st.Boards = append(st.Boards, bp)
		st.Counts[bp.State]++
	}
	return nil
}

// latestRun is this gateway's latest run (0 before any).
func (in *Installer) latestRun() int {
	e := &in.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastRun
}

// uncovered reports, in a cluster, whether board id is one this
// gateway's run of revision rev did not take (the board was found, or
// taken over from another gateway, after the run started; or the
// gateway joined after the revision was applied), and marks it taken:
// such a board is applied when its check finds it drifted, once, as the
// run would have. Alone, a board found later waits for heal or the next
// apply, as before.
func (in *Installer) uncovered(rev int, id string) bool {
	if in.o.Shared == nil {
		return false
	}
	e := &in.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.coverRev != rev || e.covered[id] {
		return false // the run of rev took it (or takes it), or rev is not run here yet
	}
	e.covered[id] = true
	return true
}

// uncover forgets that board id was taken (its late apply failed).
func (in *Installer) uncover(id string) {
	e := &in.eng
	e.mu.Lock()
	delete(e.covered, id)
	e.mu.Unlock()
}

// drop removes this gateway's finding on board id from the cluster.
func (in *Installer) drop(id string) {
	if in.o.Shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	if err := in.o.Shared.DropBoard(ctx, id); err != nil {
		in.o.Log.Warn("installation: dropping a board's finding from the cluster", "board", id, "err", err)
	}
}

// checkAll has the drift watcher check every board of the fleet now (a
// new revision runs here: the cluster's findings follow at once).
func (in *Installer) checkAll() {
	now := in.o.Clock.Now()
	for _, v := range in.o.Fleet.Boards(fleet.Filter{}) {
		in.watch.schedule(v.ID, now)
	}
}
