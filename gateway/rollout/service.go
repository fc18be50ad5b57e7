package rollout

import "context"

// Service is the rollout API every front door uses: the REST/gRPC API
// (gateway/api), the MQTT bridge's rollout requests and Home Assistant's
// update entities (gateway/mqtt). *Engine implements it on one gateway;
// in a cluster, gateway/cluster's Rollouts implements it by asking the
// elected coordinator's engine. The consumers hold this interface, so a
// method added here is added to both implementations in one place.
type Service interface {
	// DryRun resolves a plan into its waves without starting it.
	DryRun(ctx context.Context, p Plan) (Selection, error)
	// Create checks and starts a plan.
	Create(ctx context.Context, p Plan) (Status, error)
	// Get returns one rollout with its progress.
	Get(id string) (Status, error)
	// List returns every rollout, newest first.
	List() []Status
	// Boards returns the boards of one rollout with their phases.
	Boards(id string) ([]Board, error)
	// Pause, Resume, Abort and Revert change a rollout's state.
	Pause(ctx context.Context, id, reason string) (Status, error)
	Resume(ctx context.Context, id string) (Status, error)
	Abort(ctx context.Context, id, reason string) (Status, error)
	Revert(ctx context.Context, id, reason string) (Status, error)
	// Watch streams the events of rollout id (every rollout when empty):
	// first the kept events numbered after after, then new ones, until
	// ctx ends or the watcher falls behind.
	Watch(ctx context.Context, id string, after uint64) <-chan Event
}

var _ Service = (*Engine)(nil)
