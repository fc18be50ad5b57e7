package api

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/cluster"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// fakeCluster is a cluster of two gateways, "hall" (this one) and
// "stage" (dead), as GetCluster and RemoveGateway see it.
type fakeCluster struct{ removed []string }

var hbTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func (f *fakeCluster) Status() cluster.Status {
	return cluster.Status{Name: "hall", Coordinator: "hall", Boards: 5, Gateways: []cluster.GatewayStatus{
		{Name: "hall", Alive: true, Boards: 3, Lines: 2, Coordinator: true, LastHeartbeat: hbTime, API: "10.0.0.1:8480"},
		{Name: "stage", Boards: 2, Lines: 1, LastHeartbeat: hbTime.Add(-time.Minute), Heard: 61 * time.Second},
	}}
}

func (f *fakeCluster) RemoveGateway(_ context.Context, name string) (cluster.Removed, error) {
	switch name {
	case "hall":
		return cluster.Removed{}, fmt.Errorf("%w: hall is this gateway", cluster.ErrGatewayAlive)
	case "stage":
		f.removed = append(f.removed, name)
		return cluster.Removed{Gateway: name, Boards: []string{"b4", "b5"}}, nil
	}
	return cluster.Removed{}, fmt.Errorf("%w: %q", cluster.ErrUnknownGateway, name)
}

// TestCluster: GET /v1/cluster (and gRPC GetCluster) describes the
// cluster to viewers; DELETE /v1/cluster/gateways/{name} removes a dead
// gateway for admins only, refusing a live one and an unknown name; a
// gateway running alone answers both 501.
func TestCluster(t *testing.T) {
	fc := &fakeCluster{}
	g := startGateway(t, func(c *Config) { c.Cluster = fc })

	if code, _ := g.rest(t, "", "GET", "/v1/cluster", ""); code != 401 {
		t.Errorf("GET /v1/cluster without a token: %d", code)
	}
	code, body := g.rest(t, "viewer", "GET", "/v1/cluster", "")
	if code != 200 {
		t.Fatalf("GET /v1/cluster as viewer: %d %s", code, body)
	}
	var got struct {
		Name        string `json:"name"`
		Partitioned bool   `json:"partitioned"`
		Coordinator string `json:"coordinator"`
		Boards      int    `json:"boards"`
		Gateways    []struct {
			Name          string `json:"name"`
			Alive         bool   `json:"alive"`
			LastHeartbeat string `json:"last_heartbeat"`
			HeardMs       string `json:"heard_ms"`
			Boards        int    `json:"boards"`
			Lines         int    `json:"lines"`
			Coordinator   bool   `json:"coordinator"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got.Name != "hall" || got.Partitioned || got.Coordinator != "hall" || got.Boards != 5 || len(got.Gateways) != 2 {
		t.Fatalf("GET /v1/cluster: %s", body)
	}
	hall, stage := got.Gateways[0], got.Gateways[1]
	if !hall.Alive || hall.Boards != 3 || hall.Lines != 2 || !hall.Coordinator || hall.LastHeartbeat != "2025-03-01T12:00:00Z" {
		t.Errorf("hall: %+v", hall)
	}
	if stage.Alive || stage.Boards != 2 || stage.Lines != 1 || stage.HeardMs != "61000" || stage.LastHeartbeat != "2025-03-01T11:59:00Z" {
		t.Errorf("stage: %+v", stage)
	}
	cl, err := g.client.GetCluster(g.ctx(t, "viewer"), &fleetv1.GetClusterRequest{})
	if err != nil || cl.GetName() != "hall" || len(cl.GetGateways()) != 2 {
		t.Errorf("gRPC GetCluster: %v %v", cl, err)
	}

	for _, tc := range []struct {
		role, name string
		code       int
	}{
		{"viewer", "stage", 403},
		{"operator", "stage", 403},
		{"admin", "hall", 412},
		{"admin", "nosuch", 404},
		{"admin", "stage", 200},
	} {
		code, body := g.rest(t, tc.role, "DELETE", "/v1/cluster/gateways/"+tc.name, "")
		if code != tc.code {
			t.Errorf("DELETE %s as %s: %d %s, want %d", tc.name, tc.role, code, body, tc.code)
		}
		if tc.code == 200 && body != `{"name":"stage","boards":["b4","b5"]}` {
			t.Errorf("DELETE stage: %s", body)
		}
	}
	if len(fc.removed) != 1 {
		t.Errorf("removed %v, want stage once", fc.removed)
	}
	if _, err := g.client.RemoveGateway(g.ctx(t, "admin"), &fleetv1.RemoveGatewayRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("RemoveGateway without a name: %v", err)
	}

	alone := startGateway(t)
	if code, body := alone.rest(t, "viewer", "GET", "/v1/cluster", ""); code != 501 {
		t.Errorf("GET /v1/cluster alone: %d %s", code, body)
	}
	if _, err := alone.client.RemoveGateway(alone.ctx(t, "admin"), &fleetv1.RemoveGatewayRequest{Name: "x"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("RemoveGateway alone: %v", err)
	}
}
