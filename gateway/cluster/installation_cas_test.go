package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
)

// TestRevisionCreatedOnce: two gateways (two engine connections on a
// real embedded engine) create the same revision numbers at the same
// moment, many times over: each number is stored by exactly one of them,
// the other gets ErrRevisionTaken, the stored record is the winner's,
// and current ends at the highest number.
func TestRevisionCreatedOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ins := twoInstallations(t, ctx)
	rounds := 20
	won := map[int]string{}
	for n := 1; n <= rounds; n++ {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, in := range ins {
			wg.Go(func() {
				<-start
				errs[i] = in.CreateRevision(ctx, installation.Revision{N: n, Who: fmt.Sprintf("gw%d", i+1), When: time.Now().UTC(),
					Description: []byte(`{"version":1}`)})
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
				won[n] = fmt.Sprintf("gw%d", i+1)
			case errors.Is(err, installation.ErrRevisionTaken):
			default:
				t.Fatalf("round %d, gw%d: %v", n, i+1, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d gateways stored revision %d (%v)", n, ok, n, errs)
		}
		for _, in := range ins {
			r, err := in.Revision(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Who != won[n] {
				t.Fatalf("revision %d is %s's, but %s won", n, r.Who, won[n])
			}
		}
	}
	for _, in := range ins {
		last, cur, err := in.Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if last != rounds || cur != rounds {
			t.Fatalf("latest %d, current %d, want %d", last, cur, rounds)
		}
		h, err := in.History(ctx)
		if err != nil || len(h) != rounds {
			t.Fatalf("history: %d revisions, %v", len(h), err)
		}
	}
}

// twoInstallations is two gateways' installation stores: two engine
// connections (gw1 runs the embedded engine, gw2 joins it).
func twoInstallations(t *testing.T, ctx context.Context) []*cluster.Installation {
	t.Helper()
	dir := t.TempDir()
	edir := filepath.Join(dir, "engine")
	e1, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw1", URL: cluster.Embedded, Listen: "127.0.0.1:0", Dir: edir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e1.Close() })
	path, err := cluster.MintCredentials(edir, "gw2", "")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cluster.ReadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	var e2 *cluster.Engine
	eventually(t, 20*time.Second, "gw2 joins the engine", func() error {
		e2, err = cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw2", URL: e1.JoinURL(), Credentials: creds})
		return err
	})
	t.Cleanup(func() { e2.Close() })
	var ins []*cluster.Installation
	for _, e := range []*cluster.Engine{e1, e2} {
		c, err := cluster.New(cluster.Options{Engine: e, Local: fleet.New(fleet.Options{})})
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, c.Installation())
	}
	// The buckets are made one gateway after the other: two engine
	// connections creating or updating the same stream at once trip a
	// data race inside nats-server's own account accounting
	// (jsAccount.reservedStorage against stream.updateWithAdvisory, seen
	// under -race). The races these tests are about come after.
	for _, in := range ins {
		if _, _, err := in.Latest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ins
}

// TestFindingNewerKept: findings on a board reach the cluster in no set
// order (a run superseded by a newer revision may publish after the
// newer run did; a check that began before a board's apply may end after
// it). The cluster keeps the newer: against a newer revision, or the
// same revision seen later by the same gateway; another gateway's
// finding on the same revision (the board changed owner) replaces it.
func TestFindingNewerKept(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ins := twoInstallations(t, ctx)
	t0 := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	finding := func(gw string, rev int, at time.Duration, state string) installation.BoardState {
		return installation.BoardState{BoardPlan: installation.BoardPlan{Board: "b1", State: state, Summary: state},
			Gateway: gw, Revision: rev, Checked: t0.Add(at)}
	}
	steps := []struct {
		name string
		put  installation.BoardState
		want installation.BoardState
	}{
		{"first", finding("gw1", 3, 0, "drifted"), finding("gw1", 3, 0, "drifted")},
		{"newer revision", finding("gw1", 4, time.Second, "in_sync"), finding("gw1", 4, time.Second, "in_sync")},
		{"older revision, published late", finding("gw1", 3, 2*time.Second, "in_sync"), finding("gw1", 4, time.Second, "in_sync")},
		{"same revision, seen earlier", finding("gw1", 4, 0, "drifted"), finding("gw1", 4, time.Second, "in_sync")},
		{"same revision, seen later", finding("gw1", 4, 3*time.Second, "drifted"), finding("gw1", 4, 3*time.Second, "drifted")},
		{"new owner, same revision", finding("gw2", 4, time.Second, "in_sync"), finding("gw2", 4, time.Second, "in_sync")},
	}
	for i, s := range steps {
		if err := ins[i%2].PutBoard(ctx, s.put); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		all, err := ins[(i+1)%2].Boards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 {
			t.Fatalf("%s: %d findings, want 1", s.name, len(all))
		}
		got := all[0]
		if got.Gateway != s.want.Gateway || got.Revision != s.want.Revision || got.State != s.want.State || !got.Checked.Equal(s.want.Checked) {
			t.Fatalf("%s: kept %s rev %d %s at %s; want %s rev %d %s at %s", s.name, got.Gateway, got.Revision, got.State, got.Checked,
				s.want.Gateway, s.want.Revision, s.want.State, s.want.Checked)
		}
	}
}
