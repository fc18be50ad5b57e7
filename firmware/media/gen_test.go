package media

import (
	"bytes"
	"errors"
	"flag"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the generated test media in testdata/")

// testImage is a w x h picture with a colour per quadrant, shifted by k.
func testImage(w, h, k int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(x*255/w + k*40), uint8(y*255/h + k*20), uint8(k * 60), 255})
		}
	}
	return m
}

func stdJPEG(m image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 80}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func flat(k int) func(mx, my int) (uint8, uint8, uint8) {
	return func(mx, my int) (uint8, uint8, uint8) {
		return uint8(40 + 30*k + 10*mx), uint8(100 + 10*my), uint8(160 - 20*k)
	}
}

func movBytes(m MOV) []byte {
	var b bytes.Buffer
	if err := WriteMOV(&b, m); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func frames(n int, f func(k int) []byte) [][]byte {
	out := make([][]byte, n)
	for k := range out {
		out[k] = f(k)
	}
	return out
}

// generated is the project's own test media: each file's bytes and what
// probing it must give (an Info, or the sentinel it is refused with).
type generated struct {
	name string
	data func() []byte
	want Info
	err  error
}

func generatedMedia() []generated {
	pngOf := func(m image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			panic(err)
		}
		return b.Bytes()
	}
	gifOf := func(delays []int, disposal []byte, n int) []byte {
		g := &gif.GIF{Delay: delays, Disposal: disposal}
		for k := range n {
			p := image.NewPaletted(image.Rect(0, 0, 32, 24), palette.Plan9)
			for y := range 24 {
				for x := range 32 {
					p.SetColorIndex(x, y, uint8((x/8+y/8+k*3)%256))
				}
			}
			g.Image = append(g.Image, p)
		}
		var b bytes.Buffer
		if err := gif.EncodeAll(&b, g); err != nil {
			panic(err)
		}
		return b.Bytes()
	}
	clip16 := func() []byte {
		return movBytes(MOV{Frames: frames(3, func(k int) []byte { return stdJPEG(testImage(16, 16, k)) }), Width: 16, Height: 16})
	}
	return []generated{
		{name: "clip-16x16-420.mov", data: clip16,
			want: Info{Kind: KindClip, Format: FormatMOV, Codec: "jpeg", Width: 16, Height: 16, Frames: 3, FPS: 30, DurationMS: 100}},
		{name: "clip-48x32-422-2997-moovfirst-co64.mov", data: func() []byte {
			return movBytes(MOV{Frames: frames(5, func(k int) []byte { return blockJPEG(48, 32, 2, 1, flat(k)) }), Width: 48, Height: 32,
				Timescale: 30000, Delta: 1001, MoovFirst: true, Co64: true, SamplesPerChunk: 2})
		}, want: Info{Kind: KindClip, Format: FormatMOV, Codec: "jpeg", Width: 48, Height: 32, Frames: 5, FPS: 29.97, DurationMS: 166}},
		{name: "clip-24x24-444-audio.mov", data: func() []byte {
			return movBytes(MOV{Frames: frames(4, func(k int) []byte { return blockJPEG(24, 24, 1, 1, flat(k)) }), Width: 24, Height: 24,
				Timescale: 12, Delta: 1, Audio: true})
		}, want: Info{Kind: KindClip, Format: FormatMOV, Codec: "jpeg", Width: 24, Height: 24, Frames: 4, FPS: 12, DurationMS: 333}},
		{name: "clip-16x16-440-mjpa-vfr.mov", data: func() []byte {
			return movBytes(MOV{Frames: frames(3, func(k int) []byte { return blockJPEG(16, 16, 1, 2, flat(k)) }), Width: 16, Height: 16,
				Codec: "mjpa", Timescale: 1000, Deltas: []uint32{100, 100, 300}})
		}, want: Info{Kind: KindClip, Format: FormatMOV, Codec: "mjpa", Width: 16, Height: 16, Frames: 3, FPS: 6, DurationMS: 500}},
		{name: "clip-240-one-frame.mov", data: func() []byte {
			return movBytes(MOV{Frames: [][]byte{stdJPEG(testImage(240, 240, 1))}, Width: 240, Height: 240, Timescale: 25, Delta: 1})
		}, want: Info{Kind: KindClip, Format: FormatMOV, Codec: "jpeg", Width: 240, Height: 240, Frames: 1, FPS: 25, DurationMS: 40}},
		{name: "refused-mjpb.mov", data: func() []byte {
			return movBytes(MOV{Frames: frames(2, func(k int) []byte { return stdJPEG(testImage(16, 16, k)) }), Width: 16, Height: 16, Codec: "mjpb"})
		}, err: ErrCodec},
		{name: "refused-241x240.mov", data: func() []byte {
			return movBytes(MOV{Frames: [][]byte{blockJPEG(241, 240, 1, 1, flat(0))}, Width: 241, Height: 240})
		}, err: ErrDimensions},
		{name: "refused-truncated.mov", data: func() []byte { b := clip16(); return b[:len(b)-40] }, err: ErrMalformed},
		{name: "refused-progressive-frame.mov", data: func() []byte {
			f := blockJPEG(16, 16, 1, 1, flat(0))
			f[bytes.Index(f, []byte{0xFF, 0xC0})+1] = 0xC2
			return movBytes(MOV{Frames: [][]byte{f}, Width: 16, Height: 16})
		}, err: ErrCodec},
		{name: "image-32x24.png", data: func() []byte { return pngOf(testImage(32, 24, 2)) },
			want: Info{Kind: KindImage, Format: FormatPNG, Width: 32, Height: 24, Frames: 1}},
		{name: "image-32x24.jpg", data: func() []byte { return stdJPEG(testImage(32, 24, 2)) },
			want: Info{Kind: KindImage, Format: FormatJPEG, Width: 32, Height: 24, Frames: 1}},
		{name: "image-32x24.gif", data: func() []byte { return gifOf([]int{0}, nil, 1) },
			want: Info{Kind: KindImage, Format: FormatGIF, Width: 32, Height: 24, Frames: 1}},
		{name: "anim-32x24.gif", data: func() []byte {
			return gifOf([]int{5, 10, 0}, []byte{gif.DisposalNone, gif.DisposalBackground, gif.DisposalPrevious}, 3)
		}, want: Info{Kind: KindAnimation, Format: FormatGIF, Width: 32, Height: 24, Frames: 3, FPS: 12, DurationMS: 250}},
		{name: "refused-241x10.png", data: func() []byte { return pngOf(testImage(241, 10, 0)) }, err: ErrDimensions},
		{name: "refused-text.txt", data: func() []byte { return []byte("hello, board\n") }, err: ErrFormat},
	}
}

// TestGeneratedMedia checks the files in testdata are what the generator
// makes (go test -run TestGeneratedMedia -update rewrites them), then
// probes and decodes each.
func TestGeneratedMedia(t *testing.T) {
	for _, g := range generatedMedia() {
		t.Run(g.name, func(t *testing.T) {
			data := g.data()
			path := filepath.Join("testdata", g.name)
			if *update {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			disk, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(disk, data) {
				t.Fatalf("testdata/%s differs from the generator's output (run with -update)", g.name)
			}
			c, err := OpenBytes(data)
			if g.err != nil {
				if !errors.Is(err, g.err) || !errors.Is(err, ErrNotPlayable) {
					t.Fatalf("OpenBytes: %v, want %v", err, g.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenBytes: %v", err)
			}
			defer c.Close()
			g.want.Size = int64(len(data))
			if diff := cmp.Diff(c.Info(), g.want); diff != "" {
				t.Errorf("info (-got +want):\n%s", diff)
			}
			for i := range c.Frames() {
				img, err := c.Frame(i)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if b := img.Bounds(); b.Dx() != g.want.Width || b.Dy() != g.want.Height {
					t.Fatalf("frame %d bounds %v", i, b)
				}
			}
			if _, err := c.Frame(c.Frames()); !errors.Is(err, ErrFrameIndex) {
				t.Errorf("Frame(past end): %v", err)
			}
		})
	}
}
