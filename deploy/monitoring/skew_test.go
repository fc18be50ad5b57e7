package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/hal"
)

// slowStrip is an LED strip that takes d to latch each frame, as a long
// strip or a slow driver would: the board answers a change only once its
// LEDs show it.
type slowStrip struct {
	hal.LEDStrip
	d time.Duration
}

func (s slowStrip) Write(px []color.RGBA) error {
	time.Sleep(s.d)
	return s.LEDStrip.Write(px)
}

// TestAlertsFireOnSlowBoard runs a demo gateway with two LAN boards, one
// of whose LED strip takes 200 ms to latch a frame, and a show controller
// firing timed changes at both together (at a moment just past, so the
// gateway calls both at once): the slow board's change lands 100 ms or
// more after the other's in every fire. Two scrapes while that goes on
// become promtool series as in TestAlertsFireInDemo, over which
// HoloFireSkew fires.
func TestAlertsFireOnSlowBoard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	promtool := promtoolBin(t)
	t.Parallel()
	hw := board.SimHardware(clock.Real)
	hw.Strip = slowStrip{LEDStrip: hw.Strip, d: 200 * time.Millisecond}
	slow := boardtest.StartInProcess(t, boardtest.InProcOptions{Hardware: hw})
	fast := boardtest.StartInProcess(t, boardtest.InProcOptions{})
	base, _, _ := startStoppable(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "1", "--demo-groups", "1",
		"--no-mqtt", "--board", slow.URL, "--board", fast.URL)
	ids := []string{slow.Board.Identity().ID, fast.Board.Identity().ID}
	waitFor(t, "both LAN boards online", 30*time.Second, func() bool {
		_, body := get(t, base+"/v1/boards?online=true", "")
		return strings.Contains(body, ids[0]) && strings.Contains(body, ids[1])
	})

	// The show controller: a timed change of both boards ten times a
	// second, its moment 100 ms past when it is sent.
	sel, _ := json.Marshal(ids)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	wg.Go(func() {
		for colour := 0; ctx.Err() == nil; colour++ { // a new colour each time: a change to show
			at := time.Now().Add(-100 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			resp, err := http.Post(base+"/v1/actions", "application/json", strings.NewReader(fmt.Sprintf(
				`{"selector":{"boards":%s},"kind":"leds","body":{"mode":"solid","colour":"#%06x"},"fire_at":%q}`, sel, colour*997+1, at)))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	skew := func(fams map[string]*dto.MetricFamily) (fires, seconds float64) {
		for _, m := range fams["holo_gateway_fire_skew_seconds"].GetMetric() {
			return float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
		}
		return 0, 0
	}
	fires := func(fams map[string]*dto.MetricFamily) float64 { n, _ := skew(fams); return n }
	var before, after map[string]*dto.MetricFamily
	var atBefore, atAfter time.Time
	waitFor(t, "fires of both boards", 30*time.Second, func() bool {
		before, atBefore = scrapeFamilies(t, base)
		return fires(before) > 0
	})
	waitFor(t, "more fires, 2 s on", 30*time.Second, func() bool {
		after, atAfter = scrapeFamilies(t, base)
		return atAfter.Sub(atBefore) >= 2*time.Second && fires(after) > fires(before)
	})
	cancel()
	n0, s0 := skew(before)
	n, s := skew(after)
	t.Logf("between the scrapes (%v): %.0f fires of both boards, their changes %.3f s apart on average",
		atAfter.Sub(atBefore).Round(time.Millisecond), n-n0, (s-s0)/(n-n0))
	step := max(atAfter.Sub(atBefore).Round(time.Second), time.Second)
	runPromtool(t, promtool, step, []any{map[string]any{
		"name":         "the demo firing a fast and a slow board together",
		"interval":     step.String(),
		"input_series": promtoolSeries(before, after, int((20*time.Minute)/step), oneOff, nil),
		"alert_rule_test": []any{
			expectAlert("HoloFireSkew", "warning", "20m", nil),
		},
	}})
}
