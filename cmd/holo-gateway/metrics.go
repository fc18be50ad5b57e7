package main

import (
	"context"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metrics"
)

// newMetrics registers the gateway's collectors on the registry behind
// /metrics: the fleet, its lines, each board's health and link counters,
// command latency (fed by the fleet core's observer), timed fires' skew
// and lateness, and the build. Its
// goroutine follows the fleet's events and polls the boards' GET /link.
func newMetrics(_ context.Context, e *env) (component, error) {
	// In a cluster each gateway exports its own boards only (not those it
	// stands by for), every series labelled with its name (newCluster):
	// the gateway label of a board's series is its owner.
	var boardsSrc metrics.BoardsSource = e.fleet
	var fleetSrc metrics.FleetSource = e.fleet
	if e.cluster != nil {
		own := e.cluster.Own()
		boardsSrc, fleetSrc = own, ownFleet{Fleet: e.fleet, own: own}
	}
	boards := metrics.NewBoards(boardsSrc, metrics.BoardsOptions{Log: e.log.With("component", "metrics")})
	cmds := metrics.NewCommands()
	fires := metrics.NewFires()
	err := metrics.Register(e.registerer,
		metrics.NewBuildInfo(buildinfo.Version),
		metrics.NewFleet(fleetSrc),
		metrics.NewLines(func() map[string]fleet.LineStats { return lineStats(e.wiring) }),
		boards,
		cmds,
		fires,
	)
	if err != nil {
		return component{}, err
	}
	e.fleet.Observe(cmds.Observe)
	e.fleet.ObserveFire(fires.Observe)
	return component{name: "metrics", run: boards.Run}, nil
}

// lineStats reads the counters of the RS485 lines among the drivers.
func lineStats(w *wiring) map[string]fleet.LineStats {
	out := map[string]fleet.LineStats{}
	for _, d := range w.drivers {
		if l, ok := d.(fleet.Line); ok {
			out[l.Name()] = l.Stats()
		}
	}
	return out
}

// ownFleet is the fleet core's counters with the boards this gateway owns
// in its cluster.
type ownFleet struct {
	*fleet.Fleet
	own *cluster.Own
}

func (o ownFleet) Boards(f fleet.Filter) []fleet.BoardView { return o.own.Boards(f) }
