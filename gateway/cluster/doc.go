// Package cluster joins gateways into one control plane over an existing
// distributed engine, NATS with JetStream (docs/cluster.md says why NATS
// and not etcd). It is an adapter between the fleet core and the engine:
// each gateway keeps running its own fleet.Fleet over its own lines and
// LAN boards, and the cluster answers, for the whole installation, the
// questions the API, the MQTT bridge and rollouts ask through
// fleet.Service: which boards exist and who owns each, route this call to
// the owner, publish and replay the installation's events.
//
// What lives in the engine (bucket and stream names are constants below):
//
//	KV   holo_gateways   <gateway>         heartbeat: name, boot, API address, time
//	KV   holo_boards     <board id>        the board's view, written by its owner
//	KV   holo_tokens     <token name>      API tokens (hashed), the same on every gateway
//	KV   holo_lease      coordinator       who runs rollouts now
//	str  HOLO_EVENTS     holo.ev.<gw>.<board>   every board event; the stream
//	                                             sequence is the event's N
//	str  HOLO_ROLLOUTS   holo.rollouts.journal  the coordinator's decisions
//	obj  holo_artifacts  <sha256>          firmware images, fetched on demand
//
// Subjects for request/reply: holo.gw.<gateway>.rpc reaches one gateway
// (calls, actions and labels for the boards it owns); holo.rollouts.rpc
// reaches the rollout coordinator.
//
// Own is this gateway's own boards as a fleet.Service: what its MQTT
// bridge mirrors and its per-board metrics export, so each board of the
// installation has one publisher.
//
// A gateway owns the boards on its lines and the LAN boards it reaches,
// unless another live gateway owns a LAN board already; when a gateway's
// heartbeat stops, its LAN boards go to another gateway that reaches
// them, and its line boards show offline. A gateway cut off from the
// engine keeps serving its own boards and says it is partitioned; what it
// saw meanwhile reaches the engine when it is back.
package cluster

import (
	"errors"

	"github.com/holofleet/holofleet/gateway/fault"
)

// Errors of the cluster.
var (
	// ErrConfig: a bad gateway name, engine URL or option.
	ErrConfig = errors.New("cluster: bad configuration")
	// ErrClosed: the engine connection was closed.
	ErrClosed = errors.New("cluster: closed")
	// ErrPartitioned: the engine cannot be reached now, so the request
	// (about another gateway's board, or a cluster-wide change) cannot
	// be served; this gateway's own boards still are.
	ErrPartitioned = fault.New(fault.Unavailable, "cluster: cut off from the engine")
	// ErrGatewayDown: the gateway that owns the board does not answer.
	ErrGatewayDown = fault.New(fault.Unavailable, "cluster: the board's gateway does not answer")
	// ErrTooLarge: a request too large for the engine's messages.
	ErrTooLarge = errors.New("cluster: request too large to route")
	// ErrGatewayAlive: a gateway still alive (or this one) cannot be
	// removed from the cluster.
	ErrGatewayAlive = fault.New(fault.Precondition, "cluster: the gateway is alive")
	// ErrUnknownGateway: no gateway of that name is in the cluster.
	ErrUnknownGateway = fault.New(fault.NotFound, "cluster: unknown gateway")
)
