package screen

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/hal/sim"
	"github.com/holofleet/holofleet/firmware/media"
)

// benchClip is a 240x240 Motion-JPEG clip of n frames at 30 fps with
// detail in every frame (a gradient that moves), so decoding is real work.
func benchClip(b *testing.B, n int) []byte {
	b.Helper()
	var frames [][]byte
	for k := range n {
		m := image.NewRGBA(image.Rect(0, 0, 240, 240))
		for y := range 240 {
			for x := range 240 {
				m.SetRGBA(x, y, color.RGBA{uint8(x + 3*k), uint8(y*2 + k), uint8((x ^ y) + 5*k), 255})
			}
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 85}); err != nil {
			b.Fatal(err)
		}
		frames = append(frames, buf.Bytes())
	}
	var mov bytes.Buffer
	if err := media.WriteMOV(&mov, media.MOV{Frames: frames, Width: 240, Height: 240, Timescale: 30000, Delta: 1000}); err != nil {
		b.Fatal(err)
	}
	return mov.Bytes()
}

// BenchmarkPlayback30fps20s plays a 240x240 30 fps clip for 20 s on the
// real clock into the simulated panel and reports the frames shown and
// the late ones (the target on an idle machine is 0 late).
func BenchmarkPlayback30fps20s(b *testing.B) {
	data := benchClip(b, 60)
	const plays = 10 // 60 frames x 10 = 600 frames, 20 s
	b.ReportAllocs()
	var last Clip
	for b.Loop() {
		w := &benchWatcher{done: make(chan Clip, 1)}
		c, err := New(Options{Clock: clock.Real, Display: sim.NewDisplay(),
			Open: func(string) (media.Clip, error) { return media.OpenBytes(data) }})
		if err != nil {
			b.Fatal(err)
		}
		w.c = c
		c.SetWatcher(w)
		n, p := plays, "/bench.mov"
		if _, err := c.Show(boardapi.ShowRequest{Path: &p, Loops: &n}); err != nil {
			b.Fatal(err)
		}
		last = <-w.done
		c.Close()
	}
	b.ReportMetric(float64(last.Shown), "frames-shown")
	b.ReportMetric(float64(last.Late), "late-frames")
}

// benchWatcher hands over the clip's counters when it has played.
type benchWatcher struct {
	c    *Controller
	done chan Clip
}

func (w *benchWatcher) Stopping(uint64) {}
func (w *benchWatcher) Finished(uint64) {
	if st := w.c.State(); st.Clip != nil {
		w.done <- *st.Clip
	}
}
