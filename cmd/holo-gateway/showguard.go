package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// The rollouts' show guards (docs/rollouts.md "Never during a show"):
// the cue engine and the DMX input tell the rollout engine which boards a
// show is using, so that no rollout restarts them mid-show. The rollout
// engine is built before either (newRollouts runs first), so each guard
// holds its engine through an atomic pointer that newCues and newDMX set;
// until then, and when DMX is off, a guard finds nothing busy.

// showEngines are the engines the guards ask, set as they are built.
type showEngines struct {
	cues atomic.Pointer[cue.Engine]
	dmx  atomic.Pointer[dmx.Engine]
}

// guards returns the show guards over the engines, reading boards from f.
func (s *showEngines) guards(f boardViews) []rollout.ShowGuard {
	return []rollout.ShowGuard{&cueGuard{fleet: f, eng: &s.cues}, &dmxGuard{fleet: f, eng: &s.dmx}}
}

// boardViews is the part of the fleet core the guards read.
type boardViews interface {
	Boards(f fleet.Filter) []fleet.BoardView
}

// cueGuard: a board is busy while a cue list with an action on it is in
// the middle of a show (cue.Engine.Live).
type cueGuard struct {
	fleet boardViews
	eng   *atomic.Pointer[cue.Engine]
}

// Busy implements rollout.ShowGuard.
func (g *cueGuard) Busy(_ context.Context, board string) string {
	eng := g.eng.Load()
	if eng == nil {
		return ""
	}
	live := eng.Live()
	if len(live) == 0 {
		return ""
	}
	v, ok := boardView(g.fleet, board)
	if !ok {
		return ""
	}
	for _, l := range live {
		for _, sel := range l.Selectors {
			if selects(sel, v) {
				return fmt.Sprintf("cue list %q is running with actions on it (%s)", l.List, l.Why)
			}
		}
	}
	return ""
}

// dmxGuard: a board is busy while DMX input is live on a universe that
// drives it through the patch (dmx.Engine.Active).
type dmxGuard struct {
	fleet boardViews
	eng   *atomic.Pointer[dmx.Engine]
}

// Busy implements rollout.ShowGuard.
func (g *dmxGuard) Busy(_ context.Context, board string) string {
	eng := g.eng.Load()
	if eng == nil {
		return ""
	}
	active := eng.Active()
	if len(active) == 0 {
		return ""
	}
	v, ok := boardView(g.fleet, board)
	if !ok {
		return ""
	}
	for _, in := range active {
		if drives(in.Fixture, v) {
			return fmt.Sprintf("DMX input is active on universe %d, its patch (%s; %s)", in.Fixture.Universe,
				in.Fixture.Target(), strings.Join(in.Sources, ", "))
		}
	}
	return ""
}

var (
	_ rollout.ShowGuard = (*cueGuard)(nil)
	_ rollout.ShowGuard = (*dmxGuard)(nil)
)

func boardView(f boardViews, id string) (fleet.BoardView, bool) {
	vs := f.Boards(fleet.Filter{IDs: []string{id}})
	if len(vs) != 1 {
		return fleet.BoardView{}, false
	}
	return vs[0], true
}

// selects reports whether sel reaches board v, as the fleet resolves a
// selector: every board, its id, one of its groups, or all of the labels.
func selects(sel fleet.Selector, v fleet.BoardView) bool {
	if slices.Contains(sel.Except, v.ID) {
		return false
	}
	if sel.All || slices.Contains(sel.Boards, v.ID) {
		return true
	}
	for _, g := range sel.Groups {
		if slices.Contains(v.Groups, g) {
			return true
		}
	}
	return len(sel.Labels) > 0 && hasLabels(v, sel.Labels)
}

// drives reports whether fixture f's target is board v.
func drives(f dmx.Fixture, v fleet.BoardView) bool {
	switch {
	case f.Group != 0:
		return slices.Contains(v.Groups, f.Group)
	case f.Board != "":
		return f.Board == v.ID
	case f.Line != "":
		return f.Line == v.Line && f.LineAddress == v.Address
	}
	k, val, ok := strings.Cut(f.Label, "=")
	return ok && hasLabels(v, map[string]string{k: val})
}

func hasLabels(v fleet.BoardView, want map[string]string) bool {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got, ok := v.Labels[k]; !ok || got != want[k] {
			return false
		}
	}
	return true
}
