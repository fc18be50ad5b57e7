package monitoring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	"github.com/holofleet/holofleet/gateway/dmx/sacn"
	"github.com/holofleet/holofleet/gateway/nettest"
)

// monitoringDir is the repository's deploy/monitoring/: this package.
const monitoringDir = "."

// The labels Prometheus would add to the demo gateway's series.
const (
	alertJob      = "holo-gateway"
	alertInstance = "demo"
)

// TestAlertsFireInDemo makes the conditions of alerts true in a real demo
// gateway (two simulated boards on the RS485 line and two LAN boards) and
// shows, with promtool, that the shipped rules fire on what it exports.
// One run carries the conditions in three phases, each between two
// scrapes of /metrics:
//
//  1. An sACN desk changes group 1's look 40 times a second, more group
//     frames than --dmx-line-share (0.005) allows; the line is otherwise
//     quiet (HoloDMXLineShareSaturated).
//  2. Then, together, as they do not interfere: a rollout of an image its
//     board refuses has failed its threshold and paused
//     (HoloRolloutFailed); a rollout whose strict window opens tomorrow
//     waits, running (HoloRolloutStalled); a LAN board is killed
//     (HoloBoardOffline; one board of four is HoloBoardsOfflineMany) and
//     a cue aimed at it fires without it (HoloCueFireFailed); a node on
//     the simulated line floods it with noise (HoloLineErrors,
//     HoloLineErrorsHigh); the MQTT broker the bridge is told to use
//     does not answer (HoloMQTTDisconnected) while the scenes fired pile
//     up in its spool (HoloMQTTSpoolGrowing); a board of the applied
//     installation is changed by hand (HoloInstallationDrifted); a
//     second sACN desk goes silent (HoloDMXSourceLost); show actions are
//     asked for a moment already 500 ms past (HoloFiresLate).
//  3. Last, the gateway stops: its scrapes fail (HoloGatewayDown, on the
//     up series Prometheus would record).
//
// Each pair of scrapes becomes promtool input series, one sample per real
// interval between them: a gauge keeps the value of the second scrape
// (the condition holds), a counter goes on growing at the pace measured
// between the two (what keeps happening goes on happening); the counters
// of one-off events (a source lost, a cue fired) and the gauges that
// grow while their condition holds (the MQTT spool, far under its bound
// over the window) are the exceptions, named in oneOff and growing. Then
// promtool test rules runs the shipped recording rules and the shipped
// alerts' expressions, durations and labels (their annotations are left
// out: promtool compares them too, and the unit tests in
// deploy/monitoring/tests check them) over those series.
func TestAlertsFireInDemo(t *testing.T) {
	promtool := alertTest(t, "a simulated installation")

	lanBoard := boardtest.StartInProcess(t, boardtest.InProcOptions{})
	// A second LAN board, never killed: one board of four goes offline.
	otherBoard := boardtest.StartInProcess(t, boardtest.InProcOptions{})
	data := t.TempDir()
	base, out, stopGateway := startStoppable(t, "demo", "--data", data, "--listen", "127.0.0.1:0", "--demo-boards", "2", "--demo-groups", "1",
		"--mqtt", noBroker, "--board", lanBoard.URL, "--board", otherBoard.URL, "--dmx-line-share", strconv.FormatFloat(dmxShare, 'g', -1, 64))
	waitFor(t, "the whole banner", 20*time.Second, func() bool { return strings.Contains(out.String(), "Ctrl-C stops.") })
	sacnAddr := sacnLine.FindStringSubmatch(out.String())
	if sacnAddr == nil || !strings.Contains(out.String(), "universe 1 address 1-11 holo -> group 1") {
		t.Fatalf("banner:\n%s", out.String())
	}

	type board struct {
		ID     string `json:"id"`
		Online bool   `json:"online"`
	}
	boards := func() []board {
		code, body := get(t, base+"/v1/boards", "")
		var bs []board
		if code != 200 || json.Unmarshal([]byte(body), &bs) != nil {
			t.Fatalf("GET /v1/boards: %d %s", code, body)
		}
		return bs
	}
	waitFor(t, "four boards online", 30*time.Second, func() bool {
		n := 0
		for _, b := range boards() {
			if b.Online {
				n++
			}
		}
		return n == 4
	})
	// The LAN boards are the ones the demo did not start: their ids are
	// what their own API reports.
	boardID := func(url string) string {
		code, body := get(t, url+"/api/v1/info", "")
		var info struct {
			ID string `json:"id"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &info) != nil || info.ID == "" {
			t.Fatalf("board info: %d %s", code, body)
		}
		return info.ID
	}
	killed := boardID(lanBoard.URL)
	var body string
	ids := map[int]string{} // the demo's boards by line address
	waitFor(t, "the demo boards on the line", 30*time.Second, func() bool {
		_, body := get(t, base+"/v1/boards", "")
		var bs []struct {
			ID      string `json:"id"`
			Address int    `json:"address"`
		}
		json.Unmarshal([]byte(body), &bs)
		for _, b := range bs {
			if b.Address > 0 {
				ids[b.Address] = b.ID
			}
		}
		return ids[1] != "" && ids[2] != ""
	})
	must := func(code int, body string) string {
		t.Helper()
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		return body
	}
	postJSON := func(path, body string) (int, string) {
		t.Helper()
		return post(t, base+path, "application/json", []byte(body))
	}

	// A rollout that fails its threshold: the plan bounds the image's
	// transfer to 1 ns, past before the first byte leaves, so its board
	// (1) times out and the wave fails.
	exe := bytes.Repeat([]byte("holo-board 9.9.9 "), 4096)
	img, err := image.Pack(image.Desc{Version: "9.9.9", Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	body = must(post(t, base+"/v1/artifacts?name=other.bin", "application/octet-stream", img))
	sha := regexp.MustCompile(`"sha256":\s*"([0-9a-f]{64})"`).FindStringSubmatch(body)
	if sha == nil {
		t.Fatalf("upload: %s", body)
	}
	rolloutID := regexp.MustCompile(`"id":\s*"([^"]+)"`)
	body = must(postJSON("/v1/rollouts", `{"name":"alert-test","artifact":"`+sha[1]+
		`","target":{"boards":["`+ids[1]+`"]},"thresholds":{"wave_failure":0.5},"timeouts":{"transfer":"1ns"}}`))
	failed := rolloutID.FindStringSubmatch(body)
	// A rollout that cannot progress: its board (2) is labelled
	// show=live, held out of every rollout until someone lifts the label
	// (the gate reads the label, asking the board nothing, so the line's
	// noise below cannot fail it), the rollout running, nothing sent.
	must(request(t, "PATCH", base+"/v1/boards/"+ids[2]+"/labels", "", "application/json", strings.NewReader(`{"show":"live"}`)))
	body = must(postJSON("/v1/rollouts", `{"name":"stall-test","artifact":"`+sha[1]+`","target":{"boards":["`+ids[2]+`"]}}`))
	stalled := rolloutID.FindStringSubmatch(body)
	// A rollout that waits as planned: its strict window opens tomorrow,
	// so its board (the LAN board never killed) waits, the rollout running, nothing sent; no one
	// is to be paged for that.
	from := time.Now().Add(24 * time.Hour).UTC()
	body = must(postJSON("/v1/rollouts", `{"name":"window-test","artifact":"`+sha[1]+`","target":{"boards":["`+boardID(otherBoard.URL)+
		`"]},"window":{"strict":true,"intervals":[{"from":"`+from.Format(time.RFC3339)+`","to":"`+from.Add(time.Hour).Format(time.RFC3339)+`"}]}}`))
	windowed := rolloutID.FindStringSubmatch(body)
	if failed == nil || stalled == nil || windowed == nil {
		t.Fatalf("rollouts: %v %v %v", failed, stalled, windowed)
	}
	rolloutState := func(id string) string {
		_, body := get(t, base+"/v1/rollouts/"+id, "")
		var r struct {
			State string `json:"state"`
		}
		json.Unmarshal([]byte(body), &r)
		return r.State
	}
	waitFor(t, "the rollout paused by its failure threshold", 45*time.Second, func() bool { return rolloutState(failed[1]) == "paused" })
	waitFor(t, "the stalled rollout's board held at the gate", 45*time.Second, func() bool {
		_, body := get(t, base+"/v1/rollouts/"+stalled[1]+"/boards", "")
		return strings.Contains(body, `"waiting":"show: labelled show=live"`)
	})

	// The installation: board 2 holds a brightness; wait until the
	// gateway has seen it in sync.
	must(postJSON("/v1/installation/apply?message=alerts",
		`{"version":1,"name":"alerts","profiles":{"dim":{"settings":{"leds":{"brightness":25}}}},"assignments":[{"profile":"dim","board":"`+ids[2]+`"}]}`))
	installState := func() string {
		_, body := get(t, base+"/v1/installation/status", "")
		m := regexp.MustCompile(`"board":\s*"` + ids[2] + `"[^}]*?"state":\s*"([a-z_]+)"`).FindStringSubmatch(body)
		if m == nil {
			m = regexp.MustCompile(`"state":\s*"([a-z_]+)"[^}]*?"board":\s*"` + ids[2] + `"`).FindStringSubmatch(body)
		}
		if m == nil {
			return ""
		}
		return m[1]
	}
	waitFor(t, "board 2 in sync with the installation", 45*time.Second, func() bool { return installState() == "in_sync" })

	// A cue list aimed at the LAN board, and an sACN desk driving group 1.
	must(request(t, "PUT", base+"/v1/cuelists/alerts", "", "application/json", strings.NewReader(
		`{"name":"alerts","cues":[{"number":"1","actions":[{"kind":"leds","selector":{"boards":["`+killed+`"]},"body":{"mode":"off"}}]},`+
			`{"number":"2","actions":[{"kind":"leds","selector":{"boards":["`+killed+`"]},"body":{"mode":"off"}}]}]}`)))
	must(postJSON("/v1/cuelists/alerts/go?asap=true", `{}`))
	// Two sACN desks on universe 1 (group 1's fixture), of one priority:
	// A goes on, B sends a few looks, then goes silent.
	sc := nettest.DialUDP(t, sacnAddr[1])
	sendLook := func(cid byte, name string, seq int) {
		slots := make([]byte, 512)
		copy(slots, []byte{255, byte(seq), byte(seq * 7), byte(seq * 13), 0})
		pkt, _ := sacn.AppendData(nil, sacn.Data{CID: [16]byte{cid}, SourceName: name, Priority: 100, Sequence: byte(seq), Universe: 1, Slots: slots})
		sc.Write(pkt)
	}
	for i := range 5 {
		sendLook(7, "desk A", i+1)
		sendLook(8, "desk B", i+1)
	}
	waitFor(t, "both sACN desks live", 10*time.Second, func() bool {
		_, body := get(t, base+"/v1/dmx/patch", "")
		return strings.Contains(body, "desk A") && strings.Contains(body, "desk B")
	})

	sumOf := func(fams map[string]*dto.MetricFamily, names ...string) float64 {
		sum := 0.0
		for _, n := range names {
			if f := fams[n]; f != nil {
				for _, m := range f.GetMetric() {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
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
	// Cleanups run last first: cancel, close the noise node (below), then
	// wait for the goroutines.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	stopB := make(chan struct{})
	wg.Go(func() { // desk B, 10 looks a second until it goes silent
		for seq := 6; ; seq++ {
			sendLook(8, "desk B", seq)
			select {
			case <-ctx.Done():
				return
			case <-stopB:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	// The first condition, alone on the line: desk A changes group 1's
	// look 40 times a second, more group frames than the line share
	// allows.
	wg.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for seq := 6; ctx.Err() == nil; seq++ {
			sendLook(7, "desk A", seq)
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
	dmxLine := func(fams map[string]*dto.MetricFamily) float64 { return sumOf(fams, "holo_dmx_line_seconds_total") }
	// The first scrape once the share is spent (DMX sends wait for it
	// from then on), the second 10 s later: a share of 0.005 is a group
	// frame every 0.34 s, so the count over the interval is exact to a
	// frame in 30.
	var dmxStart, before map[string]*dto.MetricFamily
	var atDMXStart, atBefore time.Time
	waitFor(t, "DMX sends on the line", 30*time.Second, func() bool {
		dmxStart, atDMXStart = scrapeFamilies(t, base)
		return dmxLine(dmxStart) > 0 && sumOf(dmxStart, "holo_dmx_coalesced_total") > 0
	})
	waitFor(t, "DMX line time taken for 10 s", 60*time.Second, func() bool {
		before, atBefore = scrapeFamilies(t, base)
		return atBefore.Sub(atDMXStart) >= 10*time.Second
	})
	t.Logf("DMX alone (%v): %.3f s of line time, %.2f of the share", atBefore.Sub(atDMXStart).Round(time.Millisecond),
		dmxLine(before)-dmxLine(dmxStart), (dmxLine(before)-dmxLine(dmxStart))/atBefore.Sub(atDMXStart).Seconds()/dmxShare)

	// The conditions. Board 2's brightness is changed by hand (before the
	// line is flooded: the call goes over it); the LAN board dies; the
	// line is flooded; sACN desk B goes silent while desk A changes group
	// 1's look at 40 Hz; show actions ask for a moment 500 ms past
	// (scenes: each one's start and the end of the one before are
	// happenings, which the MQTT bridge spools for the broker).
	must(postJSON("/v1/boards/"+ids[2]+"/call", `{"method":"PATCH","path":"/settings","body":{"leds":{"brightness":90}}}`))
	lanBoard.Stop()
	close(stopB)
	noise, err := simline.Dial(ctx, filepath.Join(data, "demo", demo.HubSocket), simline.NodeOptions{Name: "noise"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { noise.Close() }) // before wg.Wait: the reader ends with the node
	t.Cleanup(cancel)
	wg.Go(func() { _, _ = io.Copy(io.Discard, noise) })
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(32, 32))
		buf := make([]byte, 48)
		deadline := time.Now().Add(90 * time.Second) // bounded: the test ends long before
		for ctx.Err() == nil && time.Now().Before(deadline) {
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			if _, err := noise.Write(buf); err != nil {
				return
			}
		}
	})
	var lateFires []func()
	for range 3 {
		lateFires = append(lateFires, postEvery(t, base+"/v1/actions", 100*time.Millisecond, func(int) string {
			at := time.Now().Add(-500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			return `{"selector":{"boards":["` + ids[1] + `"]},"kind":"scene_apply","body":{"scene":{"leds":{"mode":"solid","colour":"teal"}}},"fire_at":"` + at + `"}`
		}))
	}

	cueFired := false
	var after map[string]*dto.MetricFamily
	var atAfter time.Time
	conditions := func() string {
		offline := false
		for _, b := range boards() {
			if b.ID == killed && !b.Online {
				offline = true
			}
		}
		if !offline {
			return "the LAN board is online"
		}
		if !cueFired { // the cue fires once its board is known to be offline
			must(postJSON("/v1/cuelists/alerts/go?asap=true", `{}`))
			cueFired = true
		}
		after, atAfter = scrapeFamilies(t, base)
		switch {
		case lineErrors(after)-lineErrors(before) < 20:
			return "few line errors"
		case atAfter.Sub(atBefore) < 2*time.Second:
			return "less than 2 s between the scrapes"
		case !hasSeries(after, "holo_gateway_installation_boards", `state="drifted"`, 1):
			return "the drift watcher has found no drifted board"
		case sumOf(after, "holo_dmx_sources_lost_total") < 1:
			return "no DMX source lost"
		case sumOf(after, "holo_cue_fires_failed_total") < 1:
			return "no cue failed"
		case sumOf(after, "holo_mqtt_spool_messages") <= 100:
			return fmt.Sprintf("%v messages in the MQTT spool", sumOf(after, "holo_mqtt_spool_messages"))
		case sumOf(after, "holo_gateway_fire_lateness_seconds") <= sumOf(before, "holo_gateway_fire_lateness_seconds"):
			return "no late fire"
		}
		return ""
	}
	var why string // what is not true yet
	deadline := time.Now().Add(90 * time.Second)
	for {
		why = conditions()
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conditions are not all true after 90 s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	for _, stop := range lateFires {
		stop()
	}
	noise.Close()
	wg.Wait()
	t.Logf("between the scrapes (%v): %.0f line errors, %.0f replies; DMX line time %.3f s; spool %.0f -> %.0f; late fires %.0f",
		atAfter.Sub(atBefore).Round(time.Millisecond), lineErrors(after)-lineErrors(before), lineReplies(after)-lineReplies(before),
		sumOf(after, "holo_dmx_line_seconds_total")-sumOf(before, "holo_dmx_line_seconds_total"),
		sumOf(before, "holo_mqtt_spool_messages"), sumOf(after, "holo_mqtt_spool_messages"),
		sumOf(after, "holo_gateway_fire_lateness_seconds")-sumOf(before, "holo_gateway_fire_lateness_seconds"))

	// What a failure's log shows of the run.
	diag := dumpFamilies(after, "holo_dmx_") + dumpFamilies(after, "holo_gateway_installation_") + dumpFamilies(after, "holo_gateway_rollout_boards")
	for _, r := range []string{failed[1], stalled[1], windowed[1]} {
		_, body := get(t, base+"/v1/rollouts/"+r+"/boards", "")
		diag += "rollout " + r + ": " + body + "\n"
	}
	_, body = get(t, base+"/v1/dmx/patch", "")
	diag += "DMX patch: " + body + "\n"

	// Last, the gateway stops: a scrape fails as Prometheus's would.
	stopGateway()
	atDown := time.Now()
	if resp, err := http.Get(base + "/metrics"); err == nil {
		resp.Body.Close()
		t.Fatalf("the stopped gateway still answers /metrics: %s", resp.Status)
	}

	step := max(atAfter.Sub(atBefore).Round(time.Second), time.Second)
	steps := int((20 * time.Minute) / step)
	dmxStep := max(atBefore.Sub(atDMXStart).Round(time.Second), time.Second)
	expect := expectAlert
	// The scrapes that succeeded (one a step from the first to the stop),
	// then the failed ones from the stop on, for ten minutes.
	upSteps := int(atDown.Sub(atBefore) / step)
	downAt := time.Duration(upSteps+1) * step
	up := map[string]string{"series": fmt.Sprintf(`up{instance=%q, job=%q}`, alertInstance, alertJob),
		"values": fmt.Sprintf("1+0x%d 0+0x%d", upSteps, int(10*time.Minute/step))}
	runPromtool(t, promtool, step, []any{
		map[string]any{
			"name": "the demo after a failed rollout, a stalled one, a board killed, the line flooded, the broker lost, " +
				"a board changed by hand, a desk gone silent, another one flooding the line and fires asked too late",
			"interval":     step.String(),
			"input_series": promtoolSeries(before, after, steps, oneOff, growing),
			"alert_rule_test": []any{
				expect("HoloBoardOffline", "warning", "20m", map[string]string{"board": killed}),
				expect("HoloBoardsOfflineMany", "critical", "20m", nil),
				expect("HoloLineErrors", "warning", "20m", map[string]string{"line": demo.LineName}),
				expect("HoloLineErrorsHigh", "critical", "20m", map[string]string{"line": demo.LineName}),
				expect("HoloMQTTDisconnected", "warning", "20m", nil),
				expect("HoloMQTTSpoolGrowing", "warning", "20m", nil),
				expect("HoloRolloutFailed", "warning", "20m", map[string]string{"rollout": failed[1]}),
				expect("HoloRolloutStalled", "warning", "20m", map[string]string{"rollout": stalled[1]}),
				// Not the rollout waiting for its window (only the
				// stalled one is expected).
				expect("HoloInstallationDrifted", "warning", "20m", nil),
				expect("HoloFiresLate", "warning", "20m", nil),
				// One-off events: their alerts hold for 10 minutes.
				expect("HoloDMXSourceLost", "warning", "5m", nil),
				expect("HoloCueFireFailed", "warning", "5m", map[string]string{"list": "alerts"}),
			},
		},
		map[string]any{
			"name":         "the demo while a desk asks more of the line than its DMX share",
			"interval":     dmxStep.String(),
			"input_series": promtoolSeries(dmxStart, before, int((20*time.Minute)/dmxStep), oneOff, growing),
			"alert_rule_test": []any{
				expect("HoloDMXLineShareSaturated", "warning", "20m", map[string]string{"line": demo.LineName}),
			},
		},
		map[string]any{
			"name":            "the demo gateway stopped",
			"interval":        step.String(),
			"input_series":    []any{up},
			"alert_rule_test": []any{expect("HoloGatewayDown", "critical", fmt.Sprintf("%ds", int((downAt+3*time.Minute)/time.Second)), nil)},
		},
	})
	if t.Failed() {
		t.Logf("at the second scrape:\n%s", diag)
	}
}

// hasSeries says whether a series of family name whose labels include
// label (name="value") has at least value min.
func hasSeries(fams map[string]*dto.MetricFamily, name, label string, min float64) bool {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()) == label && m.GetGauge().GetValue()+m.GetCounter().GetValue() >= min {
				return true
			}
		}
	}
	return false
}

// dumpFamilies writes the series of the families named with prefix, for
// a failure's log.
func dumpFamilies(fams map[string]*dto.MetricFamily, prefix string) string {
	var sb strings.Builder
	for name, f := range fams {
		if strings.HasPrefix(name, prefix) {
			expfmt.MetricFamilyToText(&sb, f)
		}
	}
	return sb.String()
}

// dmxShare is the demo's --dmx-line-share in TestAlertsFireInDemo.
const dmxShare = 0.005

// oneOff are the counters of events that happened once in the run: they
// hold their value after the second scrape.
var oneOff = map[string]bool{
	"holo_dmx_sources_lost_total": true,
	"holo_cue_fires_total":        true,
	"holo_cue_fires_failed_total": true,
}

// growing are the gauges that grow as long as their condition holds: they
// go on at the pace measured between the scrapes.
var growing = map[string]bool{
	"holo_mqtt_spool_messages":            true,
	"holo_gateway_cluster_events_pending": true,
}

// startStoppable runs the holo-gateway binary with args and returns its
// API base URL, its output and a stop that ends it with SIGTERM, as
// systemd would, and waits for its clean exit; the test's end stops it
// too.
func startStoppable(t *testing.T, args ...string) (string, *syncBuffer, func()) {
	t.Helper()
	base, out, stop, _ := startProcess(t, args...)
	return base, out, stop
}

// startProcess is startStoppable that also returns a kill (SIGKILL, as a
// crash; the exit is not checked).
func startProcess(t *testing.T, args ...string) (string, *syncBuffer, func(), func()) {
	t.Helper()
	bin := gatewayBinary(t)
	out, errb := &syncBuffer{}, &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("holo-gateway: %v\n%s", err, errb.String())
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Error("holo-gateway did not stop")
			}
		})
	}
	kill := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-done
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := apiLine.FindStringSubmatch(out.String()); m != nil {
			return m[1], out, stop, kill
		}
		select {
		case err := <-done:
			t.Fatalf("exited early (%v):\n%s\n%s", err, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no banner:\n%s", out.String())
	return "", nil, nil, nil
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
	name    string // the metric family's
	value   float64
	counter bool
}

// samples flattens metric families into series, adding job and instance
// as Prometheus would.
func samples(fams map[string]*dto.MetricFamily) map[string]sample {
	out := map[string]sample{}
	var family string
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
		out[sb.String()] = sample{sb.String(), family, v, counter}
	}
	for name, f := range fams {
		family = name
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
func promtoolSeries(before, after map[string]*dto.MetricFamily, steps int, oneOff, growing map[string]bool) []map[string]string {
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
		switch {
		case s.counter && oneOff[s.name], !s.counter && !growing[s.name]:
			values = fmt.Sprintf("%s %s+0x%d", num(first.value), num(s.value), steps-1)
		default:
			d := s.value - first.value
			if d < 0 { // a reset between the scrapes
				first, d = s, 0
			}
			values = fmt.Sprintf("%s+%sx%d", num(first.value), num(d), steps)
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

// TestAlertsFireWhenBrokerStops runs a demo gateway bridged to a real
// Mosquitto with a small spool (--mqtt-spool-max 60), stops the broker,
// and fires scenes on the boards: their happenings wait in the spool,
// fill it, and the next ones are dropped. Two scrapes once drops have
// begun become promtool series as in TestAlertsFireInDemo (the drop
// counter goes on at its measured pace: with the broker still gone every
// happening is dropped), over which HoloMQTTDisconnected and
// HoloMQTTMessagesDropped fire.
func TestAlertsFireWhenBrokerStops(t *testing.T) {
	promtool := alertTest(t, "a simulated installation")
	port := freePort(t)
	broker := startMosquitto(t, port)
	base, _, _ := startStoppable(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "8", "--demo-groups", "1",
		"--mqtt", fmt.Sprintf("tcp://127.0.0.1:%d", port), "--mqtt-spool-max", "60")
	waitFor(t, "the bridge connected to Mosquitto", 30*time.Second, func() bool {
		fams, _ := scrapeFamilies(t, base)
		return familySum(fams, "holo_mqtt_connected", "") == 1
	})
	waitFor(t, "the demo boards online", 60*time.Second, func() bool {
		_, body := get(t, base+"/v1/boards?online=true", "")
		return strings.Count(body, `"id"`) >= 8
	})
	// The broker stops, as systemctl stop mosquitto would.
	if err := broker.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = broker.Wait()
	stalledWatcher(t, base)
	// Two shows fire scenes: about 1,500 events (the watcher's queue and
	// what its 64 KiB window holds) come within seconds on a loaded machine.
	stopScenes, stopScenes2 := fireScenes(t, base), fireScenes(t, base)
	sum := func(fams map[string]*dto.MetricFamily, name string) float64 { return familySum(fams, name, "") }
	sc := scrapeWhile(t, base, "the bridge disconnected and dropping, the stalled watcher cut off", 90*time.Second,
		func(f map[string]*dto.MetricFamily) bool {
			return sum(f, "holo_mqtt_connected") == 0 && sum(f, "holo_mqtt_dropped_total") > 0 && sum(f, "holo_gateway_events_dropped_total") > 0
		},
		func(b, a map[string]*dto.MetricFamily) bool {
			return sum(a, "holo_mqtt_dropped_total") > sum(b, "holo_mqtt_dropped_total") &&
				sum(a, "holo_gateway_events_dropped_total") > sum(b, "holo_gateway_events_dropped_total")
		})
	stopScenes()
	stopScenes2()
	t.Logf("between the scrapes (%v): spool %.0f -> %.0f, dropped %.0f -> %.0f, events dropped by the stalled watcher %.0f -> %.0f",
		sc.between().Round(time.Millisecond),
		sum(sc.before, "holo_mqtt_spool_messages"), sum(sc.after, "holo_mqtt_spool_messages"),
		sum(sc.before, "holo_mqtt_dropped_total"), sum(sc.after, "holo_mqtt_dropped_total"),
		sum(sc.before, "holo_gateway_events_dropped_total"), sum(sc.after, "holo_gateway_events_dropped_total"))
	runPromtool(t, promtool, sc.step(), []any{sc.test("the demo with its MQTT broker stopped, a small spool and a stalled event stream", 20*time.Minute, nil,
		expectAlert("HoloMQTTDisconnected", "warning", "20m", nil),
		expectAlert("HoloMQTTMessagesDropped", "critical", "20m", nil),
		expectAlert("HoloEventsDropped", "warning", "20m", nil),
	)})
}

// expectAlert is a promtool alert_rule_test entry: alert name fires at at
// with the demo's job and instance, its severity and the extra labels.
func expectAlert(name, severity, at string, extra map[string]string) map[string]any {
	l := map[string]string{"severity": severity, "job": alertJob, "instance": alertInstance}
	for k, v := range extra {
		l[k] = v
	}
	return map[string]any{"alertname": name, "eval_time": at, "exp_alerts": []any{map[string]any{"exp_labels": l}}}
}

// runPromtool runs promtool test rules with the shipped rules (alerts
// without their annotations) over tests, evaluated every step.
func runPromtool(t *testing.T, promtool string, step time.Duration, tests []any) {
	t.Helper()
	dir := t.TempDir()
	writeAlertsWithoutAnnotations(t, filepath.Join(monitoringDir, "alerts.yml"), filepath.Join(dir, "alerts.yml"))
	copyFileTo(t, filepath.Join(monitoringDir, "rules.yml"), filepath.Join(dir, "rules.yml"))
	raw, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{"rules.yml", "alerts.yml"},
		"evaluation_interval": step.String(),
		"tests":               tests,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo.yml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "demo.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules on the demo's series: %v\n%s", err, out)
	}
}

// alertTest starts a test of this package, which starts what (skipped
// with -short) and needs promtool, which it returns; the test runs in
// parallel with the others.
func alertTest(t *testing.T, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts " + what)
	}
	promtool := promtoolBin(t)
	t.Parallel()
	return promtool
}

// promtoolBin finds promtool (Debian package prometheus); absent, the
// test is skipped, except in CI, which installs it.
func promtoolBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed (CI installs the Debian package prometheus)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus)")
	}
	return p
}

// freePort is a loopback TCP port free now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startMosquitto runs a private Mosquitto on port until the test ends.
func startMosquitto(t *testing.T, port int) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		bin = "/usr/sbin/mosquitto"
		if _, err := os.Stat(bin); err != nil {
			t.Skip("mosquitto is not installed")
		}
	}
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\n", port)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "mosquitto listening", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd
}
