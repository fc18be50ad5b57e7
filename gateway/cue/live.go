package cue

import (
	"slices"
	"strconv"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// Live is a cue list in the middle of a show, for the rollouts' show
// guard (never restart a board a show is using): why it counts as
// running and the selectors of every action its cues have.
type Live struct {
	List string
	// Why says what the list is doing: "cue 3 waits to fire", "following
	// timecode", "standing by on cue 4 of 12".
	Why string
	// Selectors are the selectors of the list's actions (every cue's,
	// not only the cues still to come: a show in progress may jump
	// back).
	Selectors []fleet.Selector
}

// Live lists the cue lists in the middle of a show: a cue waiting for
// its moment or being fired, timecode being followed (locked or
// freewheeling), or a cue fired with the standby neither back on the
// first cue nor past the last (a show between two GOs). A list whose
// standby is set back to its first cue, or that ran to its end, is not
// live. It only reads.
func (e *Engine) Live() []Live {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Live
	for _, name := range sortedNames(e.lists) {
		ls := e.lists[name]
		why := ""
		switch n := len(ls.l.Cues); {
		case len(ls.runs) > 0:
			why = "cue " + string(ls.runs[0].cue.Number) + " waits to fire"
		case ls.chase.have && ls.chase.status != ChaseStopped:
			why = "following timecode (" + ls.chase.status + ")"
		case ls.last != nil && ls.standby > 0 && ls.standby < n:
			why = "standing by on cue " + string(ls.l.Cues[ls.standby].Number) + " of " + strconv.Itoa(n)
		}
		if why == "" {
			continue
		}
		l := Live{List: name, Why: why}
		for _, c := range ls.l.Cues {
			for _, a := range c.Actions {
				l.Selectors = append(l.Selectors, a.Selector)
			}
		}
		out = append(out, l)
	}
	return out
}

func sortedNames(m map[string]*list) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
