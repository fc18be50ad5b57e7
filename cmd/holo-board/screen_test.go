package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/media"
)

// testClip is a Motion-JPEG MOV of n w x h frames at 30 fps, made here.
func testClip(t *testing.T, n, w, h int) []byte {
	t.Helper()
	var frames [][]byte
	for k := range n {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			m.Pix[i] = uint8(40 * k)
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, nil); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b.Bytes())
	}
	var mov bytes.Buffer
	if err := media.WriteMOV(&mov, media.MOV{Frames: frames, Width: w, Height: h, Timescale: 600, Delta: 20}); err != nil {
		t.Fatal(err)
	}
	return mov.Bytes()
}

func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		m.Set(i%w, i/w, color.RGBA{200, 10, 10, 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// happenings returns the kept happenings of the given kinds, oldest first,
// as compact "kind {fields}" lines without seq and t_ms.
func happenings(t *testing.T, b *boardtest.Board, after int, kinds string) []string {
	t.Helper()
	var rep struct {
		Events []map[string]any `json:"events"`
	}
	b.Do("GET", fmt.Sprintf("/events?after=%d&kinds=%s", after, kinds), nil).JSON(t, &rep)
	var out []string
	for _, e := range rep.Events {
		kind := e["event"].(string)
		delete(e, "event")
		delete(e, "seq")
		delete(e, "t_ms")
		j, _ := json.Marshal(e)
		out = append(out, kind+" "+string(j))
	}
	return out
}

func latestSeq(t *testing.T, b *boardtest.Board) int {
	var rep struct {
		Seq int `json:"seq"`
	}
	b.Do("GET", "/events", nil).JSON(t, &rep)
	return rep.Seq
}

func screenState(t *testing.T, b *boardtest.Board) map[string]any {
	t.Helper()
	r := b.Do("GET", "/screen", nil)
	expect(t, r, 200, "")
	return r.Map(t)
}

func TestScreen(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	if f := b.Do("GET", "/info", nil).Map(t)["features"]; !strings.Contains(fmt.Sprint(f), "screen") {
		t.Errorf("features %v lack screen", f)
	}
	want := map[string]any{"powered": true, "backlight": float64(80), "showing": "nothing"}
	if d := cmp.Diff(screenState(t, b), want); d != "" {
		t.Errorf("at start (-got +want)\n%s", d)
	}
	expect(t, upload(b, "/media/short.mov", "parents=1", testClip(t, 6, 64, 48)), 201, "")
	expect(t, upload(b, "/media/pic.png", "", testPNG(t, 40, 30)), 201, "")
	expect(t, upload(b, "/media/big.png", "", testPNG(t, 241, 10)), 201, "")
	expect(t, upload(b, "/media/fake.mov", "", []byte("not a movie")), 201, "")

	r := b.Do("PATCH", "/screen", `{"backlight":30}`)
	expect(t, r, 200, "")
	if r.Map(t)["backlight"] != float64(30) {
		t.Errorf("PATCH backlight: %s", r.Body)
	}
	r = b.Do("POST", "/screen/show", `{"colour":"#102030"}`)
	expect(t, r, 200, "")
	want = map[string]any{"powered": true, "backlight": float64(30), "showing": "colour", "colour": "#102030"}
	if d := cmp.Diff(r.Map(t), want); d != "" {
		t.Errorf("colour (-got +want)\n%s", d)
	}
	// Bad input: the screen is left as it was.
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"PATCH", "/screen", `{"backlight":101}`, 400, "bad_request"},
		{"PATCH", "/screen", `{"backlight":"dim"}`, 400, "bad_request"},
		{"POST", "/screen/show", `{}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"colour":"red","calibration":true}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"path":"/media/pic.png","colour":"red"}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"colour":"#1020"}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"colour":"red","loop":true}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"path":"/media/short.mov","loops":0}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"path":"/media/short.mov","loop":true,"loops":2}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"path":"/media/../x.mov"}`, 400, "bad_path"},
		{"POST", "/screen/show", `{"path":"/media"}`, 400, "is_a_directory"},
		{"POST", "/screen/show", `{"path":"/media/none.mov"}`, 404, "not_found"},
		{"POST", "/screen/show", `{"path":"/media/fake.mov"}`, 422, "not_playable"},
		{"POST", "/screen/show", `{"path":"/media/big.png"}`, 422, "not_playable"},
		{"POST", "/screen/show", `{"calibration":false}`, 400, "bad_request"},
		{"POST", "/screen/show", `{"volume":3}`, 400, "bad_request"},
	} {
		expect(t, b.Do(tc.method, tc.path, tc.body), tc.status, tc.code)
		if d := cmp.Diff(screenState(t, b), want); d != "" {
			t.Errorf("%s %s %s changed the screen (-got +want)\n%s", tc.method, tc.path, tc.body, d)
		}
	}
	r = b.Do("POST", "/screen/show", `{"calibration":true}`)
	if r.Map(t)["showing"] != "calibration" {
		t.Errorf("calibration: %s", r.Body)
	}
	r = b.Do("POST", "/screen/show", `{"path":"/media/pic.png"}`)
	want = map[string]any{"powered": true, "backlight": float64(30), "showing": "image", "path": "/media/pic.png"}
	if d := cmp.Diff(r.Map(t), want); d != "" {
		t.Errorf("image (-got +want)\n%s", d)
	}
	r = b.Do("DELETE", "/screen", nil)
	want = map[string]any{"powered": false, "backlight": float64(0), "showing": "nothing"}
	if d := cmp.Diff(r.Map(t), want); d != "" {
		t.Errorf("DELETE (-got +want)\n%s", d)
	}

	// A clip: counters, then the end by itself, its last frame stays.
	seq := latestSeq(t, b)
	r = b.Do("POST", "/screen/show", `{"path":"/media/short.mov","loops":2}`)
	expect(t, r, 200, "")
	st := r.Map(t)
	clip, _ := st["clip"].(map[string]any)
	if st["showing"] != "clip" || st["loop"] != false || st["powered"] != true || st["backlight"] != float64(30) || clip == nil ||
		clip["width"] != float64(64) || clip["height"] != float64(48) || clip["frames"] != float64(6) || clip["fps"] != float64(30) {
		t.Fatalf("clip: %s", r.Body)
	}
	boardtest.WaitFor(t, 30*time.Second, "the clip to end", func() bool { return screenState(t, b)["showing"] == "image" })
	got := happenings(t, b, seq, "clip_started,clip_ended")
	wantEv := []string{
		`clip_started {"fps":30,"frames":6,"loop":false,"path":"/media/short.mov","plays":2}`,
		`clip_ended {"finished":true,"path":"/media/short.mov"}`,
	}
	if d := cmp.Diff(got, wantEv); d != "" {
		t.Errorf("clip happenings (-got +want)\n%s", d)
	}
	if st := screenState(t, b); st["path"] != "/media/short.mov" {
		t.Errorf("after the clip: %v", st)
	}
}

// TestScreenGuard: moving, replacing or deleting the file on the screen
// stops it first.
func TestScreenGuard(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	clip := testClip(t, 4, 32, 32)
	expect(t, upload(b, "/c/a.mov", "parents=1", clip), 201, "")
	show := func() {
		t.Helper()
		expect(t, b.Do("POST", "/screen/show", `{"path":"/c/a.mov","loop":true}`), 200, "")
	}
	stopped := func(what string) {
		t.Helper()
		if st := screenState(t, b); st["showing"] != "nothing" || st["powered"] != true {
			t.Errorf("after %s: %v", what, st)
		}
	}
	seq := latestSeq(t, b)
	show()
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/c/a.mov", "to": "/c/b.mov"}), 200, "")
	stopped("a move")
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/c/b.mov", "to": "/c/a.mov"}), 200, "")
	show()
	expect(t, upload(b, "/c/a.mov", "overwrite=1", clip), 200, "")
	stopped("a replace")
	show()
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/c", "to": "/d"}), 200, "")
	stopped("a move of its directory")
	expect(t, b.Do("POST", "/fs/move", map[string]any{"from": "/d", "to": "/c"}), 200, "")
	show()
	expect(t, b.Do("DELETE", "/fs/entry?path=/c&recursive=true", nil), 204, "")
	stopped("a delete")
	got := happenings(t, b, seq, "clip_ended")
	if len(got) != 4 {
		t.Fatalf("clip_ended: %q", got)
	}
	for _, e := range got {
		if e != `clip_ended {"finished":false,"path":"/c/a.mov"}` {
			t.Errorf("clip_ended: %s", e)
		}
	}
}

// TestSharedMedia plays the clips made by other tools, when they are there.
func TestSharedMedia(t *testing.T) {
	t.Parallel()
	// The shared media are part of the suite's inputs, wherever it runs:
	// without them the test fails rather than passing without testing.
	const dir = "../../../shared/media/"
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("shared media absent: %v (the suite reads them from ../shared/media beside the repository)", err)
	}
	b := boardtest.Start(t, "")
	for name, want := range map[string]string{"clip-160x120-12fps.mov": "clip", "anim-120.gif": "clip",
		"image-240.png": "image", "image-baseline.jpg": "image", "image-progressive.jpg": "", "too-large-320x240.mov": ""} {
		data, err := os.ReadFile(dir + name)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, upload(b, "/"+name, "", data), 201, "")
		r := b.Do("POST", "/screen/show", map[string]any{"path": "/" + name})
		if want == "" {
			expect(t, r, 422, "not_playable")
			continue
		}
		expect(t, r, 200, "")
		if got := r.Map(t)["showing"]; got != want {
			t.Errorf("%s shows as %v", name, got)
		}
	}

	// A MOV of one Motion-JPEG frame (the shared baseline JPEG, wrapped by
	// the project's MOV writer) is a clip: listed, described and shown as
	// one, playing its loops and ending with clip_ended.
	frame, err := os.ReadFile(dir + "image-baseline.jpg")
	if err != nil {
		t.Fatal(err)
	}
	var mov bytes.Buffer
	if err := media.WriteMOV(&mov, media.MOV{Frames: [][]byte{frame}, Width: 240, Height: 240, Timescale: 25, Delta: 1}); err != nil {
		t.Fatal(err)
	}
	expect(t, upload(b, "/one/frame.mov", "parents=1", mov.Bytes()), 201, "")
	info := b.Do("GET", "/media/info?path=/one/frame.mov", nil).Map(t)
	if info["kind"] != "clip" || info["frames"] != float64(1) || info["fps"] != float64(25) {
		t.Errorf("media info: %v", info)
	}
	var list struct {
		Entries []map[string]any `json:"entries"`
	}
	b.Do("GET", "/media?path=/one", nil).JSON(t, &list)
	if len(list.Entries) != 1 || list.Entries[0]["kind"] != "clip" || list.Entries[0]["playable"] != true {
		t.Errorf("media list: %v", list.Entries)
	}
	expect(t, b.Do("DELETE", "/screen", nil), 200, "") // ends what the loop above left playing
	seq := latestSeq(t, b)
	r := b.Do("POST", "/screen/show", `{"path":"/one/frame.mov","loops":2}`)
	expect(t, r, 200, "")
	st := r.Map(t)
	clip, _ := st["clip"].(map[string]any)
	if st["showing"] != "clip" || st["loop"] != false || clip == nil || clip["frames"] != float64(1) || clip["plays"] != float64(2) {
		t.Fatalf("one-frame clip: %s", r.Body)
	}
	boardtest.WaitFor(t, 30*time.Second, "the clip to end", func() bool { return screenState(t, b)["showing"] == "image" })
	got := happenings(t, b, seq, "clip_started,clip_ended")
	want := []string{
		`clip_started {"fps":25,"frames":1,"loop":false,"path":"/one/frame.mov","plays":2}`,
		`clip_ended {"finished":true,"path":"/one/frame.mov"}`,
	}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("one-frame clip happenings (-got +want)\n%s", d)
	}
}
