package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/holofleet/holofleet/bus/tmpfs"
)

// TestAlertsFireOnFullDisk runs a demo gateway with its --data on a small
// tmpfs (in a private mount namespace: tmpfs.Isolate), fills that file
// system to its last byte, and has an operator go on labelling a board,
// each time with more labels: the board's record no longer fits where it
// was, so the registry fails to save it (HoloRegistryWriteErrors), and the
// audit records of those changes find no room either and are counted as
// lost (HoloAuditRecordsDropped). Two scrapes while that goes on become
// promtool series as in TestAlertsFireInDemo.
func TestAlertsFireOnFullDisk(t *testing.T) {
	promtool := alertTest(t, "a simulated installation")
	if !tmpfs.Isolate(t, "HOLO_GATEWAY_BIN="+gatewayBinary(t)) {
		return
	}
	data := tmpfs.Mount(t, "16m")
	base, out, _ := startStoppable(t, "demo", "--data", data, "--listen", "127.0.0.1:0", "--demo-boards", "1", "--demo-groups", "1", "--no-mqtt")
	waitFor(t, "the whole banner", 20*time.Second, func() bool { return strings.Contains(out.String(), "Ctrl-C stops.") })
	var board string
	waitFor(t, "the demo board online", 30*time.Second, func() bool {
		_, body := get(t, base+"/v1/boards?online=true", "")
		var bs []struct {
			ID string `json:"id"`
		}
		json.Unmarshal([]byte(body), &bs)
		if len(bs) > 0 {
			board = bs[0].ID
		}
		return board != ""
	})

	filler := tmpfs.Fill(t, data)
	// Room again before the gateway stops (cleanups run last first), as
	// an operator would make it: it then saves what it still holds and
	// exits cleanly.
	t.Cleanup(func() { os.Remove(filler) })
	// The operator labels the board again and again, each time with more
	// (and longer) labels, up to the most a board takes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			labels := map[string]string{}
			for k := range i%64 + 1 {
				labels[fmt.Sprintf("label-%02d", k)] = strings.Repeat(fmt.Sprint(i%10), 63)
			}
			raw, _ := json.Marshal(labels)
			request(t, "PATCH", base+"/v1/boards/"+board+"/labels", "", "application/json", strings.NewReader(string(raw)))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	stopLabels := func() { close(stop); wg.Wait() }
	failing := func(fams map[string]*dto.MetricFamily) (registry, audit float64) {
		return familySum(fams, "holo_gateway_registry_write_errors_total", ""), familySum(fams, "holo_gateway_audit_dropped_total", "")
	}
	sc := scrapeWhile(t, base, "registry writes failing and audit records lost", 60*time.Second,
		func(f map[string]*dto.MetricFamily) bool { r, a := failing(f); return r > 0 && a > 0 },
		func(before, after map[string]*dto.MetricFamily) bool {
			r0, a0 := failing(before)
			r, a := failing(after)
			return r > r0 && a > a0
		})
	stopLabels()
	r0, a0 := failing(sc.before)
	r, a := failing(sc.after)
	t.Logf("between the scrapes (%v): registry write errors %.0f -> %.0f, audit records lost %.0f -> %.0f",
		sc.between().Round(time.Millisecond), r0, r, a0, a)
	runPromtool(t, promtool, sc.step(), []any{sc.test("the demo with its data on a full disk while a board is labelled", 20*time.Minute, nil,
		expectAlert("HoloRegistryWriteErrors", "critical", "20m", nil),
		expectAlert("HoloAuditRecordsDropped", "warning", "20m", nil),
	)})
}
