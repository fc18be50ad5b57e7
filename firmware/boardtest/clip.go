package boardtest

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/holofleet/holofleet/firmware/media"
)

// Clip returns a Motion-JPEG MOV of n frames of w x h at 30 fps, each
// frame a different grey, made with the firmware's own writer: a clip any
// board plays, cheap to decode when small (tests that run many boards in
// one process use it so that the host's cores are not the limit).
func Clip(t testing.TB, n, w, h int) []byte {
	t.Helper()
	var frames [][]byte
	for k := range n {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		g := uint8(k * 255 / max(n-1, 1))
		for y := range h {
			for x := range w {
				m.SetRGBA(x, y, color.RGBA{g, g, 255 - g, 255})
			}
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
