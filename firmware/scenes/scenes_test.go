package scenes

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/hal/sim"
	"github.com/holofleet/holofleet/firmware/holo"
	"github.com/holofleet/holofleet/firmware/leds"
	"github.com/holofleet/holofleet/firmware/media"
	"github.com/holofleet/holofleet/firmware/screen"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// memStore is a Store in memory that round-trips values through JSON.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Get(k string, v any) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[k]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}
func (s *memStore) Put(k string, v any) error {
	b, err := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = b
	return err
}
func (s *memStore) Delete(k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}
func (s *memStore) Keys() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// recorder keeps the happenings and the scene states in order.
type recorder struct {
	mu     sync.Mutex
	evs    []string
	notify chan struct{}
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.evs = append(r.evs, s)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) SetState(kind string, state any) {
	if kind == events.KindScene {
		b, _ := json.Marshal(state)
		r.add("state scene " + string(b))
	}
}

func (r *recorder) Emit(kind string, fields any) events.Happening {
	b, _ := json.Marshal(fields)
	r.add(kind + " " + string(b))
	return events.Happening{}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.evs
	r.evs = nil
	return out
}

// waitFor waits (bounded, real time) until an entry starting with prefix
// is recorded.
func (r *recorder) waitFor(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		for _, e := range r.evs {
			if strings.HasPrefix(e, prefix) {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no %q among %q", prefix, r.take())
		}
	}
}

type nullDisplay struct{}

func (nullDisplay) Show(*image.RGBA) error { return nil }
func (nullDisplay) Fill(color.RGBA) error  { return nil }
func (nullDisplay) SetPower(bool) error    { return nil }
func (nullDisplay) SetBacklight(int) error { return nil }
func (nullDisplay) Snapshot() *image.RGBA  { return nil }

// clip is a fake file of n frames at fps: a still image when n is 1 and
// fps 0, else a clip.
type clip struct {
	n   int
	fps float64
}

func (c clip) Info() media.Info {
	kind := media.KindClip
	if c.n == 1 && c.fps == 0 {
		kind = media.KindImage
	}
	return media.Info{Kind: kind, Frames: c.n, FPS: c.fps}
}
func (c clip) Frames() int  { return c.n }
func (c clip) FPS() float64 { return c.fps }
func (c clip) Width() int   { return 16 }
func (c clip) Height() int  { return 16 }
func (c clip) Frame(i int) (image.Image, error) {
	return image.NewRGBA(image.Rect(0, 0, 16, 16)), nil
}
func (c clip) Delay(int) time.Duration {
	if c.fps == 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / c.fps)
}
func (c clip) Close() error { return nil }

// fakeHolo records motions and can be made not ready.
type fakeHolo struct {
	mu       sync.Mutex
	notReady bool
	current  boardapi.MotionRequest
	log      []string
}

func (h *fakeHolo) State() holo.State {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notReady {
		return holo.State{Motion: h.current.Motion, Reason: "servos not calibrated"}
	}
	return holo.State{Motion: h.current.Motion, Ready: true}
}
func (h *fakeHolo) Motion(m boardapi.MotionRequest) (holo.State, error) {
	if _, err := m.Validate(); err != nil {
		return holo.State{}, err
	}
	h.mu.Lock()
	h.current = m
	h.log = append(h.log, m.Motion)
	h.mu.Unlock()
	return h.State(), nil
}
func (h *fakeHolo) Off() holo.State {
	st, _ := h.Motion(boardapi.MotionRequest{Motion: boardapi.MotionOff})
	return st
}
func (h *fakeHolo) Snapshot() boardapi.MotionRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current
}
func (h *fakeHolo) Restore(m boardapi.MotionRequest) error { _, err := h.Motion(m); return err }
func (h *fakeHolo) motion() string                         { return h.Snapshot().Motion }
func (h *fakeHolo) setReady(ok bool) {
	h.mu.Lock()
	h.notReady = !ok
	h.mu.Unlock()
}

type harness struct {
	t     *testing.T
	clk   *clock.Fake
	rec   *recorder
	store *memStore
	scr   *screen.Controller
	leds  *leds.Controller
	holo  *fakeHolo
	m     *Manager
	files map[string]media.Clip
	del   []string
	start func(r *http.Request) (time.Time, bool, error) // Options.Start
}

func newHarness(t *testing.T) *harness { return newHarnessStart(t, nil) }

// newHarnessStart is newHarness with the manager's Options.Start.
func newHarnessStart(t *testing.T, start func(*http.Request) (time.Time, bool, error)) *harness {
	h := &harness{t: t, start: start, clk: clock.NewFake(t0), rec: &recorder{notify: make(chan struct{}, 1)},
		store: &memStore{m: map[string][]byte{}}, holo: &fakeHolo{current: boardapi.MotionRequest{Motion: boardapi.MotionStop}},
		files: map[string]media.Clip{
			"/short.mov": clip{n: 3, fps: 10},
			"/bg.mov":    clip{n: 2, fps: 10},
			"/still.png": clip{n: 1},
		}}
	var err error
	h.scr, err = screen.New(screen.Options{Clock: h.clk, Display: nullDisplay{}, Publisher: h.rec, Backlight: 50,
		Open: func(p string) (media.Clip, error) {
			if c, ok := h.files[p]; ok {
				return c, nil
			}
			return nil, api.Errorf(api.ErrNotFound, "%s does not exist", p)
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.leds, err = leds.New(leds.Options{Clock: h.clk, Strip: sim.NewLEDStrip(), Count: 4})
	if err != nil {
		t.Fatal(err)
	}
	h.open()
	t.Cleanup(func() { h.m.Close(); h.scr.Close() })
	return h
}

func (h *harness) open() {
	m, err := New(Options{Clock: h.clk, Store: h.store, Screen: h.scr, LEDs: h.leds, Holo: h.holo, Publisher: h.rec,
		OnDelete: func(n string) error { h.del = append(h.del, n); return nil }, Start: h.start})
	if err != nil {
		h.t.Fatal(err)
	}
	h.m = m
}

func (h *harness) save(name string, s string) {
	h.t.Helper()
	var sc boardapi.Scene
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.m.Save(name, sc); err != nil {
		h.t.Fatalf("save %s: %v", name, err)
	}
}

func (h *harness) apply(name string) Applied {
	h.t.Helper()
	a, err := h.m.ApplyName(name)
	if err != nil {
		h.t.Fatalf("apply %s: %v", name, err)
	}
	return a
}

func (h *harness) show(r string) {
	h.t.Helper()
	var req boardapi.ShowRequest
	if err := json.Unmarshal([]byte(r), &req); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.scr.Show(req); err != nil {
		h.t.Fatal(err)
	}
}

// step waits until n timers are armed (the clip's, and the scene's when
// it has a duration), then moves time on by d.
func (h *harness) step(n int, d time.Duration) {
	h.t.Helper()
	if !h.clk.WaitForWaiters(n, 5*time.Second) {
		h.t.Fatal("nothing armed a timer")
	}
	h.clk.Advance(d)
}

// settle waits for a then in progress to be done.
func (h *harness) settle() {
	h.m.op.Lock()
	_ = h.m.Running()
	h.m.op.Unlock()
}

func (h *harness) ledMode() string { return h.leds.State().Mode }

func diff(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("%s (-got +want)\n%s", what, d)
	}
}

func TestSaveRules(t *testing.T) {
	h := newHarness(t)
	h.save("taken", `{"slot":7}`)
	tests := []struct {
		name, body string
		err        *api.Error
		msg        string
	}{
		{"a", `{"then":"later"}`, api.ErrBadRequest, "then"},
		{"a", `{"duration_s":0,"then":"off"}`, api.ErrBadRequest, "duration_s"},
		{"a", `{"duration_s":-1}`, api.ErrBadRequest, "duration_s"},
		{"a", `{"duration_s":70000}`, api.ErrBadRequest, "duration_s"},
		{"a", `{"slot":0}`, api.ErrBadRequest, "slot"},
		{"a", `{"slot":256}`, api.ErrBadRequest, "slot"},
		{"a", `{"slot":7}`, api.ErrSlotTaken, "taken"},
		{"a", `{"then":"restore"}`, api.ErrBadRequest, "duration_s"},
		{"a", `{"then":"off","screen":{"colour":"red"}}`, api.ErrBadRequest, "duration_s"},
		{"a", `{"then":"restore","screen":{"path":"/bg.mov","loop":true}}`, api.ErrBadRequest, "loop forever"},
		{"a", `{"screen":{"colour":"#12"}}`, api.ErrBadRequest, "screen: "},
		{"a", `{"screen":{"path":"/a/../b"}}`, api.ErrBadPath, "screen: "},
		{"a", `{"leds":{"mode":"disco"}}`, api.ErrBadRequest, "leds: "},
		{"a", `{"leds":{"brightness":0}}`, api.ErrBadRequest, "leds: "},
		{"a", `{"holo":{"motion":"spin"}}`, api.ErrBadRequest, "holo: "},
		{"a", `{"holo":{"motion":"move","x":3}}`, api.ErrBadRequest, "holo: "},
		{"", `{}`, api.ErrBadRequest, "name"},
		{strings.Repeat("n", 33), `{}`, api.ErrBadRequest, "name"},
		{"tab\there", `{}`, api.ErrBadRequest, "control"},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			var sc boardapi.Scene
			if err := json.Unmarshal([]byte(tc.body), &sc); err != nil {
				t.Fatal(err)
			}
			_, err := h.m.Save(tc.name, sc)
			var e *api.Error
			if !errors.Is(err, tc.err) || !errors.As(err, &e) || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want %v mentioning %q", err, tc.err, tc.msg)
			}
		})
	}
	if l := h.m.List(); len(l.Scenes) != 1 {
		t.Errorf("a refused save changed the list: %+v", l)
	}
	// Accepted: files are not looked at; a restore scene with a clip
	// that plays once by default, or with loops, or with a duration.
	h.save("later", `{"screen":{"path":"/not/yet.mov"},"then":"restore"}`)
	h.save("loops", `{"screen":{"path":"/bg.mov","loops":3},"then":"off"}`)
	h.save("timed", `{"screen":{"path":"/bg.mov","loop":true},"then":"restore","duration_s":2.5}`)
	h.save("taken", `{"slot":7,"leds":{"mode":"solid"}}`) // its own slot again
	for i := range boardapi.MaxScenes - 4 {
		h.save(fmt.Sprint("s", i), `{}`)
	}
	if _, err := h.m.Save("one-too-many", boardapi.Scene{}); !errors.Is(err, api.ErrFull) {
		t.Errorf("17th scene: %v", err)
	}
	h.save("s0", `{"then":"stay"}`) // replacing one is fine when full
	if h.m.Exists("one-too-many") || !h.m.Exists("later") {
		t.Error("Exists is wrong")
	}
	// They are saved: a new manager over the same store has them.
	h.m.Close()
	h.open()
	l := h.m.List()
	if len(l.Scenes) != boardapi.MaxScenes || l.Scenes[0].Name != "later" || l.Active != nil {
		t.Errorf("reloaded: %d scenes, first %q", len(l.Scenes), l.Scenes[0].Name)
	}
	diff(t, "reloaded timed", l.Scenes[len(l.Scenes)-1].Scene.DurationS, ptr(2.5))
}

func ptr[T any](v T) *T { return &v }

func TestDelete(t *testing.T) {
	h := newHarness(t)
	h.save("a", `{}`)
	if _, err := h.m.Delete("b"); !errors.Is(err, api.ErrUnknownScene) {
		t.Errorf("delete unknown: %v", err)
	}
	if l, err := h.m.Delete("a"); err != nil || len(l.Scenes) != 0 {
		t.Fatalf("delete: %v %+v", err, l)
	}
	diff(t, "told of deletions", h.del, []string{"a"})
	if _, err := h.m.ApplyName("a"); !errors.Is(err, api.ErrUnknownScene) {
		t.Errorf("apply deleted: %v", err)
	}
}

// TestStay: a stay scene has scene_started only (rule 3), runs to no end,
// and is not ended when replaced.
func TestStay(t *testing.T) {
	h := newHarness(t)
	h.save("glow", `{"screen":{"path":"/short.mov"},"leds":{"mode":"solid","colour":"red"},"holo":{"motion":"twitch"},"slot":4,"duration_s":1}`)
	a := h.apply("glow")
	diff(t, "reply", a, Applied{Started: Started{Name: ptr("glow"), Slot: 4, Then: boardapi.SceneThenStay, DurationS: 1}})
	if h.ledMode() != "solid" || h.holo.motion() != "twitch" || h.scr.State().Path != "/short.mov" {
		t.Errorf("parts not set: %s %s %+v", h.ledMode(), h.holo.motion(), h.scr.State())
	}
	// A stay scene's clip with neither loop nor loops loops forever.
	if st := h.scr.State(); !*st.Loop {
		t.Errorf("stay clip: %+v", st)
	}
	h.show(`{"colour":"blue"}`)
	h.clk.Advance(2 * time.Second)
	diff(t, "happenings", h.rec.take(), []string{
		`clip_started {"path":"/short.mov","loop":true,"plays":0,"frames":3,"fps":10}`,
		`scene_started {"name":"glow","slot":4,"then":"stay","until_clip_ends":false,"duration_s":1}`,
		`clip_ended {"path":"/short.mov","finished":false}`,
	})
	if _, err := h.m.End(); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("end with none running: %v", err)
	}
}

// TestRestoreByClip: rule 1 and rule 2, then restore, a clip that plays
// once by default, the earlier looping clip plays again.
func TestRestoreByClip(t *testing.T) {
	h := newHarness(t)
	h.show(`{"path":"/bg.mov","loop":true}`)
	h.leds.Patch(boardapi.LEDPatch{Mode: ptr("solid"), Colour: ptr("orange")})
	h.holo.Motion(boardapi.MotionRequest{Motion: boardapi.MotionWag})
	h.rec.take()
	h.save("intro", `{"screen":{"path":"/short.mov"},"leds":{"colour":"purple"},"holo":{"motion":"nod"},"then":"restore","slot":9}`)
	a := h.apply("intro")
	want := &Running{Name: ptr("intro"), Slot: 9, Then: boardapi.SceneThenRestore, UntilClipEnds: true}
	diff(t, "active", a.Active, want)
	diff(t, "list active", h.m.List().Active, want)
	var sb frame.StatusBlock
	h.m.Status(&sb)
	if sb.Scene != 9 || sb.Remaining != frame.NoRemaining {
		t.Errorf("status %+v", sb)
	}
	if h.leds.State().Colour != "#8000ff" {
		t.Errorf("leds part not set: %+v", h.leds.State())
	}
	for range 3 {
		h.step(1, 100*time.Millisecond)
	}
	h.rec.waitFor(t, `clip_started {"path":"/bg.mov"`)
	h.settle()
	diff(t, "happenings", h.rec.take(), []string{
		`clip_ended {"path":"/bg.mov","finished":false}`,
		`clip_started {"path":"/short.mov","loop":false,"plays":1,"frames":3,"fps":10}`,
		`scene_started {"name":"intro","slot":9,"then":"restore","until_clip_ends":true}`,
		`state scene {"name":"intro","slot":9,"then":"restore","until_clip_ends":true,"remaining_s":null}`,
		`scene_ended {"name":"intro","slot":9,"then":"restore","by":"clip"}`,
		`state scene null`,
		`clip_ended {"path":"/short.mov","finished":true}`,
		`clip_started {"path":"/bg.mov","loop":true,"plays":0,"frames":2,"fps":10}`,
	})
	if st := h.scr.State(); st.Path != "/bg.mov" || !*st.Loop {
		t.Errorf("screen not restored: %+v", st)
	}
	if s := h.leds.State(); s.Mode != "solid" || s.Colour != "#ff8000" {
		t.Errorf("leds not restored: %+v", s)
	}
	if h.holo.motion() != boardapi.MotionWag {
		t.Errorf("holo not restored: %v", h.holo.motion())
	}
	if h.m.Running() != nil {
		t.Error("still running")
	}
	h.m.Status(&sb)
	if sb.Scene != frame.SceneNone {
		t.Errorf("status after: %+v", sb)
	}
}

// TestOffByTime: duration_s, remaining_s, then off.
func TestOffByTime(t *testing.T) {
	h := newHarness(t)
	h.show(`{"colour":"green"}`)
	h.rec.take()
	a, err := h.m.Apply(boardapi.SceneApply{Scene: &boardapi.Scene{Screen: &boardapi.ShowRequest{Path: ptr("/bg.mov"), Loop: ptr(true)},
		LEDs: &boardapi.LEDPatch{Mode: ptr("solid")}, Then: boardapi.SceneThenOff, DurationS: ptr(2.0)}})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "active", a.Active, &Running{Then: boardapi.SceneThenOff, RemainingS: ptr(2.0)})
	h.step(2, 100*time.Millisecond)
	h.step(2, 1134*time.Millisecond)
	if r := h.m.Running(); r == nil || *r.RemainingS != 0.8 {
		t.Errorf("running after 1.234 s: %+v", r)
	}
	var sb frame.StatusBlock
	h.m.Status(&sb)
	if sb.Scene != frame.SceneNoSlot || sb.Remaining != 8 {
		t.Errorf("status %+v", sb)
	}
	h.clk.Advance(time.Second)
	h.rec.waitFor(t, "scene_ended")
	h.settle()
	got := h.rec.take()
	diff(t, "happenings", got, []string{
		`clip_started {"path":"/bg.mov","loop":true,"plays":0,"frames":2,"fps":10}`,
		`scene_started {"name":null,"then":"off","until_clip_ends":false,"duration_s":2}`,
		`state scene {"name":null,"then":"off","until_clip_ends":false,"remaining_s":2}`,
		`scene_ended {"name":null,"then":"off","by":"time"}`,
		`state scene null`,
		`clip_ended {"path":"/bg.mov","finished":false}`,
	})
	if st := h.scr.State(); st.Powered || st.Showing != screen.ShowingNothing {
		t.Errorf("screen not off: %+v", st)
	}
	if h.ledMode() != "off" || h.holo.motion() != boardapi.MotionOff {
		t.Errorf("leds %s holo %s", h.ledMode(), h.holo.motion())
	}
}

// TestEnd: POST /scenes/end ends with by=end and does then.
func TestEnd(t *testing.T) {
	h := newHarness(t)
	h.leds.Patch(boardapi.LEDPatch{Mode: ptr("solid")})
	h.save("party", `{"leds":{"mode":"rainbow"},"then":"restore","duration_s":60}`)
	h.apply("party")
	e, err := h.m.End()
	diff(t, "end", e, Ended{Name: ptr("party"), Then: boardapi.SceneThenRestore, By: ByEnd})
	if err != nil || h.ledMode() != "solid" || h.m.Running() != nil {
		t.Errorf("after end: %v %s", err, h.ledMode())
	}
	if h.clk.Waiters() != 0 {
		t.Errorf("the scene's timer is still armed")
	}
	if _, err := h.m.End(); !errors.Is(err, api.ErrNotRunning) {
		t.Errorf("second end: %v", err)
	}
}

// TestReplaced: another scene, or another show, ends a running scene with
// by=replaced and its then is not done.
func TestReplaced(t *testing.T) {
	h := newHarness(t)
	h.save("a", `{"screen":{"colour":"red"},"leds":{"mode":"solid"},"then":"off","duration_s":5}`)
	h.save("b", `{"leds":{"mode":"wipe"}}`)
	h.apply("a")
	h.rec.take()
	h.apply("b")
	diff(t, "by scene", h.rec.take(), []string{
		`scene_ended {"name":"a","then":"off","by":"replaced"}`,
		`state scene null`,
		`scene_started {"name":"b","then":"stay","until_clip_ends":false}`,
		`state scene null`,
	})
	if st := h.scr.State(); st.Colour != "#ff0000" || h.ledMode() != "wipe" {
		t.Errorf("then was done: %+v %s", st, h.ledMode())
	}
	h.apply("a")
	h.rec.take()
	h.show(`{"calibration":true}`)
	diff(t, "by show", h.rec.take(), []string{
		`scene_ended {"name":"a","then":"off","by":"replaced"}`,
		`state scene null`,
	})
	h.apply("a")
	h.rec.take()
	h.scr.Off()
	diff(t, "by DELETE /screen", h.rec.take(), []string{
		`scene_ended {"name":"a","then":"off","by":"replaced"}`,
		`state scene null`,
	})
	// A show does not end a scene that has no screen part.
	h.save("c", `{"leds":{"mode":"solid"},"then":"off","duration_s":5}`)
	h.apply("c")
	h.show(`{"colour":"white"}`)
	if h.m.Running() == nil {
		t.Error("a screen change ended a scene without a screen part")
	}
	h.clk.Advance(5 * time.Second)
	h.rec.waitFor(t, `scene_ended {"name":"c","then":"off","by":"time"}`)
}

// TestTwoRestores: a restore scene replacing a restore scene goes back to
// what was before the first.
func TestTwoRestores(t *testing.T) {
	h := newHarness(t)
	h.show(`{"colour":"#010203"}`)
	h.leds.Patch(boardapi.LEDPatch{Mode: ptr("solid"), Colour: ptr("blue")})
	h.save("one", `{"screen":{"colour":"red"},"leds":{"mode":"rainbow"},"then":"restore","duration_s":10}`)
	h.save("two", `{"screen":{"colour":"green"},"holo":{"motion":"scan"},"then":"restore","duration_s":10}`)
	h.apply("one")
	h.apply("two")
	if st := h.scr.State(); st.Colour != "#00ff00" || h.ledMode() != "rainbow" || h.holo.motion() != "scan" {
		t.Fatalf("two applied: %+v %s %s", st, h.ledMode(), h.holo.motion())
	}
	if _, err := h.m.End(); err != nil {
		t.Fatal(err)
	}
	if st := h.scr.State(); st.Colour != "#010203" {
		t.Errorf("screen: %+v", st)
	}
	if s := h.leds.State(); s.Mode != "solid" || s.Colour != "#0000ff" {
		t.Errorf("leds: %+v", s)
	}
	if h.holo.motion() != boardapi.MotionStop {
		t.Errorf("holo: %v", h.holo.motion())
	}
}

// TestApplyErrors: a bad part changes nothing and its error names it.
func TestApplyErrors(t *testing.T) {
	h := newHarness(t)
	h.show(`{"colour":"#0a0b0c"}`)
	h.leds.Patch(boardapi.LEDPatch{Mode: ptr("solid")})
	h.save("running", `{"then":"off","duration_s":30}`)
	h.apply("running")
	h.save("slotted", `{"slot":12}`)
	h.rec.take()
	h.holo.setReady(false)
	tests := []struct {
		name string
		req  boardapi.SceneApply
		err  *api.Error
		msg  string
	}{
		{"unknown name", boardapi.SceneApply{Name: ptr("nope")}, api.ErrUnknownScene, "nope"},
		{"unknown slot", boardapi.SceneApply{Slot: ptr(13)}, api.ErrUnknownScene, "13"},
		{"nothing", boardapi.SceneApply{}, api.ErrBadRequest, ""},
		{"name and slot", boardapi.SceneApply{Name: ptr("slotted"), Slot: ptr(12)}, api.ErrBadRequest, ""},
		{"bad given scene", boardapi.SceneApply{Scene: &boardapi.Scene{Then: "never"}}, api.ErrBadRequest, "then"},
		{"missing file", boardapi.SceneApply{Scene: &boardapi.Scene{Screen: &boardapi.ShowRequest{Path: ptr("/gone.mov")}, LEDs: &boardapi.LEDPatch{Mode: ptr("wipe")}}}, api.ErrNotFound, "screen: /gone.mov"},
		{"image in a restore scene", boardapi.SceneApply{Scene: &boardapi.Scene{Screen: &boardapi.ShowRequest{Path: ptr("/still.png")}, Then: boardapi.SceneThenRestore}}, api.ErrBadRequest, "screen: /still.png"},
		{"holo not ready", boardapi.SceneApply{Scene: &boardapi.Scene{Screen: &boardapi.ShowRequest{Colour: ptr("red")}, Holo: &boardapi.MotionRequest{Motion: "twitch"}}}, api.ErrNotReady, "holo: holo cannot move"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.m.Apply(tc.req)
			var e *api.Error
			if !errors.Is(err, tc.err) || !errors.As(err, &e) || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.err, tc.msg)
			}
			if st := h.scr.State(); st.Colour != "#0a0b0c" || h.ledMode() != "solid" {
				t.Errorf("changed: %+v %s", st, h.ledMode())
			}
			if r := h.m.Running(); r == nil || *r.Name != "running" {
				t.Errorf("the running scene ended: %+v", r)
			}
			if got := h.rec.take(); len(got) != 0 {
				t.Errorf("happenings %q", got)
			}
		})
	}
	// Stop and off need no ready holo.
	if _, err := h.m.Apply(boardapi.SceneApply{Scene: &boardapi.Scene{Holo: &boardapi.MotionRequest{Motion: boardapi.MotionOff}}}); err != nil {
		t.Errorf("off on a holo not ready: %v", err)
	}
	// By slot.
	a, err := h.m.Apply(boardapi.SceneApply{Slot: ptr(12)})
	if err != nil || *a.Started.Name != "slotted" || a.Started.Slot != 12 {
		t.Errorf("by slot: %+v %v", a, err)
	}
}

// TestClipFinishingInDurationScene: a looping clip does not end a scene
// with a duration; the first of clip and time ends it otherwise.
func TestClipAndDuration(t *testing.T) {
	h := newHarness(t)
	h.save("capped", `{"screen":{"path":"/short.mov","loops":10},"then":"off","duration_s":0.5}`)
	a := h.apply("capped")
	if !a.Active.UntilClipEnds || *a.Active.RemainingS != 0.5 {
		t.Errorf("active %+v", a.Active)
	}
	for range 5 {
		h.step(2, 100*time.Millisecond)
	}
	h.rec.waitFor(t, `scene_ended {"name":"capped","then":"off","by":"time"}`)
	h.save("short", `{"screen":{"path":"/short.mov"},"then":"off","duration_s":30}`)
	h.rec.take()
	h.apply("short")
	for range 3 {
		h.step(2, 100*time.Millisecond)
	}
	h.rec.waitFor(t, `scene_ended {"name":"short","then":"off","by":"clip"}`)
}

// TestSceneEvents checks the clip_started/scene_started order for a
// scene given whole with a name.
func TestGivenWithName(t *testing.T) {
	h := newHarness(t)
	a, err := h.m.Apply(boardapi.SceneApply{Name: ptr("adhoc"), Scene: &boardapi.Scene{Screen: &boardapi.ShowRequest{Path: ptr("/bg.mov"), Loop: ptr(true)}}})
	if err != nil || *a.Started.Name != "adhoc" || h.m.Exists("adhoc") {
		t.Fatalf("%+v %v", a, err)
	}
	diff(t, "happenings", h.rec.take(), []string{
		`clip_started {"path":"/bg.mov","loop":true,"plays":0,"frames":2,"fps":10}`,
		`scene_started {"name":"adhoc","then":"stay","until_clip_ends":false}`,
	})
}

// TestApplyClipStart: POST /scenes/apply starts its scene's clip on the
// moment the request names (Options.Start: clip_start, fire_at) or,
// without one, when the board took the request, not when the change ran
// (opening the file, waiting for its moment); a moment Start refuses
// refuses the request with nothing changed.
func TestApplyClipStart(t *testing.T) {
	named := t0.Add(-250 * time.Millisecond)
	tests := []struct {
		name    string
		start   func(*http.Request) (time.Time, bool, error)
		want    time.Time // the clip's anchor; zero: refused
		wantErr *api.Error
	}{
		{"named", func(r *http.Request) (time.Time, bool, error) {
			if r.URL.Query().Get("clip_start") != "42" {
				t.Errorf("Start saw %s", r.URL)
			}
			return named, true, nil
		}, named, nil},
		{"none named", func(*http.Request) (time.Time, bool, error) { return time.Time{}, false, nil }, t0, nil},
		{"no Start", nil, t0, nil},
		{"refused", func(*http.Request) (time.Time, bool, error) {
			return time.Time{}, false, api.Errorf(api.ErrBadRequest, "clip_start is 61 s ahead")
		}, time.Time{}, api.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessStart(t, tt.start)
			h.save("loop", `{"screen":{"path":"/bg.mov","loop":true},"slot":1}`)
			var apply api.Route
			for _, r := range h.m.Routes() {
				if r.Method == http.MethodPost && r.Path == "/scenes/apply" {
					apply = r
				}
			}
			req := httptest.NewRequest(http.MethodPost, "/scenes/apply?clip_start=42", strings.NewReader(`{"slot":1}`))
			req.Header.Set("Content-Type", "application/json")
			ch, err := apply.Prepare(req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("prepare: %v, want %v", err, tt.wantErr)
				}
				if _, ok := h.scr.ClipTimeline(); ok {
					t.Error("a refused apply started the clip")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(80 * time.Millisecond) // the change runs later (its moment, the file)
			if _, _, err := ch.Apply(); err != nil {
				t.Fatal(err)
			}
			tl, ok := h.scr.ClipTimeline()
			if !ok || !tl.Anchor.Equal(tt.want) {
				t.Errorf("clip anchored at %v (playing %v), want %v", tl.Anchor.Sub(t0), ok, tt.want.Sub(t0))
			}
		})
	}
}
