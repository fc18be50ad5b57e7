package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
	"github.com/holofleet/holofleet/store"
)

// Readiness (GET /readyz, the gRPC health service) is the conjunction of
// the checks readyChecks lists:
//
//	store    the bbolt store answers a read transaction
//	drivers  every driver's Run has started and none has stopped
//	mqtt     the bridge is connected to its broker (only when MQTT runs)
//
// Components add their own check in component.ready.

// readyChecks are the API's readiness inputs.
func readyChecks(db *store.DB, drivers *driverStates, comps []component) map[string]api.ReadyCheck {
	checks := map[string]api.ReadyCheck{
		"store": api.ReadyFunc(func(context.Context) error {
			_, err := db.Bucket("readyz").Get("probe", &struct{}{})
			return err
		}),
		"drivers": api.ReadyFunc(func(context.Context) error { return drivers.ready() }),
	}
	for _, c := range comps {
		if c.ready != nil {
			checks[c.name] = c.ready
		}
	}
	return checks
}

// driverStates follows the drivers' Run: started, and stopped with what.
type driverStates struct {
	mu     sync.Mutex
	states []*driverState
}

type driverState struct {
	name    string
	started bool
	stopped bool
	err     error
}

func (s *driverStates) add(name string) *driverState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &driverState{name: name}
	s.states = append(s.states, st)
	return st
}

// run runs a driver's Run, recording that it started and why it stopped.
func (s *driverStates) run(st *driverState, ctx context.Context, run func(context.Context) error) error {
	s.mu.Lock()
	st.started = true
	s.mu.Unlock()
	err := run(ctx)
	s.mu.Lock()
	st.stopped, st.err = true, err
	s.mu.Unlock()
	return err
}

// ready is nil when every driver runs, else it names those that do not.
func (s *driverStates) ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var bad []string
	for _, st := range s.states {
		switch {
		case st.stopped && st.err != nil:
			bad = append(bad, fmt.Sprintf("%s stopped: %v", st.name, st.err))
		case st.stopped:
			bad = append(bad, st.name+" stopped")
		case !st.started:
			bad = append(bad, st.name+" not started")
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// trackedLine is an RS485 line whose Run is followed; every other method
// (Native, Group, Stats, ...) is the line's own, so the fleet core still
// sees a fleet.Line.
type trackedLine struct {
	*rs485.Line
	states *driverStates
	st     *driverState
}

func (d trackedLine) Run(ctx context.Context, sink fleet.Sink) error {
	return d.states.run(d.st, ctx, func(ctx context.Context) error { return d.Line.Run(ctx, sink) })
}

// trackedLAN is the LAN driver whose Run is followed; it keeps CallRaw
// (fleet.RawCaller) and the rest.
type trackedLAN struct {
	*lan.LAN
	states *driverStates
	st     *driverState
}

func (d trackedLAN) Run(ctx context.Context, sink fleet.Sink) error {
	return d.states.run(d.st, ctx, func(ctx context.Context) error { return d.LAN.Run(ctx, sink) })
}

func (s *driverStates) line(l *rs485.Line) fleet.Driver {
	return trackedLine{Line: l, states: s, st: s.add(l.Name())}
}

func (s *driverStates) lan(l *lan.LAN) fleet.Driver {
	return trackedLAN{LAN: l, states: s, st: s.add(l.Name())}
}
