package screen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/media"
)

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// shot is one picture the fake panel received: when (offset from t0) and
// the red value at its centre, which the fake clips set to the frame index.
type shot struct {
	At  time.Duration
	Red uint8
}

type fakeDisplay struct {
	clk       clock.Clock
	mu        sync.Mutex
	shots     []shot
	powered   bool
	backlight int
	centre    color.RGBA
}

func (d *fakeDisplay) Show(img *image.RGBA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.centre = img.RGBAAt(hal.ScreenWidth/2+4, hal.ScreenHeight/2+4)
	d.shots = append(d.shots, shot{d.clk.Now().Sub(t0), d.centre.R})
	return nil
}
func (d *fakeDisplay) Fill(c color.RGBA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.centre = c
	return nil
}
func (d *fakeDisplay) SetPower(on bool) error {
	d.mu.Lock()
	d.powered = on
	d.mu.Unlock()
	return nil
}
func (d *fakeDisplay) SetBacklight(p int) error {
	d.mu.Lock()
	d.backlight = p
	d.mu.Unlock()
	return nil
}
func (d *fakeDisplay) Snapshot() *image.RGBA { return nil }

func (d *fakeDisplay) get() (shots []shot, powered bool, backlight int, centre color.RGBA) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]shot(nil), d.shots...), d.powered, d.backlight, d.centre
}

// fakeClip is a clip of solid frames whose red value is the frame index.
// Decoding a frame advances the fake clock by cost (a slow decoder).
type fakeClip struct {
	clk    *clock.Fake
	n      int
	fps    float64
	w, h   int
	cost   time.Duration
	failAt int // Frame fails at this index when > 0
	closed *int
	mu     *sync.Mutex
}

// Info: a fake of one frame and no rate is a still image, else a clip.
func (f *fakeClip) Info() media.Info {
	kind := media.KindClip
	if f.n == 1 && f.fps == 0 {
		kind = media.KindImage
	}
	return media.Info{Kind: kind, Width: f.w, Height: f.h, Frames: f.n, FPS: f.fps}
}
func (f *fakeClip) Frames() int  { return f.n }
func (f *fakeClip) FPS() float64 { return f.fps }
func (f *fakeClip) Width() int   { return f.w }
func (f *fakeClip) Height() int  { return f.h }
func (f *fakeClip) Frame(i int) (image.Image, error) {
	if f.cost > 0 {
		f.clk.Advance(f.cost)
	}
	if f.failAt > 0 && i == f.failAt {
		return nil, errors.New("broken frame")
	}
	return image.NewUniform(color.RGBA{uint8(i), 9, 9, 255}), nil
}
func (f *fakeClip) Delay(int) time.Duration {
	if f.fps == 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / f.fps)
}
func (f *fakeClip) Close() error {
	f.mu.Lock()
	*f.closed++
	f.mu.Unlock()
	return nil
}

// uniform bounds: image.Uniform is infinite, so the fake wraps it.
type sized struct {
	image.Image
	r image.Rectangle
}

func (s sized) Bounds() image.Rectangle { return s.r }

type event struct {
	Kind string
	Data string // JSON of the fields or state
}

type recorder struct {
	mu     sync.Mutex
	evs    []event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) add(kind string, v any) {
	b, _ := json.Marshal(v)
	r.mu.Lock()
	r.evs = append(r.evs, event{kind, string(b)})
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}
func (r *recorder) SetState(kind string, state any) { r.add(kind, state) }
func (r *recorder) Emit(kind string, fields any) events.Happening {
	r.add(kind, fields)
	return events.Happening{}
}

// happenings returns the happenings recorded (no states).
func (r *recorder) happenings() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.evs {
		if e.Kind != events.KindScreen {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits (real time, bounded) until n happenings are recorded.
func (r *recorder) waitFor(t *testing.T, n int) []event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if h := r.happenings(); len(h) >= n {
			return h
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("waited for %d happenings, have %v", n, r.happenings())
		}
	}
}

type harness struct {
	t      *testing.T
	clk    *clock.Fake
	disp   *fakeDisplay
	rec    *recorder
	c      *Controller
	clips  map[string]*fakeClip
	closed int
	mu     sync.Mutex
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clk: clock.NewFake(t0), rec: newRecorder(), clips: map[string]*fakeClip{}}
	h.disp = &fakeDisplay{clk: h.clk}
	c, err := New(Options{Clock: h.clk, Display: h.disp, Publisher: h.rec, Backlight: 60, Open: h.open})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(c.Close)
	return h
}

func (h *harness) open(p string) (media.Clip, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.clips[p]
	if !ok {
		return nil, api.Errorf(api.ErrNotFound, "%s does not exist", p)
	}
	cp := *f
	cp.clk, cp.closed, cp.mu = h.clk, &h.closed, &h.mu
	return &fakeClipSized{&cp}, nil
}

// fakeClipSized returns frames with the clip's bounds.
type fakeClipSized struct{ *fakeClip }

func (f *fakeClipSized) Frame(i int) (image.Image, error) {
	img, err := f.fakeClip.Frame(i)
	if err != nil {
		return nil, err
	}
	return sized{img, image.Rect(0, 0, f.w, f.h)}, nil
}

func (h *harness) add(p string, n int, fps float64) *fakeClip {
	f := &fakeClip{n: n, fps: fps, w: 32, h: 24}
	h.mu.Lock()
	h.clips[p] = f
	h.mu.Unlock()
	return f
}

// step waits for the player to arm its timer, then moves time on by d.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	if !h.clk.WaitForWaiters(1, 30*time.Second) {
		h.t.Fatal("the player never armed its timer")
	}
	h.clk.Advance(d)
}

// settle waits until the player has drawn what was due and armed its
// timer again.
func (h *harness) settle() {
	h.t.Helper()
	if !h.clk.WaitForWaiters(1, 30*time.Second) {
		h.t.Fatal("the player never armed its timer")
	}
}

func (h *harness) show(r boardapi.ShowRequest) State {
	h.t.Helper()
	st, err := h.c.Show(r)
	if err != nil {
		h.t.Fatalf("show %+v: %v", r, err)
	}
	return st
}

func ptr[T any](v T) *T { return &v }

func path(p string, extra ...func(*boardapi.ShowRequest)) boardapi.ShowRequest {
	r := boardapi.ShowRequest{Path: &p}
	for _, f := range extra {
		f(&r)
	}
	return r
}

func loops(n int) func(*boardapi.ShowRequest) { return func(r *boardapi.ShowRequest) { r.Loops = &n } }
func loop(b bool) func(*boardapi.ShowRequest) { return func(r *boardapi.ShowRequest) { r.Loop = &b } }

func TestStart(t *testing.T) {
	h := newHarness(t)
	want := State{Powered: true, Backlight: 60, Showing: ShowingNothing}
	if diff := cmp.Diff(h.c.State(), want); diff != "" {
		t.Errorf("state at start (-got +want)\n%s", diff)
	}
	if _, p, bl, c := h.disp.get(); !p || bl != 60 || c != (color.RGBA{A: 255}) {
		t.Errorf("panel at start: powered %v backlight %d centre %v", p, bl, c)
	}
}

// TestStillRows covers the rows of the screen table that show something
// still: colour, calibration, image, and DELETE /screen.
func TestStillRows(t *testing.T) {
	h := newHarness(t)
	h.add("/img.png", 1, 0)
	st := h.show(boardapi.ShowRequest{Colour: ptr("#102030")})
	if diff := cmp.Diff(st, State{Powered: true, Backlight: 60, Showing: ShowingColour, Colour: "#102030"}); diff != "" {
		t.Errorf("colour (-got +want)\n%s", diff)
	}
	if _, _, _, c := h.disp.get(); c != (color.RGBA{0x10, 0x20, 0x30, 0xff}) {
		t.Errorf("panel centre %v", c)
	}
	st = h.show(boardapi.ShowRequest{Colour: ptr("255, 128, 0")})
	if st.Colour != "#ff8000" {
		t.Errorf("R,G,B colour reported as %q", st.Colour)
	}
	st = h.show(boardapi.ShowRequest{Calibration: ptr(true)})
	if diff := cmp.Diff(st, State{Powered: true, Backlight: 60, Showing: ShowingCalibration}); diff != "" {
		t.Errorf("calibration (-got +want)\n%s", diff)
	}
	if _, _, _, c := h.disp.get(); c.R != 0 {
		t.Errorf("crosshair pixel off centre lines should be black, got %v", c)
	}
	st = h.show(path("/img.png", loop(true)))
	if diff := cmp.Diff(st, State{Powered: true, Backlight: 60, Showing: ShowingImage, Path: "/img.png"}); diff != "" {
		t.Errorf("image (-got +want)\n%s", diff)
	}
	if len(h.rec.happenings()) != 0 {
		t.Errorf("still pictures emitted %v", h.rec.happenings())
	}
	st = h.c.Off()
	if diff := cmp.Diff(st, State{Powered: false, Backlight: 0, Showing: ShowingNothing}); diff != "" {
		t.Errorf("off (-got +want)\n%s", diff)
	}
	if _, p, bl, _ := h.disp.get(); p || bl != 0 {
		t.Errorf("panel after off: powered %v backlight %d", p, bl)
	}
	// A show wakes the panel at the backlight it had.
	st = h.show(boardapi.ShowRequest{Colour: ptr("red")})
	if !st.Powered || st.Backlight != 60 {
		t.Errorf("after off, a show: %+v", st)
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed != 1 {
		t.Errorf("image file closed %d times", closed)
	}
}

func TestBacklight(t *testing.T) {
	h := newHarness(t)
	st, err := h.c.SetBacklight(25)
	if err != nil || st.Backlight != 25 {
		t.Fatalf("backlight 25: %+v %v", st, err)
	}
	if _, err := h.c.SetBacklight(101); !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("backlight 101: %v", err)
	}
	h.c.Off()
	st, _ = h.c.SetBacklight(40)
	if st.Powered || st.Backlight != 0 {
		t.Errorf("asleep, PATCH backlight woke it: %+v", st)
	}
	st = h.show(boardapi.ShowRequest{Calibration: ptr(true)})
	if st.Backlight != 40 {
		t.Errorf("woke at %d, want 40", st.Backlight)
	}
	var sb frame.StatusBlock
	h.c.Status(&sb)
	if sb.Showing != frame.ShowingCalibration || sb.Backlight != 40 {
		t.Errorf("status %+v", sb)
	}
}

func TestBadRequests(t *testing.T) {
	h := newHarness(t)
	h.add("/a.mov", 3, 10)
	before := h.show(boardapi.ShowRequest{Colour: ptr("#00ff00")})
	tests := []struct {
		name string
		req  boardapi.ShowRequest
		err  *api.Error
	}{
		{"nothing", boardapi.ShowRequest{}, api.ErrBadRequest},
		{"path and colour", boardapi.ShowRequest{Path: ptr("/a.mov"), Colour: ptr("red")}, api.ErrBadRequest},
		{"colour and calibration", boardapi.ShowRequest{Colour: ptr("red"), Calibration: ptr(true)}, api.ErrBadRequest},
		{"calibration false", boardapi.ShowRequest{Calibration: ptr(false)}, api.ErrBadRequest},
		{"loop with colour", boardapi.ShowRequest{Colour: ptr("red"), Loop: ptr(true)}, api.ErrBadRequest},
		{"bad colour", boardapi.ShowRequest{Colour: ptr("#12345")}, api.ErrBadRequest},
		{"colour name unknown", boardapi.ShowRequest{Colour: ptr("ultraviolet")}, api.ErrBadRequest},
		{"loops 0", path("/a.mov", loops(0)), api.ErrBadRequest},
		{"loops and loop", path("/a.mov", loops(2), loop(true)), api.ErrBadRequest},
		{"bad path", path("/a/../b.mov"), api.ErrBadPath},
		{"relative path", path("a.mov"), api.ErrBadPath},
		{"root", path("/"), api.ErrIsADirectory},
		{"missing", path("/none.mov"), api.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.c.Show(tc.req)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(h.c.State(), before); diff != "" {
				t.Errorf("state changed (-got +want)\n%s", diff)
			}
		})
	}
}

func TestClipPlaysOnTime(t *testing.T) {
	h := newHarness(t)
	h.add("/c.mov", 3, 10)
	st := h.show(path("/c.mov", loops(2)))
	if st.Showing != ShowingClip || st.Path != "/c.mov" || st.Loop == nil || *st.Loop || st.Clip == nil ||
		st.Clip.Frames != 3 || st.Clip.Plays != 2 || st.Clip.Width != 32 || st.Clip.Height != 24 || st.Clip.FPS != 10 {
		t.Fatalf("show clip: %+v %+v", st, st.Clip)
	}
	ms := time.Millisecond
	for range 5 {
		h.step(100 * ms)
	}
	h.settle()
	mid := h.c.State()
	if mid.Clip.Shown != 6 || mid.Clip.Loops != 1 || mid.Clip.Late != 0 || mid.Clip.ElapsedMS != 500 {
		t.Errorf("after 500 ms: %+v", mid.Clip)
	}
	h.step(100 * ms) // the last frame's time is up
	h.rec.waitFor(t, 2)
	shots, _, _, _ := h.disp.get()
	want := []shot{{0, 0}, {100 * ms, 1}, {200 * ms, 2}, {300 * ms, 0}, {400 * ms, 1}, {500 * ms, 2}}
	if diff := cmp.Diff(shots, want); diff != "" {
		t.Errorf("frames drawn (-got +want)\n%s", diff)
	}
	wantEv := []event{
		{events.KindClipStarted, `{"path":"/c.mov","loop":false,"plays":2,"frames":3,"fps":10}`},
		{events.KindClipEnded, `{"path":"/c.mov","finished":true}`},
	}
	if diff := cmp.Diff(h.rec.happenings(), wantEv); diff != "" {
		t.Errorf("happenings (-got +want)\n%s", diff)
	}
	// What follows a clip that ends by itself: its last frame, as an image.
	if diff := cmp.Diff(h.c.State(), State{Powered: true, Backlight: 60, Showing: ShowingImage, Path: "/c.mov"}); diff != "" {
		t.Errorf("after the clip (-got +want)\n%s", diff)
	}
	if h.clk.Waiters() != 0 {
		t.Errorf("%d timers left armed", h.clk.Waiters())
	}
}

func TestLateFrames(t *testing.T) {
	h := newHarness(t)
	f := h.add("/slow.mov", 4, 10)
	f.cost = 150 * time.Millisecond // slower than the 100 ms a frame has
	h.show(path("/slow.mov", loop(false)))
	h.rec.waitFor(t, 2)
	shots, _, _, _ := h.disp.get()
	ms := time.Millisecond
	// Frame 0 is due at the show (0) and drawn once decoded (150 ms);
	// then each frame drawn is the one due when its decoding began: frame
	// 1 (due at 100 ms, decoding from 150), frame 3 (due at 300 ms when
	// frame 2's time was already past: 2 is dropped); at 450 ms the play
	// is over.
	want := []shot{{150 * ms, 0}, {300 * ms, 1}, {450 * ms, 3}}
	if diff := cmp.Diff(shots, want); diff != "" {
		t.Errorf("frames (-got +want)\n%s", diff)
	}
	if h.rec.happenings()[1].Data != `{"path":"/slow.mov","finished":true}` {
		t.Errorf("end: %v", h.rec.happenings())
	}
}

func TestLateCounted(t *testing.T) {
	h := newHarness(t)
	f := h.add("/slow.mov", 4, 10)
	f.cost = 150 * time.Millisecond
	h.show(path("/slow.mov", loop(true)))
	// Wait until frame 3 has been drawn, then read the counters.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := h.c.State()
		if st.Clip != nil && st.Clip.Shown >= 4 {
			if st.Clip.Late != st.Clip.Shown || st.Clip.Dropped == 0 {
				t.Errorf("late %d of %d shown, %d dropped; every frame is late, and some are dropped", st.Clip.Late, st.Clip.Shown, st.Clip.Dropped)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never drew 4 frames: %+v", h.c.State())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLoopForeverAndReplace(t *testing.T) {
	h := newHarness(t)
	h.add("/l.mov", 2, 20)
	st := h.show(path("/l.mov")) // neither loop nor loops: forever
	if st.Loop == nil || !*st.Loop || st.Clip.Plays != 0 {
		t.Fatalf("default plays: %+v", st)
	}
	for range 6 {
		h.step(50 * time.Millisecond)
	}
	h.settle()
	if cl := h.c.State().Clip; cl.Loops != 3 || cl.Shown != 7 {
		t.Errorf("after 300 ms: %+v", cl)
	}
	h.show(boardapi.ShowRequest{Colour: ptr("blue")})
	want := []event{
		{events.KindClipStarted, `{"path":"/l.mov","loop":true,"plays":0,"frames":2,"fps":20}`},
		{events.KindClipEnded, `{"path":"/l.mov","finished":false}`},
	}
	if diff := cmp.Diff(h.rec.happenings(), want); diff != "" {
		t.Errorf("happenings (-got +want)\n%s", diff)
	}
	h.c.Close()
	if h.closed != 1 {
		t.Errorf("clip closed %d times", h.closed)
	}
}

func TestClipReplacedByClip(t *testing.T) {
	h := newHarness(t)
	h.add("/a.mov", 2, 10)
	h.add("/b.mov", 2, 10)
	h.show(path("/a.mov"))
	h.show(path("/b.mov", loops(1)))
	h.c.Off()
	got := h.rec.happenings()
	want := []event{
		{events.KindClipStarted, `{"path":"/a.mov","loop":true,"plays":0,"frames":2,"fps":10}`},
		{events.KindClipEnded, `{"path":"/a.mov","finished":false}`},
		{events.KindClipStarted, `{"path":"/b.mov","loop":false,"plays":1,"frames":2,"fps":10}`},
		{events.KindClipEnded, `{"path":"/b.mov","finished":false}`},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("happenings (-got +want)\n%s", diff)
	}
}

func TestDecodeFailureStops(t *testing.T) {
	h := newHarness(t)
	f := h.add("/bad.mov", 3, 10)
	f.failAt = 1
	h.show(path("/bad.mov"))
	got := h.rec.waitFor(t, 2)
	if got[1].Data != `{"path":"/bad.mov","finished":false}` || h.c.State().Showing != ShowingNothing {
		t.Errorf("after a broken frame: %v %+v", got, h.c.State())
	}
}

func TestGuard(t *testing.T) {
	tests := []struct {
		release string
		stops   bool
	}{
		{"/clips/a.mov", true},
		{"/clips", true},
		{"/", true},
		{"/clips/a.mov2", false},
		{"/clip", false},
		{"/other.mov", false},
	}
	for _, tc := range tests {
		t.Run(tc.release, func(t *testing.T) {
			h := newHarness(t)
			h.add("/clips/a.mov", 2, 10)
			h.show(path("/clips/a.mov"))
			h.c.Release(tc.release)
			st := h.c.State()
			if stopped := st.Showing == ShowingNothing; stopped != tc.stops {
				t.Fatalf("release %s: %+v", tc.release, st)
			}
			if tc.stops {
				if hp := h.rec.happenings(); len(hp) != 2 || hp[1].Data != `{"path":"/clips/a.mov","finished":false}` {
					t.Errorf("happenings %v", hp)
				}
			}
		})
	}
	h := newHarness(t)
	h.add("/i.png", 1, 0)
	h.show(path("/i.png"))
	h.c.Release("/i.png")
	if st := h.c.State(); st.Showing != ShowingNothing || !st.Powered {
		t.Errorf("image after its file went: %+v", st)
	}
}

type fakeWatcher struct {
	h   *harness
	mu  sync.Mutex
	log []string
	// onFinish runs in Finished (may call the controller).
	onFinish func(id uint64)
}

func (w *fakeWatcher) Stopping(id uint64) {
	w.mu.Lock()
	w.log = append(w.log, fmt.Sprintf("stopping %d", id))
	w.mu.Unlock()
	w.h.rec.add("watch", "stopping")
}
func (w *fakeWatcher) Finished(id uint64) {
	w.mu.Lock()
	w.log = append(w.log, fmt.Sprintf("finished %d", id))
	w.mu.Unlock()
	w.h.rec.add("watch", "finished")
	if w.onFinish != nil {
		w.onFinish(id)
	}
}

func TestWatcherAndRestore(t *testing.T) {
	h := newHarness(t)
	h.add("/bg.mov", 2, 10)
	h.add("/fg.mov", 2, 10)
	w := &fakeWatcher{h: h}
	h.c.SetWatcher(w)
	h.show(path("/bg.mov", loop(true)))
	snap := h.c.Snapshot()
	p, err := h.c.Prepare(path("/fg.mov"), true)
	if err != nil || p.Kind() != ShowingClip || p.Plays() != 1 {
		t.Fatalf("prepare: %v %+v", err, p)
	}
	_, id, err := h.c.Present(p)
	if err != nil {
		t.Fatal(err)
	}
	w.onFinish = func(got uint64) {
		if got != id {
			t.Errorf("finished %d, want %d", got, id)
		}
		h.rec.add("scene_ended", "by clip")
		if err := h.c.Restore(snap); err != nil {
			t.Errorf("restore: %v", err)
		}
	}
	h.step(100 * time.Millisecond)
	h.step(100 * time.Millisecond)
	got := h.rec.waitFor(t, 10)
	want := []event{
		{"watch", `"stopping"`}, // the start-up nothing, replaced by bg
		{events.KindClipStarted, `{"path":"/bg.mov","loop":true,"plays":0,"frames":2,"fps":10}`},
		{"watch", `"stopping"`},
		{events.KindClipEnded, `{"path":"/bg.mov","finished":false}`},
		{events.KindClipStarted, `{"path":"/fg.mov","loop":false,"plays":1,"frames":2,"fps":10}`},
		{"watch", `"finished"`},
		{"scene_ended", `"by clip"`},
		{"watch", `"stopping"`},
		{events.KindClipEnded, `{"path":"/fg.mov","finished":true}`},
		{events.KindClipStarted, `{"path":"/bg.mov","loop":true,"plays":0,"frames":2,"fps":10}`},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("order (-got +want)\n%s", diff)
	}
	if st := h.c.State(); st.Showing != ShowingClip || st.Path != "/bg.mov" || !*st.Loop {
		t.Errorf("restored: %+v", st)
	}
}

func TestRestoreKinds(t *testing.T) {
	h := newHarness(t)
	h.add("/c.mov", 2, 10)
	for _, r := range []boardapi.ShowRequest{{Colour: ptr("#abcdef")}, {Calibration: ptr(true)}, path("/c.mov", loops(3))} {
		want := h.show(r)
		snap := h.c.Snapshot()
		h.c.Off()
		if err := h.c.Restore(snap); err != nil {
			t.Fatal(err)
		}
		got := h.c.State()
		if got.Clip != nil {
			got.Clip.Shown, want.Clip.Shown = 0, 0
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("restore of %+v (-got +want)\n%s", r, diff)
		}
	}
	off := h.c.Off()
	snap := h.c.Snapshot()
	h.show(boardapi.ShowRequest{Colour: ptr("red")})
	_ = h.c.Restore(snap)
	if diff := cmp.Diff(h.c.State(), off); diff != "" {
		t.Errorf("restore of asleep (-got +want)\n%s", diff)
	}
	// A clip's last frame comes back as that frame.
	h.show(path("/c.mov", loops(1)))
	h.step(100 * time.Millisecond)
	h.step(100 * time.Millisecond)
	h.rec.waitFor(t, 6)
	last := h.c.State()
	snap = h.c.Snapshot()
	h.c.Off()
	if err := h.c.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h.c.State(), last); diff != "" {
		t.Errorf("restore of a last frame (-got +want)\n%s", diff)
	}
	if _, _, _, c := h.disp.get(); c.R != 1 {
		t.Errorf("restored frame has red %d, want 1 (the last)", c.R)
	}
	// A file gone: nothing, and the reason.
	snap = h.c.Snapshot()
	h.mu.Lock()
	delete(h.clips, "/c.mov")
	h.mu.Unlock()
	if err := h.c.Restore(snap); !errors.Is(err, api.ErrNotFound) || h.c.State().Showing != ShowingNothing {
		t.Errorf("restore of a missing file: %v %+v", err, h.c.State())
	}
}

// TestRealMOV plays a clip made by media.WriteMOV through media's decoder.
func TestRealMOV(t *testing.T) {
	clk := clock.NewFake(t0)
	disp := &fakeDisplay{clk: clk}
	rec := newRecorder()
	var frames [][]byte
	for k := range 3 {
		m := image.NewRGBA(image.Rect(0, 0, 48, 32))
		for i := range m.Pix {
			m.Pix[i] = uint8(k * 100)
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b.Bytes())
	}
	var mov bytes.Buffer
	if err := media.WriteMOV(&mov, media.MOV{Frames: frames, Width: 48, Height: 32, Timescale: 600, Delta: 40}); err != nil {
		t.Fatal(err)
	}
	open := func(p string) (media.Clip, error) { return media.OpenBytes(mov.Bytes()) }
	c, err := New(Options{Clock: clk, Display: disp, Publisher: rec, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Show(path("/r.mov", loops(1)))
	if err != nil || st.Clip.FPS != 15 || st.Clip.Frames != 3 {
		t.Fatalf("%+v %v", st, err)
	}
	for range 3 {
		if !clk.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("no timer")
		}
		clk.Advance(time.Second / 15)
	}
	rec.waitFor(t, 2)
	shots, _, _, _ := disp.get()
	if len(shots) != 3 || shots[2].At != 2*(time.Second/15) || shots[2].Red < 190 {
		t.Errorf("shots %v", shots)
	}
}

// sharedMedia is the folder of real test media made by ffmpeg and
// jpegtran, beside the repository.
const sharedMedia = "../../../shared/media"

// oneFrameMOV wraps the shared set's baseline JPEG (made by ffmpeg, not by
// Go's encoder) as the only frame of a Motion-JPEG MOV, with the
// project's own MOV writer: 25 fps, so the frame lasts 40 ms.
func oneFrameMOV(t *testing.T) []byte {
	t.Helper()
	// The shared media are part of the suite's inputs wherever it runs:
	// without them the test fails rather than passing without testing.
	frame, err := os.ReadFile(filepath.Join(sharedMedia, "image-baseline.jpg"))
	if err != nil {
		t.Fatalf("shared media absent (%v); the suite reads them from ../shared/media beside the repository", err)
	}
	var mov bytes.Buffer
	if err := media.WriteMOV(&mov, media.MOV{Frames: [][]byte{frame}, Width: 240, Height: 240, Timescale: 25, Delta: 1}); err != nil {
		t.Fatal(err)
	}
	return mov.Bytes()
}

// TestOneFrameMOVIsAClip: a MOV holding a single Motion-JPEG frame is a
// clip like any other: shown as a clip with the clip's fields, playing its
// loops (each a 40 ms frame), or looping forever, with clip_started and
// clip_ended. It was shown as an image because it had one frame.
func TestOneFrameMOVIsAClip(t *testing.T) {
	data := oneFrameMOV(t)
	clk := clock.NewFake(t0)
	disp := &fakeDisplay{clk: clk}
	rec := newRecorder()
	open := func(p string) (media.Clip, error) { return media.OpenBytes(data) }
	c, err := New(Options{Clock: clk, Display: disp, Publisher: rec, Open: open, Backlight: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	p, err := c.Prepare(path("/one.mov"), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind() != ShowingClip || p.Plays() != 1 {
		t.Errorf("prepared as %s with %d plays, want a clip playing once", p.Kind(), p.Plays())
	}
	p.Discard()

	st, err := c.Show(path("/one.mov", loops(3)))
	if err != nil {
		t.Fatal(err)
	}
	f := false
	want := State{Powered: true, Backlight: 50, Showing: ShowingClip, Path: "/one.mov", Loop: &f,
		Clip: &Clip{Width: 240, Height: 240, Frames: 1, Plays: 3, FPS: 25}}
	if st.Clip != nil {
		st.Clip.Shown = 0 // the player may have drawn the frame already
	}
	if diff := cmp.Diff(st, want); diff != "" {
		t.Fatalf("show (-got +want)\n%s", diff)
	}
	for range 3 {
		if !clk.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("the player never armed its timer")
		}
		clk.Advance(40 * time.Millisecond)
	}
	got := rec.waitFor(t, 2)
	wantEv := []event{
		{events.KindClipStarted, `{"path":"/one.mov","loop":false,"plays":3,"frames":1,"fps":25}`},
		{events.KindClipEnded, `{"path":"/one.mov","finished":true}`},
	}
	if diff := cmp.Diff(got, wantEv); diff != "" {
		t.Errorf("happenings (-got +want)\n%s", diff)
	}
	shots, _, _, _ := disp.get()
	wantShots := []time.Duration{0, 40 * time.Millisecond, 80 * time.Millisecond}
	var at []time.Duration
	for _, s := range shots {
		at = append(at, s.At)
	}
	if diff := cmp.Diff(at, wantShots); diff != "" {
		t.Errorf("frames drawn at (-got +want)\n%s", diff)
	}
	// It ended by itself: its frame stays, and a snapshot of that comes
	// back as the frame, not as the clip playing again.
	after := c.State()
	if diff := cmp.Diff(after, State{Powered: true, Backlight: 50, Showing: ShowingImage, Path: "/one.mov"}); diff != "" {
		t.Errorf("after the plays (-got +want)\n%s", diff)
	}
	snap := c.Snapshot()
	c.Off()
	if err := c.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c.State(), after); diff != "" {
		t.Errorf("restored (-got +want)\n%s", diff)
	}

	// loop: true plays it forever.
	st, err = c.Show(path("/one.mov", loop(true)))
	if err != nil || st.Showing != ShowingClip || st.Loop == nil || !*st.Loop || st.Clip == nil || st.Clip.Plays != 0 {
		t.Fatalf("loop: %+v %v", st, err)
	}
	for range 5 {
		if !clk.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("the player never armed its timer")
		}
		clk.Advance(40 * time.Millisecond)
	}
	if !clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("the player stopped looping")
	}
	if cl := c.State().Clip; cl == nil || cl.Loops != 5 || cl.Shown != 6 {
		t.Errorf("after 200 ms of looping: %+v", cl)
	}
}
