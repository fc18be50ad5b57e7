package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/store"
)

// stubCluster is two gateways: hall (this one, the coordinator) and
// stage, dead for a minute.
type stubCluster struct{}

func (stubCluster) Status() cluster.Status {
	t := time.Now().Add(-time.Minute).UTC()
	return cluster.Status{Name: "hall", Coordinator: "hall", Boards: 5, Gateways: []cluster.GatewayStatus{
		{Name: "hall", Alive: true, Boards: 3, Lines: 2, Coordinator: true, LastHeartbeat: time.Now().UTC(), API: "10.0.0.1:8480"},
		{Name: "stage", Boards: 2, Lines: 1, LastHeartbeat: t, Heard: 61 * time.Second},
	}}
}

func (stubCluster) RemoveGateway(_ context.Context, name string) (cluster.Removed, error) {
	if name != "stage" {
		return cluster.Removed{}, fmt.Errorf("%w: %s", cluster.ErrGatewayAlive, name)
	}
	return cluster.Removed{Gateway: name, Boards: []string{"b4", "b5"}}, nil
}

// TestHoloctlCluster: gw cluster prints every gateway with its heartbeat,
// boards and lines and names the coordinator; gw cluster remove forgets
// a dead gateway and reports the gateway's refusal of a live one.
func TestHoloctlCluster(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, _ := toks.Create("admin", auth.RoleAdmin)
	viewer, _, _ := toks.Create("viewer", auth.RoleViewer)
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Fleet: &stubFleet{}, Tokens: toks, Registerer: reg, Gatherer: reg, Cluster: stubCluster{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	ctl := func(token string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"gw", "--gateway", "http://" + ln.Addr().String(), "--token-file", tokenFile(t, token)}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errOut := ctl(viewer, "cluster")
	if code != 0 {
		t.Fatalf("gw cluster: %d %s", code, errOut)
	}
	for _, want := range []string{"gateway hall: joined; rollout coordinator hall; 5 boards", "GATEWAY", "LAST HEARTBEAT",
		"(this gateway)", "1m1s ago"} {
		if !strings.Contains(out, want) {
			t.Errorf("gw cluster lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "hall ") || !strings.HasPrefix(lines[3], "stage ") ||
		!strings.Contains(lines[3], " NO ") || !strings.Contains(lines[2], "  3 ") || !strings.Contains(lines[2], "10.0.0.1:8480") {
		t.Errorf("gw cluster rows:\n%s", out)
	}
	if code, out, _ := ctl(viewer, "-o", "json", "cluster"); code != 0 || !strings.Contains(out, `"coordinator": "hall"`) {
		t.Errorf("gw -o json cluster: %d %s", code, out)
	}
	if code, _, errOut := ctl(viewer, "cluster", "remove", "stage"); code != 1 || !strings.Contains(errOut, "403") {
		t.Errorf("viewer removes a gateway: %d %s", code, errOut)
	}
	if code, out, errOut := ctl(admin, "cluster", "remove", "stage"); code != 0 || !strings.Contains(out, "gateway stage removed, with the records of 2 boards: [b4 b5]") {
		t.Errorf("admin removes stage: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := ctl(admin, "cluster", "remove", "hall"); code != 1 || !strings.Contains(errOut, "412") || !strings.Contains(errOut, "alive") {
		t.Errorf("admin removes hall: %d %s", code, errOut)
	}
	if code, _, _ := ctl(admin, "cluster", "drop"); code != 2 {
		t.Errorf("gw cluster drop: %d, want 2", code)
	}
}
