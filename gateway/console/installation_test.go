package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleInstallation applies an installation to the demo's eight
// boards over the API, breaks one board and a cue list of its gateway
// sections by hand, and works the Installation page: the board and the
// cue lists show drifted with their diffs, "Apply again" shows the plan
// (boards and sections) before anything starts and brings both back, and
// the history offers a rollback.
func TestConsoleInstallation(t *testing.T) {
	t.Parallel()
	g, br := consoleRig(t)
	img, err := os.ReadFile(filepath.Join(repoRoot(t), "firmware", "media", "testdata", "image-32x24.png"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(g.URL+"/v1/installation/content", "application/octet-stream", bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
	json.NewDecoder(res.Body).Decode(&c)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("content: %d", res.StatusCode)
	}
	desc := map[string]any{
		"version": 1,
		"content": map[string]any{"logo": map[string]any{"sha256": c.SHA256, "size": c.Size}},
		"profiles": map[string]any{
			"left":  map[string]any{"files": map[string]string{"/images/logo.png": "logo"}, "scenes": map[string]any{"logo": map[string]any{"slot": 2, "screen": map[string]any{"path": "/images/logo.png"}}}, "settings": map[string]any{"boot_scene": "logo"}},
			"right": map[string]any{"files": map[string]string{"/images/logo.png": "logo"}, "settings": map[string]any{"screen": map[string]any{"backlight": 60}}},
		},
		"assignments": []any{map[string]any{"profile": "left", "group": 1}, map[string]any{"profile": "right", "group": 2}},
		"dmx": map[string]any{"patch": map[string]any{"fixtures": []any{
			map[string]any{"name": "door", "universe": 1, "address": 1, "profile": "holo", "group": 1}}}},
		"cuelists": []any{map[string]any{"name": "opening", "cues": []any{map[string]any{"number": 1, "actions": []any{
			map[string]any{"kind": "leds", "selector": map[string]any{"groups": []int{1}}, "body": map[string]any{"mode": "solid", "colour": "red"}}}}}}},
	}
	st, body := g.API(t, "POST", "/v1/installation/apply?message=first", desc, "")
	if st != 200 {
		t.Fatalf("apply: %d %s", st, body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, body = g.API(t, "GET", "/v1/installation", nil, "")
		var cur map[string]json.RawMessage
		if st == 200 && json.Unmarshal(body, &cur) == nil && cur["run"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the apply did not finish: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	broken := g.IDs[0]
	g.boardCall(t, broken, "DELETE", "/fs/entry?path=/images/logo.png", nil, nil)
	if st, body := g.API(t, "DELETE", "/v1/cuelists/opening", nil, ""); st/100 != 2 {
		t.Fatalf("delete the cue list: %d %s", st, body)
	}

	tb := open(t, br, g.URL, len(g.IDs))
	tb.run(chromedp.Navigate(g.URL + "/#/installation"))
	tb.wait("every board listed", fmt.Sprintf(`document.querySelectorAll('#inst-boards tbody tr[data-board]').length === %d`, len(g.IDs)), 30*time.Second)
	tb.wait("the broken board drifted", fmt.Sprintf(`(document.querySelector('#inst-boards tr[data-board=%q]') || {}).dataset?.state === 'drifted'`, broken), 30*time.Second)
	tb.click(fmt.Sprintf(`button[data-diff=%q]`, broken))
	tb.wait("its diff", fmt.Sprintf(`(document.getElementById('diff-%s') || {}).textContent?.includes('+ file /images/logo.png')`, broken), 5*time.Second)
	tb.wait("the DMX patch in sync", `(document.querySelector('#inst-sections tr[data-section=dmx]') || {}).dataset?.state === 'in_sync'`, 10*time.Second)
	tb.wait("the cue lists drifted", `(document.querySelector('#inst-sections tr[data-section=cuelists]') || {}).dataset?.state === 'drifted'`, 10*time.Second)
	tb.click(`button[data-section-diff=cuelists]`)
	tb.wait("the cue lists' diff", `(document.getElementById('section-diff-cuelists') || {}).textContent?.includes('+ cue list opening (1 cue)')`, 5*time.Second)
	tb.screenshot("installation")

	tb.click(`button[data-control=reapply]`)
	tb.wait("the plan before anything starts", fmt.Sprintf(`!!document.querySelector('#inst-plan [data-board=%q]')`, broken), 15*time.Second)
	tb.wait("the cue lists in the plan", `(document.querySelector('#inst-plan [data-section=cuelists]') || {}).textContent?.includes('+ cue list opening')`, 5*time.Second)
	if st, body := g.API(t, "GET", "/v1/cuelists", nil, ""); st != 200 || bytes.Contains(body, []byte(`"opening"`)) {
		t.Fatalf("the plan put the cue list back before it was confirmed: %d %s", st, body)
	}
	tb.screenshot("installation-plan")
	tb.click(`dialog button[data-confirm=apply]`)
	tb.wait("every board in sync again", fmt.Sprintf(`document.querySelectorAll('#inst-boards tr[data-state=in_sync]').length === %d`, len(g.IDs)), 60*time.Second)
	tb.wait("both sections in sync again", `document.querySelectorAll('#inst-sections tr[data-state=in_sync]').length === 2`, 20*time.Second)
	tb.wait("two revisions with a rollback to the first", `document.querySelectorAll('#inst-history tr[data-revision]').length === 2 && !!document.querySelector('button[data-rollback="1"]')`, 20*time.Second)
}
