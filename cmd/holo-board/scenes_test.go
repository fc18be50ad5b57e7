package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/firmware/boardtest"
)

func putScene(b *boardtest.Board, name, body string) boardtest.Reply {
	return b.Do("PUT", "/scenes/scene?name="+url.QueryEscape(name), body)
}

func TestScenes(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	if f := b.Do("GET", "/info", nil).Map(t)["features"]; !strings.Contains(fmt.Sprint(f), "scenes") {
		t.Errorf("features %v lack scenes", f)
	}
	r := b.Do("GET", "/scenes", nil)
	if d := cmp.Diff(r.Map(t), map[string]any{"scenes": []any{}, "active": nil}); d != "" {
		t.Errorf("at start (-got +want)\n%s", d)
	}
	// Files are not checked when saving.
	r = putScene(b, "intro", `{"screen":{"path":"/later.mov"},"leds":{"mode":"solid","colour":"red"},"then":"restore","slot":5}`)
	expect(t, r, 200, "")
	saved := r.Map(t)["scenes"].([]any)
	if len(saved) != 1 || saved[0].(map[string]any)["name"] != "intro" || saved[0].(map[string]any)["slot"] != float64(5) {
		t.Fatalf("saved: %s", r.Body)
	}
	before := b.Do("GET", "/scenes", nil).Body
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"x", `{"slot":5}`, 409, "slot_taken"},
		{"x", `{"slot":0}`, 400, "bad_request"},
		{"x", `{"slot":256}`, 400, "bad_request"},
		{"x", `{"then":"maybe"}`, 400, "bad_request"},
		{"x", `{"then":"off"}`, 400, "bad_request"},
		{"x", `{"then":"restore","screen":{"path":"/a.mov","loop":true}}`, 400, "bad_request"},
		{"x", `{"duration_s":0}`, 400, "bad_request"},
		{"x", `{"leds":{"mode":"disco"}}`, 400, "bad_request"},
		{"x", `{"holo":{"motion":"spin"}}`, 400, "bad_request"},
		{"x", `{"screen":{"path":"a.mov"}}`, 400, "bad_path"},
		{"x", `{"colour":"red"}`, 400, "bad_request"},
		{"x", `{"screen":`, 400, "bad_json"},
		{"", `{}`, 400, "bad_request"},
	} {
		expect(t, putScene(b, tc.name, tc.body), tc.status, tc.code)
		if got := b.Do("GET", "/scenes", nil).Body; string(got) != string(before) {
			t.Errorf("PUT %s changed the scenes: %s", tc.body, got)
		}
	}
	for i := range 15 {
		expect(t, putScene(b, fmt.Sprint("s", i), `{"leds":{"mode":"off"}}`), 200, "")
	}
	expect(t, putScene(b, "s16", `{}`), 409, "full")
	expect(t, putScene(b, "s0", `{"slot":9}`), 200, "")
	expect(t, b.Do("DELETE", "/scenes/scene?name=nope", nil), 404, "unknown_scene")
	expect(t, b.Do("DELETE", "/scenes/scene?name=s14", nil), 200, "")

	// Applying: the missing file fails the screen part; nothing changes.
	leds := b.Do("GET", "/leds", nil).Body
	r = b.Do("POST", "/scenes/apply", `{"name":"intro"}`)
	expect(t, r, 404, "not_found")
	if msg := r.Map(t)["message"].(string); !strings.HasPrefix(msg, "screen: ") {
		t.Errorf("message does not name the part: %q", msg)
	}
	if got := b.Do("GET", "/leds", nil).Body; string(got) != string(leds) {
		t.Errorf("a failed apply changed the LEDs: %s", got)
	}
	expect(t, b.Do("POST", "/scenes/apply", `{"name":"nope"}`), 404, "unknown_scene")
	expect(t, b.Do("POST", "/scenes/apply", `{"slot":77}`), 404, "unknown_scene")
	expect(t, b.Do("POST", "/scenes/apply", `{}`), 400, "bad_request")
	r = b.Do("POST", "/scenes/apply", `{"scene":{"holo":{"motion":"twitch"}}}`)
	expect(t, r, 409, "not_ready")
	if msg := r.Map(t)["message"].(string); !strings.HasPrefix(msg, "holo: ") {
		t.Errorf("message does not name the part: %q", msg)
	}
	expect(t, b.Do("POST", "/scenes/end", `{}`), 409, "not_running")

	// With its file there it runs, by slot, and restores when its clip
	// has played once.
	expect(t, b.Do("POST", "/screen/show", `{"colour":"#0000ff"}`), 200, "")
	expect(t, upload(b, "/later.mov", "", testClip(t, 6, 32, 32)), 201, "")
	seq := latestSeq(t, b)
	r = b.Do("POST", "/scenes/apply", `{"slot":5}`)
	expect(t, r, 200, "")
	boardtest.WaitFor(t, 30*time.Second, "the scene to end", func() bool {
		return b.Do("GET", "/scenes", nil).Map(t)["active"] == nil
	})
	boardtest.WaitFor(t, 30*time.Second, "the screen to be restored", func() bool {
		return screenState(t, b)["colour"] == "#0000ff"
	})
	got := happenings(t, b, seq, "clip_started,clip_ended,scene_started,scene_ended")
	want := []string{
		`clip_started {"fps":30,"frames":6,"loop":false,"path":"/later.mov","plays":1}`,
		`scene_started {"name":"intro","slot":5,"then":"restore","until_clip_ends":true}`,
		`scene_ended {"by":"clip","name":"intro","slot":5,"then":"restore"}`,
		`clip_ended {"finished":true,"path":"/later.mov"}`,
	}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("happenings (-got +want)\n%s", d)
	}
	if m := b.Do("GET", "/leds", nil).Map(t)["mode"]; m != "off" {
		t.Errorf("LEDs not restored: %v", m)
	}

	// A timed off scene given whole, ended early.
	r = b.Do("POST", "/scenes/apply", `{"scene":{"screen":{"colour":"white"},"then":"off","duration_s":600}}`)
	expect(t, r, 200, "")
	active := r.Map(t)["active"].(map[string]any)
	if active["then"] != "off" || active["name"] != nil || active["remaining_s"].(float64) > 600 {
		t.Errorf("active: %v", active)
	}
	r = b.Do("POST", "/scenes/end", `{}`)
	expect(t, r, 200, "")
	if d := cmp.Diff(r.Map(t), map[string]any{"name": nil, "then": "off", "by": "end"}); d != "" {
		t.Errorf("end (-got +want)\n%s", d)
	}
	if st := screenState(t, b); st["powered"] != false {
		t.Errorf("then off left the screen: %v", st)
	}
}

// TestBootScene: settings.boot_scene is applied at start, after the saved
// backlight; deleting the scene forgets it.
func TestBootScene(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := boardtest.Start(t, dir)
	expect(t, b.Do("PATCH", "/settings", `{"boot_scene":"hello"}`), 400, "bad_request")
	expect(t, putScene(b, "hello", `{"screen":{"colour":"#123456"},"leds":{"mode":"solid"}}`), 200, "")
	expect(t, b.Do("PATCH", "/settings", `{"boot_scene":"hello","screen":{"backlight":40}}`), 200, "")
	b.Stop()
	b = boardtest.Start(t, dir)
	want := map[string]any{"powered": true, "backlight": float64(40), "showing": "colour", "colour": "#123456"}
	if d := cmp.Diff(screenState(t, b), want); d != "" {
		t.Errorf("after start (-got +want)\n%s", d)
	}
	if m := b.Do("GET", "/leds", nil).Map(t)["mode"]; m != "solid" {
		t.Errorf("leds %v", m)
	}
	expect(t, b.Do("DELETE", "/scenes/scene?name=hello", nil), 200, "")
	if bs := b.Do("GET", "/settings", nil).Map(t)["boot_scene"]; bs != nil {
		t.Errorf("boot_scene %v after its scene was deleted", bs)
	}
}
