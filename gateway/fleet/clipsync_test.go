package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
)

// clipFrame is one frame of the test clip (30 fps).
const clipFrame = time.Second / 30

// clipPPM skews the rig's crystals ±50 ppm, alternately, so that on each
// line and on the LAN half the boards run fast and half slow.
func clipPPM(k int) float64 { return []float64{50, -50}[k%2] }

// clipRig is 8 boards on a line and 8 on the LAN with skewed crystals,
// clip (30 fps) on every board's volume, every board aligned.
func clipRig(t testing.TB, clip []byte, lanEvery, lineEvery time.Duration) *rig {
	t.Helper()
	r := newRig(t, rigOptions{Lines: 1, PerLine: 8, LAN: 8, ClockPPM: clipPPM, ClockEvery: lanEvery, LineClockEvery: lineEvery})
	if b, ok := t.(*testing.B); ok {
		b.StopTimer()
	}
	for _, b := range r.boards {
		req, _ := http.NewRequest(http.MethodPut, b.proc.URL+"/api/v1/fs/file?path=/clip.mov&overwrite=true", bytes.NewReader(clip))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("upload to %s: %s", b.id, resp.Status)
		}
	}
	// Every board is told its alignment by its driver (PUT /time) once
	// its clock is measured: the LAN at its first rounds, a line at its
	// first polls. A show waits, as an operator would, until every
	// board's clock is known within 2 ms (the fleet's board view) or, on
	// a loaded host where some samples stay blurred, for at most 90 s.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var not, blurred []string
		for _, b := range r.boards {
			v, err := r.f.Board(b.id)
			switch {
			case !b.proc.Aligned():
				not = append(not, fmt.Sprintf("%s (lan %v)", b.id, b.lan))
			case err != nil || v.Clock == nil || time.Duration(v.Clock.UncertaintyUS)*time.Microsecond > fleet.DefaultFireUncertainty:
				blurred = append(blurred, fmt.Sprintf("%s (lan %v)", b.id, b.lan))
			}
		}
		if len(not) == 0 && len(blurred) == 0 {
			break
		}
		if time.Now().After(deadline) {
			if len(not) > 0 {
				t.Fatalf("%d of %d boards never told their alignment: %v", len(not), len(r.boards), not)
			}
			t.Logf("%d boards' clocks still known only beyond %v: %v", len(blurred), fleet.DefaultFireUncertainty, blurred)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// startClip shows the clip looping on the rig's group at a moment 500 ms
// ahead and waits until every board plays it; it checks each board was
// fired as its transport is (a group frame on the line, fire_at on the
// LAN) and returns the moment.
func startClip(t testing.TB, r *rig) time.Time {
	t.Helper()
	return fireClip(t, r, fleet.Action{Kind: fleet.ActionScreenShow, Body: []byte(`{"path":"/clip.mov","loop":true}`)})
}

// fireClip is startClip for any action that starts the clip (a, timed
// 500 ms ahead).
func fireClip(t testing.TB, r *rig, a fleet.Action) time.Time {
	t.Helper()
	at := time.Now().Add(500 * time.Millisecond)
	a.At = at
	res, err := r.f.Do(context.Background(), fleet.Selector{Groups: []int{rigGroup}}, a)
	if err != nil {
		t.Fatal(err)
	}
	how := map[bool]string{false: fleet.FireLine, true: fleet.FireBoard}
	byID := map[string]fleet.Result{}
	for _, res := range res {
		byID[res.Board] = res
	}
	for _, b := range r.boards {
		if res := byID[b.id]; res.Error != "" || res.Fire != how[b.lan] {
			t.Errorf("board %s (lan %v): %+v, want fired by %s", b.id, b.lan, res, how[b.lan])
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, b := range r.boards {
		for {
			if tl, ok := b.proc.ClipTimeline(); ok {
				if !tl.Synced {
					t.Fatalf("board %s (lan %v) plays the clip on its own clock", b.id, b.lan)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("board %s (lan %v) never played the clip", b.id, b.lan)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return at
}

// clipSample is the rig's boards read one after the other, in-process:
// the spread of the frame numbers on their panels, of their timelines'
// positions (the aligned clocks the players follow) and of the same
// positions on the boards' own clocks (what the clips would show without
// alignment). Positions are brought to one instant by the real time
// between the reads (each read is bracketed by the real clock within
// readSlack, else read again; the clocks' rates are within 50 ppm of it,
// a few µs over a read). Frame numbers cannot be brought to one instant,
// so a sample whose reads took longer than sampleSlack in all (the
// sampler was kept off the processor) has valid false and its frames
// count for nothing.
type clipSample struct {
	frames        int
	timeline, own time.Duration
	valid         bool
	// lineErr and lanErr are the largest distance of a line's and a LAN
	// board's timeline from the true one (the real clock since the moment).
	lineErr, lanErr time.Duration
}

const (
	readSlack   = time.Millisecond
	sampleSlack = 5 * time.Millisecond
)

func sampleClip(t testing.TB, r *rig, start time.Time) clipSample {
	t.Helper()
	var s clipSample
	var frames []int
	var pos, own []time.Duration
	var first time.Time
	began := time.Now()
	for _, b := range r.boards {
		for try := 0; ; try++ {
			t0 := time.Now()
			tl, ok := b.proc.ClipTimeline()
			t1 := time.Now()
			if !ok {
				t.Fatalf("board %s (lan %v) stopped playing", b.id, b.lan)
			}
			if t1.Sub(t0) > readSlack && try < 100 {
				continue
			}
			at := t0.Add(t1.Sub(t0) / 2)
			if first.IsZero() {
				first = at
			}
			frames = append(frames, tl.Frame)
			if e := (tl.Position - at.Sub(start)).Abs(); b.lan {
				s.lanErr = max(s.lanErr, e)
			} else {
				s.lineErr = max(s.lineErr, e)
			}
			pos = append(pos, tl.Position-at.Sub(first))
			own = append(own, tl.OwnPosition-at.Sub(first))
			break
		}
	}
	s.frames = slices.Max(frames) - slices.Min(frames)
	s.timeline, s.own = slices.Max(pos)-slices.Min(pos), slices.Max(own)-slices.Min(own)
	s.valid = time.Since(began) <= sampleSlack
	return s
}

// clipStats gathers samples.
type clipStats struct {
	n, valid, within int
	worst            clipSample
	spreads          []int
}

// p99 is the 99th percentile of the valid samples' frame spreads.
func (st *clipStats) p99() int {
	if len(st.spreads) == 0 {
		return 0
	}
	v := slices.Sorted(slices.Values(st.spreads))
	return v[min(len(v)-1, len(v)*99/100)]
}

func (st *clipStats) add(s clipSample) {
	st.n++
	st.worst.timeline = max(st.worst.timeline, s.timeline)
	if !s.valid {
		return
	}
	st.valid++
	st.spreads = append(st.spreads, s.frames)
	if s.frames <= 1 {
		st.within++
	}
	st.worst.frames = max(st.worst.frames, s.frames)
}

// TestClipSync: a looping 30 fps clip started by a timed fire on 8 line
// and 8 LAN boards whose crystals are ±50 ppm off starts on the same
// moment of the gateway's clock everywhere and stays together: every
// board's timeline (its aligned clock) within one frame of every other's,
// and the frames on the panels within a bound that only a broken path
// misses (a loaded machine may keep a player off the processor past a
// frame; BenchmarkClipSync measures the frame spread). make test watches
// 5 s; make soak ten minutes, with the drivers' default alignment
// periods, and writes the panels' figures to the soak report
// (clip-sync.txt): whether panels keep up is the host's, as the
// benchmark's wake-up figure shows, so it is reported, not asserted.
func TestClipSync(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	lanEvery, lineEvery := 200*time.Millisecond, time.Second
	if testlevel.Soak() {
		lanEvery, lineEvery = lan.DefaultClockEvery, 0 // the drivers' defaults
	}
	r := clipRig(t, smallClip(t), lanEvery, lineEvery)
	at := startClip(t, r)
	checkClipStarts(t, r, at)
	watch := testlevel.Pick(5*time.Second, 10*time.Minute)
	var st clipStats
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(97 * time.Millisecond) {
		s := sampleClip(t, r, at)
		st.add(s)
		if s.timeline >= clipFrame {
			t.Errorf("after %v the boards' timelines spread over %v (a frame is %v)", time.Since(at).Round(time.Millisecond), s.timeline, clipFrame)
		}
	}
	// Each panel follows its timeline: never ahead of the frame due (a
	// player kept off the processor, as 16 boards decoding 30 fps under
	// the race detector on two shared cores are, is behind and catches up
	// by dropping frames; how far behind is BenchmarkClipSync's figure).
	for _, b := range r.boards {
		if tl, _ := b.proc.ClipTimeline(); tl.Frame > tl.FrameDue {
			t.Errorf("board %s (lan %v): panel on frame %d, ahead of the %d due", b.id, b.lan, tl.Frame, tl.FrameDue)
		}
	}
	last := sampleClip(t, r, at)
	report := fmt.Sprintf("%v: 8 line + 8 LAN boards at ±50 ppm, %d samples (%d read within %v): panels within one frame in %d, worst %d frames; timelines' spread worst %v, at the end (%v) %v, own clocks %v",
		watch, st.n, st.valid, sampleSlack, st.within, st.worst.frames, st.worst.timeline, time.Since(at).Round(time.Second), last.timeline, last.own)
	t.Log(report)
	if testlevel.Soak() {
		if dir := os.Getenv("HOLO_SOAK_REPORT"); dir != "" {
			if f, err := os.OpenFile(filepath.Join(dir, "clip-sync.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
				_, _ = f.WriteString("TestClipSync " + report + "\n")
				f.Close()
			}
		}
	}
}

// checkClipStarts checks the boards' clips started on one timeline at the
// moment at: the line's boards, which took one group frame naming the
// clip's start on the gateway's time, on the very same microsecond of
// their aligned clocks; every board within a frame of the others and of
// the moment.
func checkClipStarts(t *testing.T, r *rig, at time.Time) {
	t.Helper()
	var starts []int64
	line := map[int64]bool{}
	for _, b := range r.boards {
		tl, _ := b.proc.ClipTimeline()
		starts = append(starts, tl.StartUS)
		if !b.lan {
			line[tl.StartUS] = true
		}
	}
	// The LAN boards start at fire_at, the line's when their group frame
	// ends at the moment (plus their reading it): all within a frame of
	// the moment, by far.
	if d := time.Duration(slices.Max(starts)-slices.Min(starts)) * time.Microsecond; d > clipFrame || len(line) != 1 {
		for k, b := range r.boards {
			t.Logf("board %s (lan %v): started %v from the moment", b.id, b.lan, time.Duration(starts[k]-at.UnixMicro())*time.Microsecond)
		}
		t.Fatalf("the clip's start on the boards' aligned clocks spreads over %v; the line's boards started at %d different µs", d, len(line))
	}
	if d := time.Duration(slices.Min(starts)-at.UnixMicro()) * time.Microsecond; d < -clipFrame || d > clipFrame {
		t.Errorf("the clip started %v from the moment on the gateway's clock", d)
	}
}

// TestSceneClipSync: a saved scene whose screen plays the clip, applied by
// its slot on 8 line and 8 LAN boards at ±50 ppm by one timed fire (the
// line's group gets the native SCENE frame, the LAN boards fire_at),
// starts the clip on the same moment of the gateway's time everywhere,
// as a timed show of the file does, and the boards' timelines stay
// within a frame of each other. Without the clip start the scene's clip
// began when each board presented it, after opening its file.
func TestSceneClipSync(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	r := clipRig(t, smallClip(t), 200*time.Millisecond, time.Second)
	for _, b := range r.boards {
		req, _ := http.NewRequest(http.MethodPut, b.proc.URL+"/api/v1/scenes/scene?name=clip",
			strings.NewReader(`{"slot":1,"screen":{"path":"/clip.mov","loop":true}}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("saving the scene on %s: %s", b.id, resp.Status)
		}
	}
	at := fireClip(t, r, fleet.Action{Kind: fleet.ActionSceneApply, Body: []byte(`{"slot":1}`)})
	checkClipStarts(t, r, at)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(97 * time.Millisecond) {
		if s := sampleClip(t, r, at); s.timeline >= clipFrame {
			t.Errorf("after %v the boards' timelines spread over %v (a frame is %v)", time.Since(at).Round(time.Millisecond), s.timeline, clipFrame)
		}
	}
}

// BenchmarkClipSync is issue 30's clip sync figure: 16 boards (8 on a
// line, 8 on the LAN), crystals ±50 ppm off, the drivers' default
// alignment periods (LAN 5-30 s, line 30 s), playing the same 30 fps clip
// started by one timed fire: 64x48 (the figure: the boards' decoding is
// out of the way) and the shared 240x240 clip (16 boards in one process
// decoding 480 frames a second of it need more than the host's two
// cores: the panels then lag by what the host cannot do, while the
// timelines stay together). Each op reads the 16 boards' frame numbers
// at one instant (in-process, microseconds apart); the loop then goes on
// sampling every 100 ms until 60 s after the start. Reported:
//
//	frame-spread-max        the largest difference of the frame numbers on
//	                        the panels over every sample (target: 1)
//	frame-spread-at-60s     the same at the end
//	within-1-frame-%        the samples with a spread of at most 1
//	timeline-spread-max-µs  the largest spread of the boards' aligned
//	                        timelines (the clocks the players follow)
//	own-clock-spread-at-60s-µs   the spread the boards' own clocks give
//	                        after 60 s: what the clips would show without
//	                        alignment, measured in the same run
//	frame-spread-p99        the 99th percentile of the samples' spreads
//	frame-spread-vs-1-ratio frame-spread-max against the target (met at 1
//	                        or less)
//	host-wakeup-p99-ms      in the same run, how late a goroutine waiting
//	                        for a deadline 10 ms ahead woke (p99), and
//	                        host-wakeup-p99-vs-frame-ratio against a frame:
//	                        a player woken that late draws its frame that
//	                        late, which no clock alignment can hide
//
//	line-timeline-err-at-60s-µs, lan-timeline-err-at-60s-µs   the largest
//	                        distance of a line's (a LAN) board's timeline
//	                        from the true one (the real clock since the
//	                        fire's moment) at the end
//
// A sample counts only when the 16 reads took at most 5 ms (the sampler
// itself was not kept off the processor); samples is how many did.
func BenchmarkClipSync(b *testing.B) {
	b.Run("64x48", func(b *testing.B) { benchClipSync(b, smallClip(b)) })
	b.Run("240x240", func(b *testing.B) {
		clip, err := os.ReadFile("../../../shared/media/clip-240-30fps.mov")
		if err != nil {
			b.Skip("test media not found:", err)
		}
		benchClipSync(b, clip)
	})
}

// smallClip is 2 s of 64x48 at 30 fps: 16 boards in one process decode
// 480 frames a second, which at 240x240 (some 2-6 ms a frame here) is
// more than two cores do.
func smallClip(t testing.TB) []byte { return boardtest.Clip(t, 60, 64, 48) }

func benchClipSync(b *testing.B, clip []byte) {
	r := clipRig(b, clip, lan.DefaultClockEvery, 0)
	at := startClip(b, r)
	const run = 60 * time.Second
	// The host's wake-up lateness in the same run: a goroutine waiting
	// for a deadline 10 ms ahead, as a player waits for its next frame.
	// A player woken that late shows its frame that late.
	var wakeMu sync.Mutex
	var wakes []time.Duration
	stop := make(chan struct{})
	wakeDone := make(chan struct{})
	go func() {
		defer close(wakeDone)
		for {
			deadline := time.Now().Add(10 * time.Millisecond)
			select {
			case <-stop:
				return
			case <-time.After(time.Until(deadline)):
			}
			wakeMu.Lock()
			wakes = append(wakes, time.Since(deadline))
			wakeMu.Unlock()
		}
	}()
	var st clipStats
	b.StartTimer()
	for b.Loop() {
		st.add(sampleClip(b, r, at))
	}
	b.StopTimer()
	for time.Since(at) < run {
		time.Sleep(100 * time.Millisecond)
		st.add(sampleClip(b, r, at))
	}
	last := sampleClip(b, r, at)
	for !last.valid {
		last = sampleClip(b, r, at)
	}
	close(stop)
	<-wakeDone
	wakeMu.Lock()
	b.ReportMetric(float64(pct(wakes, 0.99))/float64(time.Millisecond), "host-wakeup-p99-ms")
	b.ReportMetric(float64(pct(wakes, 0.99))/float64(clipFrame), "host-wakeup-p99-vs-frame-ratio")
	wakeMu.Unlock()
	b.ReportMetric(float64(st.p99()), "frame-spread-p99")
	b.ReportMetric(float64(last.lineErr)/float64(time.Microsecond), "line-timeline-err-at-60s-µs")
	b.ReportMetric(float64(last.lanErr)/float64(time.Microsecond), "lan-timeline-err-at-60s-µs")
	b.ReportMetric(float64(st.worst.frames), "frame-spread-max")
	b.ReportMetric(float64(last.frames), "frame-spread-at-60s")
	b.ReportMetric(100*float64(st.within)/float64(max(st.valid, 1)), "within-1-frame-%")
	b.ReportMetric(float64(st.worst.timeline)/float64(time.Microsecond), "timeline-spread-max-µs")
	b.ReportMetric(float64(last.timeline)/float64(time.Microsecond), "timeline-spread-at-60s-µs")
	b.ReportMetric(float64(last.own)/float64(time.Microsecond), "own-clock-spread-at-60s-µs")
	b.ReportMetric(float64(st.worst.frames), "frame-spread-vs-1-ratio")
	b.ReportMetric(float64(st.valid), "samples")
}
