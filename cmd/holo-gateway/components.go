package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/audit"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/rollout"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
	"github.com/holofleet/holofleet/store"
)

// env is what the gateway's components get to build themselves: the
// options, the store, the fleet core, the drivers, a logger and the
// Prometheus registry behind /metrics.
type env struct {
	opts       options
	demo       bool
	db         *store.DB
	tokens     *auth.Tokens
	fleet      *fleet.Fleet
	wiring     *wiring
	log        *slog.Logger
	registerer prometheus.Registerer
	stdout     io.Writer
	// guard is the one door of every surface (identity, Authorize, audit
	// records); audit is the log its records go to.
	guard *auth.Guard
	audit *audit.Log
	// apiExtra collects HTTP handlers components serve on the API's
	// listener, by path prefix (for example the firmware artifacts).
	apiExtra map[string]http.Handler
	// apiDocs describe apiExtra's routes in /v1/openapi.json.
	apiDocs [][]byte
	// artifacts and rollouts serve the API's firmware calls (set by the
	// rollouts component; nil leaves them unimplemented).
	artifacts api.Artifacts
	rollouts  rollout.Service
	// cluster is this gateway's member of a cluster of gateways (set by
	// newCluster with --cluster; nil when it runs alone).
	cluster *cluster.Cluster
	// shows are the engines the rollouts' show guards ask (set by newCues
	// and newDMX, after the rollout engine is built).
	shows showEngines
	// cues is the cue engine (set by newCues, before MQTT and OSC).
	cues *cue.Engine
	// dmx is the DMX engine and dmxSave keeps its patch in the patch
	// file (set by newDMX when an input runs; the installation looks
	// them up when it plans or applies its dmx section).
	dmx     *dmx.Engine
	dmxSave func(*dmx.Patch) error
	// installation serves the API's InstallationService (set by
	// newInstallation).
	installation fleetv1.InstallationServiceServer
	// installStates gives the MQTT bridge each board's installation state
	// (set by newInstallation).
	installStates mqtt.InstallationStates
}

// handle serves h under prefix on the API listener.
func (e *env) handle(prefix string, h http.Handler) {
	if e.apiExtra == nil {
		e.apiExtra = map[string]http.Handler{}
	}
	e.apiExtra[prefix] = h
}

// component is one part of the gateway beside the API and the fleet core
// (the MQTT bridge, rollouts, metrics collectors): run is its owned
// goroutine until ctx ends (nil when it has none), banner its lines in the
// start-up banner, ready its input of /readyz under its name (nil when
// the gateway's readiness does not depend on it).
type component struct {
	name   string
	run    func(ctx context.Context) error
	banner []string
	ready  api.ReadyCheck
}

// components lists the component constructors, in start order, one a
// line. Each lives in its own file of this package. The rollouts come
// before MQTT: the bridge follows the engine newRollouts puts in env.
var components = []func(ctx context.Context, e *env) (component, error){
	newCluster,
	newMDNS,
	newMetrics,
	newRollouts,
	newCues,
	newInstallation,
	newMQTT,
	newConsole,
	newOSC,
	newDMX,
}
