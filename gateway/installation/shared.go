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
	"slices"
	"strings"
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

// Newer reports whether finding s is newer than finding o on the same
// board: checked against a newer revision, or against the same revision
// by the same gateway later. A gateway's findings reach the cluster in
// no set order (a run superseded by a newer revision may publish its
// boards after the newer run did; a check that began before a board's
// apply may end after it), so the cluster keeps the newer.
func (s BoardState) Newer(o BoardState) bool {
	if s.Revision != o.Revision {
		return s.Revision > o.Revision
	}
	return s.Gateway != o.Gateway || !s.Checked.Before(o.Checked)
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
	// PutBoard publishes this gateway's finding on one of its boards,
	// unless the finding kept is newer (see Newer); Boards reads every
	// gateway's findings.
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
	// PlanOthers has every other gateway of the cluster plan desc (a
	// description as canonical JSON) over the boards it owns (Local's
	// PlanOwn); each board of a gateway that cannot be asked and that
	// desc assigns is reported unreachable, with why.
	PlanOthers(ctx context.Context, desc []byte) ([]BoardPlan, error)
	// ExportOthers has every other gateway export the boards it owns
	// (Local's ExportOwn): a description of them each, their content
	// shared with the cluster; the warnings name what could not be read,
	// and the gateways that could not be asked.
	ExportOthers(ctx context.Context) (descs [][]byte, warnings []string, err error)
	// Serve answers the other gateways' plan and export requests with
	// this gateway's installer.
	Serve(l Local)
}

// Local is what a gateway of a cluster answers for the others: a plan of
// a description over the boards it owns, an export of them.
type Local interface {
	PlanOwn(ctx context.Context, desc []byte) ([]BoardPlan, error)
	ExportOwn(ctx context.Context) (desc []byte, warnings []string, err error)
}

var _ Local = (*Installer)(nil)

// PlanOwn implements Local: Plan of desc over this gateway's boards.
func (in *Installer) PlanOwn(ctx context.Context, desc []byte) ([]BoardPlan, error) {
	d, err := FromJSON("plan", desc)
	if err != nil {
		return nil, err
	}
	return in.Plan(ctx, d), nil
}

// PlanInstallation is Plan over the whole installation: alone, the
// same; in a cluster, this gateway's boards planned here and every other
// gateway's planned by that gateway (asked through the cluster), each
// with its gateway, by board id.
func (in *Installer) PlanInstallation(ctx context.Context, d *Description) ([]BoardPlan, error) {
	out := in.Plan(ctx, d)
	sh := in.o.Shared
	if sh == nil {
		return out, nil
	}
	for i := range out {
		out[i].Gateway = sh.Gateway()
	}
	others, err := sh.PlanOthers(ctx, d.JSON())
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, bp := range out {
		seen[bp.Board] = true
	}
	for _, bp := range others {
		if !seen[bp.Board] {
			seen[bp.Board] = true
			out = append(out, bp)
		}
	}
	slices.SortFunc(out, func(a, b BoardPlan) int { return strings.Compare(a.Board, b.Board) })
	return out, nil
}

// ExportOwn implements Local: Export's reading of this gateway's own
// boards, as a description (canonical JSON; nil when no board could be
// read), its content shared with the cluster so that the asking gateway
// can fetch it.
func (in *Installer) ExportOwn(ctx context.Context) ([]byte, []string, error) {
	x := newExportSet()
	warnings := in.exportBoards(ctx, x)
	if len(x.d.Profiles) == 0 {
		return nil, warnings, nil
	}
	if err := in.shareContent(ctx, x.d); err != nil {
		return nil, warnings, err
	}
	return x.d.JSON(), warnings, nil
}

// exportOthers adds to x the boards the other gateways of the cluster
// own, as they exported them, their content fetched from the cluster.
func (in *Installer) exportOthers(ctx context.Context, x *exportSet) ([]string, error) {
	descs, warnings, err := in.o.Shared.ExportOthers(ctx)
	if err != nil {
		return nil, err
	}
	for _, raw := range descs {
		od, err := FromJSON("export", raw)
		if err == nil {
			err = in.ensureContent(ctx, od)
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("another gateway's export: %v", err))
			continue
		}
		x.merge(od)
	}
	return warnings, nil
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

// publish records this gateway's finding on a board in the cluster: what
// it saw at (when its check began, or when the board's apply ended). The
// cluster keeps the newer of two findings (Shared.PutBoard), so a check
// or a superseded run that publishes late does not hide a newer one.
func (in *Installer) publish(bp BoardPlan, rev, run int, at time.Time) {
	if in.o.Shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	s := BoardState{BoardPlan: bp, Gateway: in.o.Shared.Gateway(), Revision: rev, Run: run, Checked: at.UTC()}
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
// means try again later. A revision older than one this gateway took is
// done with: the watch told of it late (two gateways applied at once, and
// this one's newer revision started here first), and aborting the newer
// run for it would leave the boards that run had not started on the
// older revision.
func (in *Installer) follow(ctx context.Context, n int) bool {
	e := &in.eng
	e.mu.Lock()
	if in.superseded(n) {
		e.mu.Unlock()
		return true
	}
	if e.active != nil && e.active.r.Revision == n {
		e.mu.Unlock()
		in.takeCur(n)
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
		in.takeCur(n)
		return true
	}
	e.mu.Lock()
	if in.superseded(n) {
		e.mu.Unlock()
		return true
	}
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
	if in.superseded(n) {
		return true // a newer revision started here meanwhile
	}
	if e.active != nil {
		return false
	}
	in.takeCur(n)
	if in.ranLocally(rev) {
		return true
	}
	// The revision's gateway sections (DMX patch, cue lists) are the
	// installation's, not one gateway's: each gateway sets its own from
	// the revision it takes, as the applying gateway did, and audits
	// them for the revision's author.
	sections := in.followSections(d, rev)
	_, st, err := in.startRunLocked(rev, d)
	if err != nil {
		sections.putBack()
		in.o.Log.Error("installation: starting the run of the cluster's revision", "revision", n, "err", err)
		return false
	}
	sections.audit(in.o.Audit)
	go in.checkAll()
	in.o.Log.Info("installation: applying the cluster's current revision to this gateway's boards", "revision", n, "run", st.ID, "boards", st.Boards, "by", rev.Who)
	return true
}

// takeCur records that this gateway took the cluster's revision n (runs
// or ran it). It only ever rises: a late word of an older revision does
// not lower it.
func (in *Installer) takeCur(n int) {
	for {
		cur := in.sharedCur.Load()
		if int64(n) <= cur || in.sharedCur.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// superseded reports whether revision n is older than one this gateway
// took already.
func (in *Installer) superseded(n int) bool {
	return int64(n) < in.sharedCur.Load()
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
// published findings, and publishes this gateway's (planned from at). A
// finding against an older revision than st's is reported drifted: the
// board is not known to hold the current one yet.
func (in *Installer) mergeShared(ctx context.Context, st *Status, at time.Time) error {
	sh := in.o.Shared
	mine := map[string]bool{}
	for i, bp := range st.Boards {
		bp.Gateway = sh.Gateway()
		st.Boards[i] = bp
		mine[bp.Board] = true
		in.publish(bp, st.Revision.N, in.latestRun(), at)
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

// gateway is this gateway's name in its cluster ("" alone).
func (in *Installer) gateway() string {
	if in.o.Shared == nil {
		return ""
	}
	return in.o.Shared.Gateway()
}

// followSections sets revision rev's gateway sections on this gateway
// (a revision another gateway of the cluster stored). A section this
// gateway cannot hold (it runs no DMX or cue engine), or fails to set,
// is logged and left as it was: the boards are applied all the same.
func (in *Installer) followSections(d *Description, rev Revision) *sectionsSet {
	if d.DMX == nil && d.CueLists == nil {
		return &sectionsSet{}
	}
	err := in.checkSectionsApply(d)
	var set *sectionsSet
	if err == nil {
		set, err = in.applySections(d, rev)
	}
	if err != nil {
		in.o.Log.Error("installation: the cluster's revision's gateway sections are not set on this gateway", "revision", rev.N, "err", err)
		return &sectionsSet{}
	}
	return set
}
