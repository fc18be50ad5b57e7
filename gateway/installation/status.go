package installation

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// Status is the installation as it stands: the current revision, the
// run applying it (if one is unfinished), and every assigned board's
// state.
type Status struct {
	Revision Revision    `json:"revision"`
	Run      *RunStatus  `json:"run,omitempty"`
	Boards   []BoardPlan `json:"boards"`
	// Sections are the gateway sections the revision holds (the DMX
	// patch, the cue lists): in sync, or drifted with what differs.
	Sections []SectionPlan `json:"sections,omitempty"`
	// Counts are the boards per state.
	Counts map[string]int `json:"counts"`
}

// Status plans the current revision against every assigned board and
// overlays what the runs know: a board being applied is "applying"; a
// board whose last apply failed and that is still not in sync is
// "failed" with the reason. Before any apply it is ErrNotFound. In a
// cluster it lists the boards of every gateway: this gateway's planned
// now, the others' as their gateways last published them.
func (in *Installer) Status(ctx context.Context) (Status, error) {
	rev, d, err := in.Current()
	if err != nil {
		return Status{}, err
	}
	rev.Description = nil
	st := Status{Revision: rev, Counts: map[string]int{}}
	at := in.o.Clock.Now()
	plans := in.Plan(ctx, d)
	last := map[string]RunBoard{}
	// The run that applied the revision here: in a cluster, a revision
	// this gateway has not run yet names the applying gateway's run,
	// which is not this gateway's run of that number.
	if rs, err := in.RunStatus(rev.Run); rev.Run != 0 && err == nil && rs.Revision == rev.N {
		bs, err := in.RunBoards(rev.Run)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Status{}, err
		}
		for _, b := range bs {
			last[b.Board] = b
		}
		if !rs.Finished {
			st.Run = &rs
		}
	}
	for i, bp := range plans {
		b, ok := last[bp.Board]
		switch {
		case !ok:
		case b.Phase == PhaseApplying && st.Run != nil:
			bp.State = StateApplying
		case (b.Phase == PhaseFailed || b.Phase == PhaseNeedsLAN) && bp.State == StateDrifted:
			bp.State = StateFailed
			if b.Phase == PhaseNeedsLAN {
				bp.State = StateNeedsLAN
			}
			bp.Error = b.Error
		}
		plans[i] = bp
		st.Counts[bp.State]++
	}
	st.Boards = plans
	if in.o.Shared != nil {
		if err := in.mergeShared(ctx, &st, at); err != nil {
			return Status{}, err
		}
		slices.SortFunc(st.Boards, func(a, b BoardPlan) int { return strings.Compare(a.Board, b.Board) })
	}
	st.Sections = in.PlanSections(d)
	return st, nil
}
