package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// staticLocal is a gateway's fleet core reduced to a fixed list of boards
// (for the listing benchmark: what the cluster adds to it is measured).
type staticLocal struct {
	views []fleet.BoardView // ordered by id
}

func (s *staticLocal) Boards(f fleet.Filter) []fleet.BoardView {
	out := make([]fleet.BoardView, 0, len(s.views))
	for _, v := range s.views {
		if f.Matches(v) {
			v.Groups, v.Labels, v.Transports = slices.Clone(v.Groups), map[string]string{}, slices.Clone(v.Transports)
			out = append(out, v)
		}
	}
	return out
}

func (s *staticLocal) Board(id string) (fleet.BoardView, error) {
	for _, v := range s.views {
		if v.ID == id {
			return v, nil
		}
	}
	return fleet.BoardView{}, fleet.ErrUnknownBoard
}

func (s *staticLocal) SetLabels(string, map[string]string) (fleet.BoardView, error) {
	return fleet.BoardView{}, fleet.ErrUnknownBoard
}

func (s *staticLocal) Call(context.Context, string, string, string, []byte) (fleet.Reply, error) {
	return fleet.Reply{}, fleet.ErrUnknownBoard
}

func (s *staticLocal) CallRaw(context.Context, string, string, string, string, io.Reader, int64) (fleet.Reply, error) {
	return fleet.Reply{}, fleet.ErrUnknownBoard
}

func (s *staticLocal) Do(context.Context, fleet.Selector, fleet.Action) ([]fleet.Result, error) {
	return nil, nil
}

// Watch hands out no events; its channel closes when ctx ends.
func (s *staticLocal) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	ch := make(chan fleet.Event)
	go func() { <-ctx.Done(); close(ch) }()
	return &fleet.Watcher{C: ch, Dropped: func() uint64 { return 0 }}
}

// scaleView is board i of gateway gw as a LAN board's view looks.
func scaleView(gw string, i int) fleet.BoardView {
	id := fmt.Sprintf("%s%011x", gw, i*7919)
	now := time.Now().UTC()
	groups := []int{}
	if i%15 == 0 {
		groups = []int{1}
	}
	return fleet.BoardView{ID: id, Hostname: "holo-" + id[len(id)-4:], URL: fmt.Sprintf("http://127.0.0.1:%d", 20000+i),
		Groups: groups, Labels: map[string]string{}, Online: true, Firmware: "1.4.2", LastSeen: now,
		Transports: []string{"lan"}, Clock: &fleet.BoardClock{OffsetUS: -1795501160435315, UncertaintyUS: 105, SyncedAt: now},
		Gateway: gw}
}

// BenchmarkClusterBoards is the cluster's part of a fleet-wide listing,
// in one process: gateway a, on an embedded engine, owns
// HOLO_CLUSTER_SCALE_BOARDS boards (default 5,000; its fleet core is a
// fixed list), and the records of twice as many boards of gateways b and
// c are in holo_boards. Each op of "all" is Cluster.Boards over all of
// them, of "group" over the members of group 1 (one board in 15); ns/board
// is per board of the installation, and local-ratio is that against the
// fixed list's own Boards per board (what a gateway alone pays here).
func BenchmarkClusterBoards(b *testing.B) {
	perGW := scaleEnvInt(b, "HOLO_CLUSTER_SCALE_BOARDS", 5000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "a", URL: cluster.Embedded, Listen: "127.0.0.1:0", Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	local := &staticLocal{}
	for i := range perGW {
		v := scaleView("a", i)
		v.Gateway = ""
		local.views = append(local.views, v)
	}
	slices.SortFunc(local.views, func(x, y fleet.BoardView) int { return strings.Compare(x.ID, y.ID) })
	c, err := cluster.New(cluster.Options{Engine: eng, Local: local, DeadAfter: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); c.Status().Owned < perGW; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("gateway a published %d of its %d boards", c.Status().Owned, perGW)
		}
	}
	// The other gateways: heartbeats and records, as they write them.
	js := eng.JetStream()
	gwKV, err := js.KeyValue(ctx, cluster.BucketGateways)
	if err != nil {
		b.Fatal(err)
	}
	for _, gw := range []string{"b", "c"} {
		hb, _ := json.Marshal(cluster.Heartbeat{Name: gw, Boot: "x", Started: time.Now(), Time: time.Now(), Boards: perGW})
		if _, err := gwKV.Put(ctx, gw, hb); err != nil {
			b.Fatal(err)
		}
		var acks []jetstream.PubAckFuture
		for i := range perGW {
			v := scaleView(gw, i)
			data, _ := json.Marshal(map[string]any{"view": v, "boot": "x"})
			ack, err := js.PublishAsync("$KV."+cluster.BucketBoards+"."+v.ID, data)
			if err != nil {
				b.Fatal(err)
			}
			acks = append(acks, ack)
		}
		for _, a := range acks {
			select {
			case <-a.Ok():
			case err := <-a.Err():
				b.Fatal(err)
			}
		}
	}
	total := 3 * perGW
	for deadline := time.Now().Add(30 * time.Second); c.Status().Boards < total; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("gateway a holds %d of %d records", c.Status().Boards, total)
		}
	}
	t0 := time.Now()
	const localReps = 20
	for range localReps {
		if n := len(local.Boards(fleet.Filter{})); n != perGW {
			b.Fatalf("local: %d boards", n)
		}
	}
	localPer := float64(time.Since(t0)) / localReps / float64(perGW)
	for _, tc := range []struct {
		name string
		f    fleet.Filter
		want int
	}{{"all", fleet.Filter{}, total}, {"group", fleet.Filter{Group: 1}, 3 * ((perGW + 14) / 15)}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if n := len(c.Boards(tc.f)); n != tc.want {
					b.Fatalf("listed %d boards, want %d", n, tc.want)
				}
			}
			per := float64(b.Elapsed()) / float64(b.N) / float64(total)
			b.ReportMetric(per, "ns/board")
			b.ReportMetric(per/localPer, "local-ratio")
		})
	}
}

func scaleEnvInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}
