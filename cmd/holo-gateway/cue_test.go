package main

import (
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/demo"
)

// TestCueDemo runs the demo's show: GO from oscsend fires cue 1 (group 1
// red), GO over REST fires cue 2 (group 2 blue) and, two seconds after
// its moment, cue 3 (every board's LEDs off) follows by itself.
func TestCueDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	oscsend, _ := needLiblo(t)
	base, out := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "2", "--mqtt", noBroker, "--osc", "127.0.0.1:0")
	if !strings.Contains(out.String(), "cues:     1 cue list(s)") {
		t.Fatalf("no cue line in the banner:\n%s", out.String())
	}
	m := oscLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no OSC line in the banner:\n%s", out.String())
	}
	host, port, _ := net.SplitHostPort(m[1])
	group := map[int]string{} // group -> board
	waitOnline(t, base, 2, func(boards []onlineBoard) bool {
		for _, b := range boards {
			for _, g := range b.Groups {
				group[g] = b.ID
			}
		}
		return group[1] != "" && group[2] != ""
	})
	code, body := get(t, base+"/v1/cuelists/demo", "")
	if code != 200 || !strings.Contains(body, `"standby":"1"`) || !strings.Contains(body, `"number":"3"`) {
		t.Fatalf("the demo's show: %d %s", code, body)
	}
	leds := func(g int) map[string]any { return boardLEDs(t, base, group[g]) }

	// GO over OSC, from liblo's oscsend.
	if b, err := exec.Command(oscsend, host, port, "/holo/cue/go").CombinedOutput(); err != nil {
		t.Fatalf("oscsend: %v %s", err, b)
	}
	waitFor(t, "group 1 solid red", 10*time.Second, func() bool {
		l := leds(1)
		return l["mode"] == "solid" && l["colour"] == "#ff0000"
	})
	if l := leds(2); l["mode"] == "solid" {
		t.Fatalf("cue 1 reached group 2: %v", l)
	}

	// GO over REST: cue 2, then cue 3 follows.
	resp, err := http.Post(base+"/v1/cuelists/demo/go", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GO over REST: %d", resp.StatusCode)
	}
	waitFor(t, "group 2 solid blue", 10*time.Second, func() bool {
		l := leds(2)
		return l["mode"] == "solid" && l["colour"] == "#0000ff"
	})
	// Its timing is TestFollowChain's (gateway/cue, on a fake clock);
	// here a bound of ten times the follow's delay only catches a follow
	// that never comes (10 s, five times, was missed beside make flaky's
	// hogs).
	follow := time.Duration(demo.Show().Cues[1].FollowMS) * time.Millisecond
	waitFor(t, "every board off (cue 3 follows)", 10*follow, func() bool {
		return leds(1)["mode"] == "off" && leds(2)["mode"] == "off"
	})
	code, body = get(t, base+"/v1/cuelists/demo/state", "")
	if code != 200 || !strings.Contains(body, `"standby":""`) || !strings.Contains(body, `"cue":"3"`) {
		t.Fatalf("state after the show: %d %s", code, body)
	}
}
