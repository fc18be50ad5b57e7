package api

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/gateway/cluster"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// Cluster is what GetCluster and RemoveGateway need of the cluster of
// gateways this gateway is in (*cluster.Cluster).
type Cluster interface {
	Status() cluster.Status
	RemoveGateway(ctx context.Context, name string) (cluster.Removed, error)
}

func (s *service) clusterOf() (Cluster, error) {
	if s.cluster == nil {
		return nil, fmt.Errorf("%w: this gateway runs alone (no --cluster)", ErrDisabled)
	}
	return s.cluster, nil
}

// GetCluster describes the cluster as this gateway sees it.
func (s *service) GetCluster(context.Context, *fleetv1.GetClusterRequest) (*fleetv1.Cluster, error) {
	c, err := s.clusterOf()
	if err != nil {
		return nil, Err(err)
	}
	return clusterOf(c.Status()), nil
}

// clusterOf is the API's form of a cluster status.
func clusterOf(st cluster.Status) *fleetv1.Cluster {
	out := &fleetv1.Cluster{Name: st.Name, Partitioned: st.Partitioned, Reason: st.Reason, Coordinator: st.Coordinator,
		Boards: int32(st.Boards), Gateways: make([]*fleetv1.ClusterGateway, 0, len(st.Gateways))}
	for _, g := range st.Gateways {
		cg := &fleetv1.ClusterGateway{Name: g.Name, Alive: g.Alive, HeardMs: g.Heard.Milliseconds(), Boards: int32(g.Boards),
			Lines: int32(g.Lines), Coordinator: g.Coordinator, Api: g.API}
		if !g.LastHeartbeat.IsZero() {
			cg.LastHeartbeat = timestamppb.New(g.LastHeartbeat)
		}
		if !g.Started.IsZero() {
			cg.Started = timestamppb.New(g.Started)
		}
		out.Gateways = append(out.Gateways, cg)
	}
	return out
}

// RemoveGateway forgets a stopped gateway of the cluster.
func (s *service) RemoveGateway(ctx context.Context, r *fleetv1.RemoveGatewayRequest) (*fleetv1.RemoveGatewayResponse, error) {
	c, err := s.clusterOf()
	if err != nil {
		return nil, Err(err)
	}
	if r.GetName() == "" {
		return nil, Err(fmt.Errorf("%w: name is required", ErrBadRequest))
	}
	rm, err := c.RemoveGateway(ctx, r.GetName())
	if err != nil {
		return nil, Err(err)
	}
	return &fleetv1.RemoveGatewayResponse{Name: rm.Gateway, Boards: rm.Boards}, nil
}
