package main

import (
	"context"

	"github.com/holofleet/holofleet/firmware/buildinfo"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metrics"
)

// newMetrics registers the gateway's collectors on the registry behind
// /metrics: the fleet, its lines, each board's health and link counters,
// command latency (fed by the fleet core's observer), timed fires' skew
// and lateness, and the build. Its
// goroutine follows the fleet's events and polls the boards' GET /link.
func newMetrics(_ context.Context, e *env) (component, error) {
	boards := metrics.NewBoards(e.fleet, metrics.BoardsOptions{Log: e.log.With("component", "metrics")})
	cmds := metrics.NewCommands()
	fires := metrics.NewFires()
	err := metrics.Register(e.registerer,
		metrics.NewBuildInfo(buildinfo.Version),
		metrics.NewFleet(e.fleet),
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
