package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// firmwarePrefix is where the API listener serves images and release
// manifests to boards (artifact.Store.Handler).
const firmwarePrefix = "/firmware/"

// rolloutRecheck is how often a rollout asks again whether a board
// waiting at its gate (a show on it) may start; 0 is
// rollout.DefaultRecheck. The package's tests shorten it (TestMain), so
// that a test of the gate waits for the gate, not for the period.
var rolloutRecheck time.Duration

// newRollouts builds the firmware store (<data>/artifacts and the
// gateway's store, trusting --trusted-key) and the rollout engine, serves images and channel
// manifests under /firmware/, hands both to the API (/v1/artifacts,
// /v1/channels, /v1/rollouts) and registers the rollout metrics. Its
// goroutine is the engine, which resumes interrupted rollouts at start.
func newRollouts(_ context.Context, e *env) (component, error) {
	if e.cluster != nil {
		return newClusterRollouts(e)
	}
	var eng *rollout.Engine
	arts, err := artifact.Open(artifact.Options{Dir: filepath.Join(e.opts.data, "artifacts"), DB: e.db,
		InUse: func(sha string) bool { return eng != nil && eng.Uses(sha) }, Trusted: e.opts.keys.trusted, Revoked: e.opts.keys.revoked})
	if err != nil {
		return component{}, err
	}
	eng, err = rollout.New(rollout.Options{DB: e.db, Fleet: e.fleet, Artifacts: arts, Log: e.log.With("component", "rollouts"),
		ShowGuards: e.shows.guards(e.fleet), Recheck: rolloutRecheck})
	if err != nil {
		return component{}, err
	}
	if err := e.registerer.Register(eng.Collector()); err != nil {
		return component{}, err
	}
	e.handle(firmwarePrefix, arts.Handler(firmwarePrefix))
	e.artifacts, e.rollouts = arts, eng
	return component{name: "rollouts", run: eng.Run,
		banner: []string{"firmware: images and release manifests under " + firmwarePrefix, e.opts.keys.banner()}}, nil
}

// newClusterRollouts is newRollouts for a gateway of a cluster: its own
// firmware store, shared with the others through the cluster; rollouts
// run on the elected coordinator, which this gateway may become.
func newClusterRollouts(e *env) (component, error) {
	arts, err := artifact.Open(artifact.Options{Dir: filepath.Join(e.opts.data, "artifacts"), DB: e.db,
		Trusted: e.opts.keys.trusted, Revoked: e.opts.keys.revoked})
	if err != nil {
		return component{}, err
	}
	shared := e.cluster.Artifacts(arts)
	e.cluster.RunRollouts(cluster.RolloutOptions{Tune: func(o *rollout.Options) {
		o.ShowGuards = e.shows.guards(o.Fleet)
		if rolloutRecheck > 0 {
			o.Recheck = rolloutRecheck
		}
	}})
	e.handle(firmwarePrefix, arts.Handler(firmwarePrefix))
	e.artifacts, e.rollouts = shared, e.cluster.Rollouts()
	return component{name: "rollouts",
		banner: []string{"firmware: images and release manifests under " + firmwarePrefix + "; rollouts run on the cluster's elected coordinator",
			e.opts.keys.banner()}}, nil
}
