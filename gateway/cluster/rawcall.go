package cluster

import (
	"context"
	"fmt"
	"io"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// callImage asks gateway gw to send a firmware image to its board id.
func (c *Cluster) callImage(ctx context.Context, gw, id, method, path string, body io.Reader) (fleet.Reply, error) {
	return fleet.Reply{}, fmt.Errorf("%w: raw bodies are not routed to gateway %s (board %s)", fleet.ErrTooLarge, gw, id)
}

// sendImage sends a routed image request's artifact to the board.
func (c *Cluster) sendImage(ctx context.Context, req rpcRequest) (fleet.Reply, error) {
	return fleet.Reply{}, fmt.Errorf("%w: images are not routed yet", fleet.ErrTooLarge)
}

// bindCaller ends ctx when the asking gateway's run ends.
func (c *Cluster) bindCaller(ctx context.Context, from, boot string) (context.Context, func()) {
	return ctx, func() {}
}
