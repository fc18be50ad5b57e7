package monitoring_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/holofleet/holofleet/gateway/cluster"
)

// TestAlertsFireInCluster runs two demo gateways (eight simulated boards
// each) joined through a real NATS server (nats-server with JetStream),
// then kills one gateway (SIGKILL, as a crash) and stops the NATS server
// while two shows keep firing scenes on the other's boards. Two scrapes of the
// surviving gateway become promtool series as in TestAlertsFireInDemo,
// over which fire HoloClusterGatewayDown (it has taken the killed one for
// dead), HoloClusterPartitioned (cut off from the engine),
// HoloClusterCoordinator (no gateway holds the rollout lease) and
// HoloClusterEventsBacklog (its boards' events wait for the engine). The
// scenes go on until the events waiting reach --cluster-queue-max (1,100
// here; 262,144 by default, an hour of this traffic) and the oldest are
// dropped: two more scrapes then fire HoloClusterEventsLost.
func TestAlertsFireInCluster(t *testing.T) {
	promtool := alertTest(t, "a cluster")
	nats := natsServerBin(t)

	port := freePort(t)
	natsCmd := exec.Command(nats, "-n", "alerts", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", t.TempDir())
	if err := natsCmd.Start(); err != nil {
		t.Fatal(err)
	}
	natsDone := make(chan struct{})
	go func() { _ = natsCmd.Wait(); close(natsDone) }()
	t.Cleanup(func() { _ = natsCmd.Process.Kill(); <-natsDone })
	creds := filepath.Join(t.TempDir(), "cluster.creds")
	if err := (cluster.Credentials{Secret: "alerts-test-secret"}).Write(creds, "test engine"); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	gw := func(name string) []string {
		return []string{"demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "8", "--demo-groups", "1", "--no-mqtt",
			"--name", name, "--cluster", url, "--cluster-credentials", creds, "--cluster-listen", "127.0.0.1:0",
			"--cluster-heartbeat", "500ms", "--cluster-dead-after", "3s", "--cluster-lease", "3s", "--cluster-queue-max", strconv.Itoa(clusterQueueMax)}
	}
	base, _, _ := startStoppable(t, gw("gw1")...)
	_, _, _, kill2 := startProcess(t, gw("gw2")...)
	waitFor(t, "gw1 hears gw2 and a coordinator is elected", 60*time.Second, func() bool {
		fams, _ := scrapeFamilies(t, base)
		return familySum(fams, "holo_gateway_cluster_gateway_up", `peer="gw2"`) == 1
	})

	// gw2 crashes; then the engine stops while scenes fire on gw1's
	// boards (8 boards, 10 scenes a second).
	kill2()
	waitFor(t, "gw1 takes gw2 for dead", 30*time.Second, func() bool {
		fams, _ := scrapeFamilies(t, base)
		return familySum(fams, "holo_gateway_cluster_gateway_up", `peer="gw2"`) == 0
	})
	if err := natsCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-natsDone
	// Two shows fire scenes: the 1,000 events HoloClusterEventsBacklog
	// asks for come in seconds, not a minute, on a loaded machine.
	stopScenes, stopScenes2 := fireScenes(t, base), fireScenes(t, base)
	sum := func(fams map[string]*dto.MetricFamily, name string) float64 { return familySum(fams, name, "") }
	pending := func(fams map[string]*dto.MetricFamily) float64 {
		return sum(fams, "holo_gateway_cluster_events_pending")
	}
	cut := scrapeWhile(t, base, "gw1 partitioned, without a coordinator, its events waiting", 90*time.Second,
		func(f map[string]*dto.MetricFamily) bool {
			return sum(f, "holo_gateway_cluster_partitioned") == 1 && sum(f, "holo_gateway_cluster_coordinator") == 0 && pending(f) > 0
		},
		func(_, a map[string]*dto.MetricFamily) bool { return pending(a) > 1000 })
	// The engine stays away: the queue fills to --cluster-queue-max and
	// the oldest events are dropped from then on.
	lost := func(fams map[string]*dto.MetricFamily) float64 {
		return sum(fams, "holo_gateway_cluster_events_lost_total")
	}
	full := scrapeWhile(t, base, "the queue full and events dropped", 90*time.Second,
		func(f map[string]*dto.MetricFamily) bool { return lost(f) > 0 },
		func(b, a map[string]*dto.MetricFamily) bool { return lost(a) > lost(b) })
	stopScenes()
	stopScenes2()
	t.Logf("between the scrapes (%v): events pending %.0f -> %.0f; once full (%v): %.0f waiting, %.0f -> %.0f dropped",
		cut.between().Round(time.Millisecond), pending(cut.before), pending(cut.after),
		full.between().Round(time.Millisecond), pending(full.after), lost(full.before), lost(full.after))
	if n := pending(full.after); n != clusterQueueMax {
		t.Errorf("%v events waiting with the queue full, want --cluster-queue-max %d", n, clusterQueueMax)
	}
	runPromtool(t, promtool, cut.step(), []any{
		full.test("a cluster gateway whose queue for the engine is full", 20*time.Minute, nil,
			expectAlert("HoloClusterEventsLost", "critical", "20m", map[string]string{"gateway": "gw1"})),
		cut.test("a cluster gateway after its peer crashed and the engine stopped", 20*time.Minute, growing,
			expectAlert("HoloClusterPartitioned", "critical", "20m", map[string]string{"gateway": "gw1"}),
			map[string]any{"alertname": "HoloClusterGatewayDown", "eval_time": "20m", "exp_alerts": []any{map[string]any{
				"exp_labels": map[string]string{"severity": "critical", "job": alertJob, "peer": "gw2"}}}},
			map[string]any{"alertname": "HoloClusterCoordinator", "eval_time": "20m", "exp_alerts": []any{map[string]any{
				"exp_labels": map[string]string{"severity": "warning", "job": alertJob}}}},
			expectAlert("HoloClusterEventsBacklog", "warning", "20m", map[string]string{"gateway": "gw1"})),
	})
}

// clusterQueueMax is the gateways' --cluster-queue-max in
// TestAlertsFireInCluster: above the 1,000 events HoloClusterEventsBacklog
// asks for, reached in seconds of scenes.
const clusterQueueMax = 1100

// natsServerBin is the Debian nats-server; tests needing it skip without
// it, except in CI, which installs it.
func natsServerBin(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("HOLO_NATS_SERVER"), "/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nats-server is not installed (CI installs the Debian package nats-server)")
	}
	t.Skip("nats-server is not installed (apt-get install nats-server)")
	return ""
}
