package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/gateway/demo"
)

// monitoringDir is the repository's deploy/monitoring/, from this package.
const monitoringDir = "../../deploy/monitoring"

// The labels Prometheus would add to the demo gateway's series.
const (
	alertJob      = "holo-gateway"
	alertInstance = "demo"
)

// TestAlertsFireInDemo makes the conditions of five alerts true in a real
// demo gateway and shows, with promtool, that the shipped rules fire on
// what it exports:
//
//   - a rollout of an image every board refuses fails its threshold and
//     pauses (HoloRolloutFailed);
//   - a LAN board is killed (HoloBoardOffline; one board of three is
//     HoloBoardsOfflineMany);
//   - a node on the simulated RS485 line floods it with noise
//     (HoloLineErrors);
//   - the MQTT broker the bridge is told to use does not answer
//     (HoloMQTTDisconnected).
//
// It scrapes /metrics before and after, turns the two scrapes into
// promtool input series (gauges keep the value of the second scrape,
// counters go on growing at the pace measured between the two, one step
// per real interval), and runs promtool test rules with the shipped
// recording rules and the shipped alerts' expressions, durations and
// labels (their annotations are left out: promtool compares them too, and
// the unit tests in deploy/monitoring/tests check them).
func TestAlertsFireInDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed (CI installs the Debian package prometheus)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	t.Parallel()

	lanBoard := boardtest.StartInProcess(t, boardtest.InProcOptions{})
	data := t.TempDir()
	base, _ := start(t, "demo", "--data", data, "--listen", "127.0.0.1:0", "--demo-boards", "2", "--demo-groups", "1",
		"--mqtt", noBroker, "--board", lanBoard.URL)

	type board struct {
		ID     string `json:"id"`
		Online bool   `json:"online"`
		URL    string `json:"url"`
	}
	boards := func() []board {
		code, body := get(t, base+"/v1/boards", "")
		var bs []board
		if code != 200 || json.Unmarshal([]byte(body), &bs) != nil {
			t.Fatalf("GET /v1/boards: %d %s", code, body)
		}
		return bs
	}
	var killed string
	waitFor(t, "three boards online", 30*time.Second, func() bool {
		bs := boards()
		n := 0
		for _, b := range bs {
			if b.Online {
				n++
			}
		}
		return n == 3
	})
	// The LAN board is the one the demo did not start: its id is what its
	// own API reports.
	code, body := get(t, lanBoard.URL+"/api/v1/info", "")
	var info struct {
		ID string `json:"id"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &info) != nil || info.ID == "" {
		t.Fatalf("board info: %d %s", code, body)
	}
	killed = info.ID
	var demoBoards []string
	for _, b := range boards() {
		if b.ID != killed {
			demoBoards = append(demoBoards, `"`+b.ID+`"`)
		}
	}

	// A rollout that fails its threshold: the plan bounds the image's
	// transfer to 1 ns, past before the first byte leaves, so every board
	// times out and the wave fails.
	exe := bytes.Repeat([]byte("holo-board 9.9.9 "), 4096)
	img, err := image.Pack(image.Desc{Version: "9.9.9", Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	code, body = post(t, base+"/v1/artifacts?name=other.bin", "application/octet-stream", img)
	sha := regexp.MustCompile(`"sha256":\s*"([0-9a-f]{64})"`).FindStringSubmatch(body)
	if code != 200 || sha == nil {
		t.Fatalf("upload: %d %s", code, body)
	}
	code, body = post(t, base+"/v1/rollouts", "application/json", []byte(`{"name":"alert-test","artifact":"`+sha[1]+
		`","target":{"boards":[`+strings.Join(demoBoards, ",")+`]},"thresholds":{"wave_failure":0.5},"timeouts":{"transfer":"1ns"}}`))
	rollout := regexp.MustCompile(`"id":\s*"([^"]+)"`).FindStringSubmatch(body)
	if code != 200 || rollout == nil {
		t.Fatalf("rollout: %d %s", code, body)
	}
	waitFor(t, "the rollout paused by its failure threshold", 45*time.Second, func() bool {
		_, body := get(t, base+"/v1/rollouts/"+rollout[1], "")
		return strings.Contains(body, `"state":"paused"`) || strings.Contains(body, `"state": "paused"`)
	})

	before, atBefore := scrapeFamilies(t, base)

	// The conditions: the board dies, the line is flooded.
	lanBoard.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	noise, err := simline.Dial(ctx, filepath.Join(data, "demo", demo.HubSocket), simline.NodeOptions{Name: "noise"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noise.Close() })
	go func() { _, _ = io.Copy(io.Discard, noise) }()
	go func() {
		rng := rand.New(rand.NewPCG(32, 32))
		buf := make([]byte, 48)
		deadline := time.Now().Add(60 * time.Second) // bounded: the test ends long before
		for ctx.Err() == nil && time.Now().Before(deadline) {
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			if _, err := noise.Write(buf); err != nil {
				return
			}
		}
	}()

	sumOf := func(fams map[string]*dto.MetricFamily, names ...string) float64 {
		sum := 0.0
		for _, n := range names {
			if f := fams[n]; f != nil {
				for _, m := range f.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		return sum
	}
	lineErrors := func(fams map[string]*dto.MetricFamily) float64 {
		return sumOf(fams, "holo_gateway_line_bad_crc_total", "holo_gateway_line_garbage_total", "holo_gateway_line_timeouts_total")
	}
	lineReplies := func(fams map[string]*dto.MetricFamily) float64 {
		return sumOf(fams, "holo_gateway_line_receive_frames_total", "holo_gateway_line_receive_json_lines_total")
	}
	var after map[string]*dto.MetricFamily
	var atAfter time.Time
	waitFor(t, "the killed board offline and line errors counted", 45*time.Second, func() bool {
		offline := false
		for _, b := range boards() {
			if b.ID == killed && !b.Online {
				offline = true
			}
		}
		if !offline {
			return false
		}
		after, atAfter = scrapeFamilies(t, base)
		return lineErrors(after)-lineErrors(before) >= 20 && atAfter.Sub(atBefore) >= 2*time.Second
	})
	cancel()
	t.Logf("between the scrapes (%v): %.0f line errors, %.0f replies", atAfter.Sub(atBefore).Round(time.Millisecond),
		lineErrors(after)-lineErrors(before), lineReplies(after)-lineReplies(before))

	dir := t.TempDir()
	writeAlertsWithoutAnnotations(t, filepath.Join(monitoringDir, "alerts.yml"), filepath.Join(dir, "alerts.yml"))
	copyFileTo(t, filepath.Join(monitoringDir, "rules.yml"), filepath.Join(dir, "rules.yml"))

	step := atAfter.Sub(atBefore).Round(time.Second)
	steps := int((20 * time.Minute) / step)
	labels := func(extra map[string]string) map[string]string {
		l := map[string]string{"severity": "", "job": alertJob, "instance": alertInstance}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	expect := func(name, severity string, extra map[string]string) map[string]any {
		l := labels(extra)
		l["severity"] = severity
		return map[string]any{"alertname": name, "eval_time": "20m", "exp_alerts": []any{map[string]any{"exp_labels": l}}}
	}
	test := map[string]any{
		"rule_files":          []string{"rules.yml", "alerts.yml"},
		"evaluation_interval": step.String(),
		"tests": []any{map[string]any{
			"name":         "the demo after a failed rollout, a board killed, the line flooded and the broker lost",
			"interval":     step.String(),
			"input_series": promtoolSeries(before, after, steps),
			"alert_rule_test": []any{
				expect("HoloBoardOffline", "warning", map[string]string{"board": killed}),
				expect("HoloBoardsOfflineMany", "critical", nil),
				expect("HoloLineErrors", "warning", map[string]string{"line": demo.LineName}),
				expect("HoloMQTTDisconnected", "warning", nil),
				expect("HoloRolloutFailed", "warning", map[string]string{"rollout": rollout[1]}),
			},
		}},
	}
	raw, err := yaml.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "demo.yml")
	if err := os.WriteFile(testFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "demo.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules on the demo's series: %v\n%s", err, out)
	}
}

// scrapeFamilies scrapes base/metrics and parses it.
func scrapeFamilies(t *testing.T, base string) (map[string]*dto.MetricFamily, time.Time) {
	t.Helper()
	at := time.Now()
	code, body := get(t, base+"/metrics", "")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams, at
}

// sample is one series of a scrape, named as PromQL names it.
type sample struct {
	series  string
	value   float64
	counter bool
}

// samples flattens metric families into series, adding job and instance
// as Prometheus would.
func samples(fams map[string]*dto.MetricFamily) map[string]sample {
	out := map[string]sample{}
	add := func(name string, labels []*dto.LabelPair, extra [2]string, v float64, counter bool) {
		l := map[string]string{"job": alertJob, "instance": alertInstance}
		for _, p := range labels {
			l[p.GetName()] = p.GetValue()
		}
		if extra[0] != "" {
			l[extra[0]] = extra[1]
		}
		keys := make([]string, 0, len(l))
		for k := range l {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var sb strings.Builder
		sb.WriteString(name + "{")
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(k + "=" + strconv.Quote(l[k]))
		}
		sb.WriteString("}")
		out[sb.String()] = sample{sb.String(), v, counter}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			ls := m.GetLabel()
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, ls, [2]string{}, m.GetCounter().GetValue(), true)
			case dto.MetricType_GAUGE:
				add(name, ls, [2]string{}, m.GetGauge().GetValue(), false)
			case dto.MetricType_UNTYPED:
				add(name, ls, [2]string{}, m.GetUntyped().GetValue(), false)
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", ls, [2]string{"le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}, float64(b.GetCumulativeCount()), true)
				}
				add(name+"_bucket", ls, [2]string{"le", "+Inf"}, float64(h.GetSampleCount()), true)
				add(name+"_count", ls, [2]string{}, float64(h.GetSampleCount()), true)
				add(name+"_sum", ls, [2]string{}, h.GetSampleSum(), true)
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, ls, [2]string{"quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)}, q.GetValue(), false)
				}
				add(name+"_count", ls, [2]string{}, float64(s.GetSampleCount()), true)
				add(name+"_sum", ls, [2]string{}, s.GetSampleSum(), true)
			}
		}
	}
	return out
}

// promtoolSeries turns two scrapes into promtool input series of steps+1
// samples: a gauge is its first value then its second one from then on; a
// counter starts at its first value and grows by what it grew between the
// scrapes at every step. A series only in the second scrape starts there.
func promtoolSeries(before, after map[string]*dto.MetricFamily, steps int) []map[string]string {
	b, a := samples(before), samples(after)
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out []map[string]string
	for _, k := range keys {
		s := a[k]
		if math.IsNaN(s.value) || math.IsInf(s.value, 0) {
			continue
		}
		first, ok := b[k]
		if !ok || math.IsNaN(first.value) || math.IsInf(first.value, 0) {
			first = s
		}
		var values string
		if s.counter {
			d := s.value - first.value
			if d < 0 { // a reset between the scrapes
				first, d = s, 0
			}
			values = fmt.Sprintf("%s+%sx%d", num(first.value), num(d), steps)
		} else {
			values = fmt.Sprintf("%s %s+0x%d", num(first.value), num(s.value), steps-1)
		}
		out = append(out, map[string]string{"series": k, "values": values})
	}
	return out
}

// writeAlertsWithoutAnnotations copies an alerting rule file leaving out
// every rule's annotations.
func writeAlertsWithoutAnnotations(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string           `yaml:"name"`
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
			n++
		}
	}
	if n == 0 {
		t.Fatalf("%s: no rules", from)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFileTo(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAlertRulesNameExportedMetrics parses every rule's expression and
// checks that each metric it reads is one the gateway exports (or a
// recording rule of the mixin, or Prometheus's own up): a metric renamed
// in code fails here, not silently in production.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	type rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	recorded := map[string]bool{"up": true}
	var all []rules
	for _, f := range []string{"rules.yml", "alerts.yml"} {
		raw, err := os.ReadFile(filepath.Join(monitoringDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var r rules
		if err := yaml.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				if rule.Record != "" {
					recorded[rule.Record] = true
				}
			}
		}
		all = append(all, r)
	}
	for _, r := range all {
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				names, err := queryNames(rule.Expr)
				if err != nil {
					t.Errorf("%s%s: %v", rule.Alert, rule.Record, err)
					continue
				}
				for _, n := range names {
					if !exported[n] && !recorded[n] {
						t.Errorf("%s%s reads %s, which the gateway does not export", rule.Alert, rule.Record, n)
					}
				}
			}
		}
	}
}
