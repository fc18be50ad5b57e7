package screen

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/media"
	"github.com/holofleet/holofleet/firmware/timesync"
)

// syncBoard is a screen on a board whose crystal runs ppm off the true
// time (the fake base clock), with its alignment to a gateway whose clock
// is the true time.
type syncBoard struct {
	t     *testing.T
	clk   clock.Clock
	bc    timesync.Clock
	al    *timesync.Aligner
	c     *Controller
	disp  *fakeDisplay
	clips int
	mu    sync.Mutex
}

func newSyncBoard(t *testing.T, base *clock.Fake, ppm float64, frames int, fps float64) *syncBoard {
	t.Helper()
	b := &syncBoard{t: t, clk: clock.Skewed(base, ppm), disp: &fakeDisplay{clk: base}}
	b.bc = timesync.New(b.clk, b.clk.Now())
	b.al = timesync.NewAligner(b.bc)
	c, err := New(Options{Clock: b.clk, Display: b.disp, Aligned: b.al,
		Open: func(p string) (media.Clip, error) {
			if p != "/c.mov" {
				return nil, api.Errorf(api.ErrNotFound, "%s", p)
			}
			return &fakeClipSized{&fakeClip{n: frames, fps: fps, w: 32, h: 24, closed: &b.clips, mu: &b.mu}}, nil
		},
		Start: func(r *http.Request) (time.Time, bool, error) {
			us, err := strconv.ParseInt(r.URL.Query().Get(boardapi.QueryFireAt), 10, 64)
			return b.bc.Time(us), err == nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	b.c = c
	t.Cleanup(c.Close)
	return b
}

// align tells the board the gateway's alignment as measured now, off by
// errUS: the gateway's time (the base's Unix µs) less the board's clock.
func (b *syncBoard) align(base clock.Clock, errUS int64) {
	b.al.Set(base.Now().UnixMicro()-b.bc.Micros()+errUS, 0)
}

// startAt shows the clip looping as a timed request would, the moment
// being the gateway's time at (fire_at on the board's clock, worked out
// from the board's alignment as the gateway does), through the route.
func (b *syncBoard) startAt(at time.Time) {
	b.t.Helper()
	e, ok := b.al.Epoch()
	if !ok {
		b.t.Fatal("not aligned")
	}
	fireAt := at.UnixMicro() - e
	r := httptest.NewRequest("POST", "/api/v1/screen/show?fire_at="+strconv.FormatInt(fireAt, 10), strings.NewReader(`{"path":"/c.mov","loop":true}`))
	ch, err := b.c.prepareShow(r)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, _, err := ch.Apply(); err != nil {
		b.t.Fatal(err)
	}
}

func (b *syncBoard) frame() int {
	if cl := b.c.State().Clip; cl != nil {
		return cl.Frame
	}
	return -1
}

// runTogether plays a 30 fps clip on two boards ppm fast and ppm slow
// for d of true time, started together by a timed show, the gateway
// aligning them every `every` (0: only before the start) with a
// measuring error of ±300 µs. It steps the true clock a frame at a time,
// waiting for both players to have drawn what was due, and returns the
// largest difference of their frame numbers and of each from the frame
// due by the true time.
func runTogether(t *testing.T, ppm float64, d, every time.Duration) (spread, offTruth int) {
	base := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	boards := []*syncBoard{newSyncBoard(t, base, ppm, 60, 30), newSyncBoard(t, base, -ppm, 60, 30)}
	for i, b := range boards {
		b.align(base, []int64{300, -300}[i])
	}
	// A show timed 0.5 s ahead: each board takes it then (its fire
	// scheduler); the moment on the true clock is start.
	start := base.Now().Add(500 * time.Millisecond)
	base.Advance(500 * time.Millisecond)
	for _, b := range boards {
		b.startAt(start)
	}
	frame := time.Second / 30
	lastAlign := base.Now()
	for base.Now().Sub(start) < d {
		if !base.WaitForWaiters(len(boards), 30*time.Second) {
			t.Fatal("the players never armed their timers")
		}
		if every > 0 && base.Since(lastAlign) >= every {
			lastAlign = base.Now()
			for i, b := range boards {
				b.align(base, []int64{300, -300}[i])
			}
		}
		base.Advance(frame / 3)
		if !base.WaitForWaiters(len(boards), 30*time.Second) {
			t.Fatal("the players never armed their timers again")
		}
		truth := int(base.Since(start) / frame)
		f0, f1 := boards[0].frame(), boards[1].frame()
		spread = max(spread, abs(f0-f1))
		offTruth = max(offTruth, abs(f0-truth), abs(f1-truth))
	}
	return spread, offTruth
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestClipsStayTogether: two boards whose crystals are off in opposite
// directions, playing the same clip started by one timed show, stay
// within one frame of each other (and of the true time) while the gateway
// aligns them; left to their own clocks they drift two frames apart in
// the same time (the control: what the alignment buys). make soak runs
// the case, ±50 ppm for ten minutes aligned every 30 s as an
// RS485 line does; make test the same drift ten times faster: ±500 ppm
// for one minute, aligned every 3 s (1.5 ms of drift between alignments
// either way).
func TestClipsStayTogether(t *testing.T) {
	ppm := testlevel.Pick(500.0, 50.0)
	d := testlevel.Pick(time.Minute, 10*time.Minute)
	every := testlevel.Pick(3*time.Second, 30*time.Second)
	spread, off := runTogether(t, ppm, d, every)
	if spread > 1 || off > 1 {
		t.Errorf("±%v ppm aligned every %v: frames up to %d apart, up to %d from the true time after %v; want at most 1", ppm, every, spread, off, d)
	}
	spread, _ = runTogether(t, ppm, d, 0)
	if spread < 2 {
		t.Errorf("left to their own clocks: frames only %d apart after %v at ±%v ppm; the control shows nothing", spread, d, ppm)
	}
}

// TestClipHoldsAndDrops: the frame on the panel follows the aligned
// clock: an alignment that puts the clock on drops the frames skipped, one
// that puts it back holds the frame until its time comes again.
func TestClipHoldsAndDrops(t *testing.T) {
	base := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	b := newSyncBoard(t, base, 0, 10, 10) // 100 ms frames
	b.align(base, 0)
	b.startAt(base.Now())
	step := func(d time.Duration) {
		t.Helper()
		if !base.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("the player never armed its timer")
		}
		base.Advance(d)
		if !base.WaitForWaiters(1, 30*time.Second) {
			t.Fatal("the player never armed its timer again")
		}
	}
	step(100 * time.Millisecond)
	st := b.c.State().Clip
	if st.Frame != 1 || !st.Synced || st.StartUS == nil {
		t.Fatalf("after 100 ms: %+v", st)
	}
	// The gateway finds the board's clock 250 ms behind. The player
	// wakes for frame 2 at 200 ms of its clock: the aligned position is
	// then 450 ms, so frame 4 is drawn and frames 2 and 3 are dropped.
	b.align(base, 250_000)
	step(100 * time.Millisecond)
	st = b.c.State().Clip
	if st.Frame != 4 || st.Dropped != 2 || st.Held != 0 {
		t.Fatalf("after the clock was put on 250 ms: %+v, want frame 4, 2 dropped", st)
	}
	// Put back 250 ms (true 200 ms: aligned 200 ms): frame 4 stays on the
	// panel until the aligned clock reaches frame 5's time, 500 ms.
	b.align(base, 0)
	step(50 * time.Millisecond) // the wake planned for frame 5 finds 250 ms
	if st := b.c.State().Clip; st.Frame != 4 || st.Held != 0 {
		t.Fatalf("after the clock was put back: %+v, want frame 4 held", st)
	}
	step(250 * time.Millisecond) // true and aligned 500 ms: frame 5
	st = b.c.State().Clip
	if st.Frame != 5 || st.Held != 1 || st.Dropped != 2 || st.Shown != 4 {
		t.Fatalf("at 500 ms: %+v, want frame 5 after one hold", st)
	}
}
