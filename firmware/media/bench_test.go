package media

import (
	"path/filepath"
	"testing"
)

// BenchmarkFrame240 decodes one 240x240 Motion-JPEG frame from the file:
// the cost the screen pays per frame (33 ms is the budget at 30 fps).
func BenchmarkFrame240(b *testing.B) {
	for _, name := range []string{"testdata/clip-240-one-frame.mov", filepath.Join(sharedMedia, "clip-240-30fps.mov")} {
		b.Run(filepath.Base(name), func(b *testing.B) {
			c, err := OpenFile(name)
			if err != nil {
				b.Skip(err)
			}
			defer c.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := c.Frame(i % c.Frames()); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkProbe checks a clip without decoding its frames past the
// first, as GET /media does for every file.
func BenchmarkProbe(b *testing.B) {
	name := filepath.Join(sharedMedia, "clip-240-30fps.mov")
	if _, err := ProbeFile(name); err != nil {
		b.Skip(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ProbeFile(name); err != nil {
			b.Fatal(err)
		}
	}
}
