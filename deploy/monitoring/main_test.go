// Package monitoring_test shows that the mixin in deploy/monitoring
// (rules.yml, alerts.yml) fires on what real gateways export: the tests
// here run holo-gateway demo processes, make the alerts' conditions true,
// scrape /metrics, and let promtool evaluate the shipped rules over the
// scraped series. The unit tests of the rules (tests/*.yml) are run by
// deploy's TestAlertRulesPromtool.
package monitoring_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/holofleet/holofleet/bus/testbin"
	"github.com/holofleet/holofleet/gateway/api"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestMain runs every test of the package at once: each waits on its own
// gateways, brokers and promtool, the test process itself computes little.
func TestMain(m *testing.M) { testbin.RunParallel(m, 6) }

// gatewayBinary is the holo-gateway the tests run: $HOLO_GATEWAY_BIN, or
// one built from this tree (testbin keeps it between runs).
func gatewayBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HOLO_GATEWAY_BIN"); p != "" {
		return p
	}
	return testbin.Build(t, "./cmd/holo-gateway", false)
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer = testbin.Output

// Lines of holo-gateway's banner.
var (
	apiLine  = regexp.MustCompile(`API:\s+(http://\S+)`)
	sacnLine = regexp.MustCompile(`sacn:\s+udp (\S+)`)
)

// noBroker is an MQTT URL nothing answers on.
const noBroker = "tcp://127.0.0.1:1"

// request sends one HTTP request and returns its status and body.
func request(t *testing.T, method, url, token, ctype string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return request(t, "GET", url, token, "", nil)
}

func post(t *testing.T, url, ctype string, body []byte) (int, string) {
	t.Helper()
	return request(t, "POST", url, "", ctype, bytes.NewReader(body))
}

// fireScenes applies a scene of a new colour to group 1 ten times a second
// until the returned stop is called (or the test ends), as a show would.
func fireScenes(t *testing.T, base string) (stop func()) {
	t.Helper()
	return postEvery(t, base+"/v1/actions", 100*time.Millisecond, func(colour int) string {
		return fmt.Sprintf(`{"selector":{"groups":[1]},"kind":"scene_apply","body":{"scene":{"leds":{"mode":"solid","colour":"#%06x"}}}}`, colour*997)
	})
}

// postEvery posts body(0), body(1), ... (JSON) to url, one every d, until
// the returned stop is called (or the test ends); what the server answers
// is not looked at.
func postEvery(t *testing.T, url string, d time.Duration, body func(i int) string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			resp, err := http.Post(url, "application/json", strings.NewReader(body(i)))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// scrapes are two scrapes of a gateway while a condition holds.
type scrapes struct {
	before, after     map[string]*dto.MetricFamily
	atBefore, atAfter time.Time
}

// scrapeWhile scrapes base until holds says the condition (what) is
// true, then again, 2 s on or more, until grown says it went on between
// the two; it fails the test after d of either.
func scrapeWhile(t *testing.T, base, what string, d time.Duration, holds func(map[string]*dto.MetricFamily) bool,
	grown func(before, after map[string]*dto.MetricFamily) bool) scrapes {
	t.Helper()
	var s scrapes
	waitFor(t, what, d, func() bool {
		s.before, s.atBefore = scrapeFamilies(t, base)
		return holds(s.before)
	})
	waitFor(t, what+", and more of it 2 s on", d, func() bool {
		s.after, s.atAfter = scrapeFamilies(t, base)
		return s.between() >= 2*time.Second && grown(s.before, s.after)
	})
	return s
}

// between is the time from the first scrape to the second.
func (s scrapes) between() time.Duration { return s.atAfter.Sub(s.atBefore) }

// step is the promtool interval the scrapes stand for: the time between
// them in whole seconds.
func (s scrapes) step() time.Duration { return max(s.between().Round(time.Second), time.Second) }

// test is a promtool test case over s's series carried on for window
// (promtoolSeries, with growing), expecting alerts at its end.
func (s scrapes) test(name string, window time.Duration, growing map[string]bool, alerts ...any) map[string]any {
	return map[string]any{
		"name":            name,
		"interval":        s.step().String(),
		"input_series":    promtoolSeries(s.before, s.after, int(window/s.step()), oneOff, growing),
		"alert_rule_test": alerts,
	}
}

// familySum adds up the values of family name's series (those with label,
// name="value", when it is not empty).
func familySum(fams map[string]*dto.MetricFamily, name, label string) float64 {
	s := 0.0
	for _, m := range fams[name].GetMetric() {
		ok := label == ""
		for _, l := range m.GetLabel() {
			ok = ok || fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()) == label
		}
		if ok {
			s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return s
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stalledWatcher opens a gRPC event stream on the gateway at base and
// never reads it, as a client that hangs would: the stream's flow-control
// window is held at 64 KiB (a fixed window turns off gRPC's growing of
// it), so once that much is on its way the gateway's sends wait and the
// watcher's queue fills. The stream stays open until the test ends.
func stalledWatcher(t *testing.T, base string) {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := fleetv1.NewFleetServiceClient(conn).WatchEvents(ctx, &fleetv1.WatchEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The headers come once the watch is in place; nothing is read after.
	if md, err := stream.Header(); err != nil || len(md.Get(api.WatchHeader)) == 0 {
		t.Fatal("event stream not watching:", md, err)
	}
}
