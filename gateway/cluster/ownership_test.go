package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestJoinKeepsLiveOwners: a gateway joining a cluster where a live
// gateway owns a LAN board it also reaches leaves the board to its owner
// (standby). It once took the board when it had read the board records
// but not yet the heartbeats: every owner looked dead for that moment
// (TestClusterMQTT saw the shared board go to gw2). Several joins, each
// a new run of the joining gateway, in one process.
func TestJoinKeepsLiveOwners(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	view := scaleView("x", 1)
	view.Gateway = ""
	local := &staticLocal{views: []fleet.BoardView{view}}

	dirA := t.TempDir()
	engA, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "a", URL: cluster.Embedded, Listen: "127.0.0.1:0", Dir: dirA})
	if err != nil {
		t.Fatal(err)
	}
	defer engA.Close()
	a := runMember(ctx, t, engA, local)
	waitStatus(t, a, "a owns the board", func(st cluster.Status) bool { return st.Owned == 1 && !st.Partitioned })

	path, err := cluster.MintCredentials(dirA, "b", "")
	if err != nil {
		t.Fatal(err)
	}
	credsB, err := cluster.ReadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		engB, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "b", URL: engA.JoinURL(), Credentials: credsB})
		if err != nil {
			t.Fatal(err)
		}
		bctx, bcancel := context.WithCancel(ctx)
		b := runMember(bctx, t, engB, local)
		waitStatus(t, b, fmt.Sprintf("join %d: b stands by", i), func(st cluster.Status) bool {
			if st.Takeovers > 0 || st.Owned > 0 {
				t.Fatalf("join %d: b took the board of live gateway a: %+v", i, st)
			}
			return !st.Partitioned && st.Boards == 1 && st.Standby == 1
		})
		bcancel()
		engB.Close()
		if v, err := a.Board(view.ID); err != nil || v.Gateway != "a" {
			t.Fatalf("join %d: a sees the board as %+v, %v; want a's", i, v, err)
		}
	}
}

// runMember runs a cluster member on eng with the fleet core local until
// ctx ends (or the test does).
func runMember(ctx context.Context, t *testing.T, eng *cluster.Engine, local *staticLocal) *cluster.Cluster {
	t.Helper()
	c, err := cluster.New(cluster.Options{Engine: eng, Local: local, DeadAfter: time.Hour, Heartbeat: 100 * time.Millisecond,
		SyncEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// waitStatus polls c's status until ok says so (30 s at most: a broken
// path).
func waitStatus(t *testing.T, c *cluster.Cluster, what string, ok func(cluster.Status) bool) {
	t.Helper()
	eventually(t, 30*time.Second, what, func() error {
		if st := c.Status(); !ok(st) {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
}
