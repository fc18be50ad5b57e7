package console_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// testShow runs the demo's show from the Show page: the space bar GOes
// cue 1 (once: the key never presses a focused button as well), the big
// GO fires cue 2, cue 3 follows by itself, and the page shows the standby
// and what runs without a dialog; what another client does shows up from
// the event stream, which the page follows instead of polling.
func testShow(t *testing.T, g *demoGW, br *browser) {
	groups := map[string][]int{}
	for _, id := range g.IDs {
		var b struct {
			Groups []int `json:"groups"`
		}
		_, body := g.API(t, "GET", "/v1/boards/"+id, nil, "")
		_ = json.Unmarshal(body, &b)
		groups[id] = b.Groups
	}
	tb := open(t, br, g.URL, len(g.IDs))
	tb.run(chromedp.Navigate(g.URL + "/#/show"))
	tb.wait("the demo's show on standby 1", `(() => { const e = document.getElementById('show-standby'); return e && e.textContent === '1'; })()`, 10*time.Second)
	tb.wait("the cue table", `document.querySelectorAll('#show-cues tbody tr').length === 3`, 10*time.Second)
	if n := tb.count(`#show-cues tr.standby[data-cue="1"]`); n != 1 {
		t.Fatalf("the standby row is not marked: %d", n)
	}
	tb.screenshot("show")

	tb.click(`#show-back`) // focus a button: the space bar must still be GO alone
	tb.run(chromedp.KeyEvent(" "))
	tb.wait("standby 2 after the space bar", `document.getElementById('show-standby').textContent === '2'`, 10*time.Second)
	for _, id := range g.IDs {
		if !slices.Contains(groups[id], 1) {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			var l ledState
			g.boardCall(t, id, "GET", "/leds", nil, &l)
			if l.Mode == "solid" && l.Colour == "#ff0000" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("board %s of group 1 is %+v after cue 1", id, l)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	tb.click(`#show-go`)
	tb.wait("the end of the list after GO", `document.getElementById('show-standby').textContent === 'end'`, 10*time.Second)
	tb.wait("cue 3 fired by its follow", `document.getElementById('show-last').textContent.startsWith('Last fired: 3 ')`, 15*time.Second)
	for _, id := range g.IDs {
		var l ledState
		g.boardCall(t, id, "GET", "/leds", nil, &l)
		if l.Mode != "off" {
			deadline := time.Now().Add(10 * time.Second)
			for l.Mode != "off" && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				g.boardCall(t, id, "GET", "/leds", nil, &l)
			}
			if l.Mode != "off" {
				t.Fatalf("board %s is %+v after cue 3", id, l)
			}
		}
	}
	// A click on a row puts the standby there (no dialog).
	tb.click(`#show-cues tbody tr[data-cue="2"]`)
	tb.wait("standby 2 after a click", `document.getElementById('show-standby').textContent === '2'`, 10*time.Second)
	if n := tb.count(`dialog`); n != 0 {
		t.Fatalf("the show opened %d dialogs", n)
	}

	// The page follows the cue lists' event stream: what another client
	// does (here REST from the test) shows up without any read of the
	// state, and the countdown of a follow runs between events.
	tb.wait("the event stream live", `document.getElementById('show-stream').textContent === 'live'`, 10*time.Second)
	if code, body := g.API(t, "POST", "/v1/cuelists/demo/standby", map[string]string{"cue": "1"}, g.Admin); code != 200 {
		t.Fatalf("standby 1 from outside: %d %s", code, body)
	}
	tb.wait("standby 1 set from outside", `document.getElementById('show-standby').textContent === '1'`, 10*time.Second)
	if code, body := g.API(t, "POST", "/v1/cuelists/demo/cues/2/start", nil, g.Admin); code != 200 {
		t.Fatalf("cue 2 from outside: %d %s", code, body)
	}
	tb.wait("cue 3 counting down its follow", `(() => { const li = document.querySelector('#show-running li[data-cue="3"]');
		return li && / follow · \d+\.\d s$/.test(li.textContent); })()`, 10*time.Second)
	tb.wait("cue 3 fired by its follow, from the stream", `document.getElementById('show-last').textContent.startsWith('Last fired: 3 ')`, 15*time.Second)
	var polls int
	tb.eval(`performance.getEntriesByType('resource').filter((e) => /\/v1\/cuelists\/[^/]+\/state/.test(e.name)).length`, &polls)
	if polls != 0 {
		t.Fatalf("the Show page read the state %d times; it should follow the event stream", polls)
	}
}
