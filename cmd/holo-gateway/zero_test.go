package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/holofleet/holofleet/gateway/metrics"
	"github.com/holofleet/holofleet/gateway/mqtt"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestFreshScrapeHasZeroSeries scrapes a gateway that has run no command:
// every series whose labels are known in advance is there at 0 (API
// requests by method and code, command latency and failures by transport
// and kind, MQTT commands by result), and promtool accepts the scrape.
func TestFreshScrapeHasZeroSeries(t *testing.T) {
	t.Parallel()
	base, _ := start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-lab", "--mqtt-port", "0")
	_, body := get(t, base+"/metrics", "")
	var want []string
	for _, md := range fleetv1.FleetService_ServiceDesc.Methods {
		for c := codes.OK; c <= codes.Unauthenticated; c++ {
			want = append(want, fmt.Sprintf(`holo_gateway_api_requests_total{code=%q,method=%q}`, c.String(), md.MethodName))
		}
		want = append(want, fmt.Sprintf(`holo_gateway_api_request_seconds_count{method=%q}`, md.MethodName))
	}
	for _, sd := range fleetv1.FleetService_ServiceDesc.Streams {
		want = append(want, fmt.Sprintf(`holo_gateway_api_requests_total{code="OK",method=%q}`, sd.StreamName))
	}
	for _, tk := range metrics.InitialCommands() {
		want = append(want,
			fmt.Sprintf(`holo_gateway_command_failures_total{kind=%q,transport=%q}`, tk[1], tk[0]),
			fmt.Sprintf(`holo_gateway_command_duration_seconds_count{kind=%q,transport=%q}`, tk[1], tk[0]))
	}
	for _, r := range mqtt.CommandResults {
		want = append(want, fmt.Sprintf(`holo_mqtt_commands_total{result=%q}`, r))
	}
	// One pass over the scrape's lines (a regular expression per series
	// over the whole scrape took half a minute under the race detector).
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w+" 0"] {
			t.Errorf("fresh scrape lacks %s 0", w)
		}
	}
	// Each transport has a failures series for the dashboards' "by
	// transport" panels.
	for _, tr := range []string{"rs485", "lan", "group"} {
		if !strings.Contains(body, `transport="`+tr+`"}`) {
			t.Errorf("no series for transport %s", tr)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; CI installs it)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
