package monitoring_test

import (
	"encoding/json"
	"fmt"
	"image/color"
	"strings"
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
	promtool := alertTest(t, "a simulated installation")
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
	// second (a new colour each time: a change to show), its moment 100 ms
	// past when it is sent.
	sel, _ := json.Marshal(ids)
	stop := postEvery(t, base+"/v1/actions", 100*time.Millisecond, func(colour int) string {
		at := time.Now().Add(-100 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		return fmt.Sprintf(`{"selector":{"boards":%s},"kind":"leds","body":{"mode":"solid","colour":"#%06x"},"fire_at":%q}`, sel, colour*997+1, at)
	})
	skew := func(fams map[string]*dto.MetricFamily) (fires, seconds float64) {
		for _, m := range fams["holo_gateway_fire_skew_seconds"].GetMetric() {
			return float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
		}
		return 0, 0
	}
	fires := func(fams map[string]*dto.MetricFamily) float64 { n, _ := skew(fams); return n }
	sc := scrapeWhile(t, base, "fires of both boards", 30*time.Second,
		func(f map[string]*dto.MetricFamily) bool { return fires(f) > 0 },
		func(b, a map[string]*dto.MetricFamily) bool { return fires(a) > fires(b) })
	stop()
	n0, s0 := skew(sc.before)
	n, s := skew(sc.after)
	t.Logf("between the scrapes (%v): %.0f fires of both boards, their changes %.3f s apart on average",
		sc.between().Round(time.Millisecond), n-n0, (s-s0)/(n-n0))
	runPromtool(t, promtool, sc.step(), []any{sc.test("the demo firing a fast and a slow board together", 20*time.Minute, nil,
		expectAlert("HoloFireSkew", "warning", "20m", nil))})
}
