package media

import (
	"bytes"
	"errors"
	"image"
	"image/color/palette"
	"image/gif"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// seedFiles adds every generated and shared test file to f's corpus.
func seedFiles(f *testing.F) {
	for _, dir := range []string{"testdata", sharedMedia} {
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil && len(b) < 32<<10 {
				f.Add(b)
			}
		}
	}
}

// FuzzOpen feeds any bytes to the checks: they never panic, and what
// they accept decodes every frame within the limits.
func FuzzOpen(f *testing.F) {
	seedFiles(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := OpenBytes(data)
		if err != nil {
			return
		}
		defer c.Close()
		info := c.Info()
		if info.Width > MaxWidth || info.Height > MaxHeight || info.Frames < 1 || info.Frames > MaxFrames {
			t.Fatalf("accepted %+v", info)
		}
		for i := range min(c.Frames(), 2) {
			if img, err := c.Frame(i); err == nil {
				if b := img.Bounds(); b.Dx() > MaxWidth || b.Dy() > MaxHeight {
					t.Fatalf("frame %d is %v", i, b)
				}
			}
			_ = c.Delay(i)
		}
	})
}

// smallMOVs are clips of tiny frames in every layout the writer makes:
// the seeds of the fast MOV targets (a few hundred bytes each, so the
// fuzzer spends its time in the parser, not in copying).
func smallMOVs() [][]byte {
	tiny := func(k int) []byte { return blockJPEG(8, 8, 1, 1, flat(k)) }
	var out [][]byte
	for _, m := range []MOV{
		{Frames: frames(2, tiny), Width: 8, Height: 8},
		{Frames: frames(3, tiny), Width: 8, Height: 8, Timescale: 30000, Delta: 1001, MoovFirst: true, Co64: true, SamplesPerChunk: 2},
		{Frames: frames(2, tiny), Width: 8, Height: 8, Codec: "mjpa", Timescale: 1000, Deltas: []uint32{100, 300}, Audio: true},
		{Frames: frames(1, tiny), Width: 8, Height: 8, Timescale: 25, Delta: 1},
		{Frames: frames(1, tiny), Width: 8, Height: 8, Codec: "mjpb"},
	} {
		out = append(out, movBytes(m))
	}
	return out
}

// FuzzParseMOV feeds any bytes to the MOV atom parser alone (no frame is
// decoded past the first one's header): it never panics, and what it
// accepts places every frame inside the file, within the limits, with a
// duration.
func FuzzParseMOV(f *testing.F) {
	for _, b := range smallMOVs() {
		f.Add(b)
	}
	for _, tc := range []string{"0000000c 66726565 00000000", "00000001 6d646174 0000000000000012 0000", "00000000 6d6f6f76 01020304"} {
		f.Add(unhex(tc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMOV(byteReaderAt(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrNotPlayable) {
				t.Fatalf("refusal %v does not wrap ErrNotPlayable", err)
			}
			return
		}
		n := len(m.sizes)
		if n < 1 || n > MaxFrames || len(m.offsets) != n || m.duration == 0 || m.timescale == 0 ||
			m.width < 1 || m.width > MaxWidth || m.height < 1 || m.height > MaxHeight {
			t.Fatalf("accepted %d frames, %dx%d, duration %d/%d", n, m.width, m.height, m.duration, m.timescale)
		}
		for i := range n {
			if m.offsets[i] < 0 || m.offsets[i]+int64(m.sizes[i]) > int64(len(data)) {
				t.Fatalf("frame %d at %d+%d lies outside %d bytes", i, m.offsets[i], m.sizes[i], len(data))
			}
			if m.delay(i) < 0 {
				t.Fatalf("frame %d has delay %v", i, m.delay(i))
			}
		}
		_ = m.info()
	})
}

// FuzzImageHeader feeds any bytes to the header checks of PNG, JPEG and
// GIF files (no pixel is decoded): they never panic, and what they accept
// fits the screen.
func FuzzImageHeader(f *testing.F) {
	// Tiny pictures of each format (tens to hundreds of bytes): the
	// fuzzer's time goes to the header checks, and minimising what it
	// finds is quick.
	tinyGIF := func(n int) []byte {
		g := &gif.GIF{}
		for k := range n {
			p := image.NewPaletted(image.Rect(0, 0, 4, 3), palette.Plan9)
			p.SetColorIndex(k%4, 1, uint8(k+1))
			g.Image, g.Delay, g.Disposal = append(g.Image, p), append(g.Delay, 5*k), append(g.Disposal, byte(k%4))
		}
		var b bytes.Buffer
		if err := gif.EncodeAll(&b, g); err != nil {
			panic(err)
		}
		return b.Bytes()
	}
	tinyPNG := func(w, h int) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, testImage(w, h, 1)); err != nil {
			panic(err)
		}
		return b.Bytes()
	}
	f.Add(tinyGIF(1))
	f.Add(tinyGIF(3))
	f.Add(tinyPNG(4, 3))
	f.Add(tinyPNG(241, 1))
	f.Add(blockJPEG(8, 8, 2, 2, flat(0)))
	f.Add(unhex("ffd8 ffc2 0011 08 0010 0010 03 011100 021100 031100"))
	f.Add([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00\x3b"))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := probeImage(data)
		if err != nil {
			if !errors.Is(err, ErrNotPlayable) {
				t.Fatalf("refusal %v does not wrap ErrNotPlayable", err)
			}
			return
		}
		if info.Width < 1 || info.Width > MaxWidth || info.Height < 1 || info.Height > MaxHeight || info.Frames < 1 ||
			(info.Kind == KindAnimation) != (info.Frames > 1) {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// FuzzDecodeFrame feeds any bytes to the decoder of one Motion-JPEG
// sample, seeded with tiny frames of every sampling: it never panics, and
// what it decodes has the size its header gave, within the screen.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range [][2]int{{1, 1}, {2, 1}, {2, 2}, {1, 2}} {
		f.Add(blockJPEG(16, 16, s[0], s[1], flat(1)))
	}
	f.Add(stdJPEG(testImage(8, 8, 1)))
	f.Add(unhex("ffd8 ffc2 0011 08 0010 0010 03 011100 021100 031100"))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := decodeFrame(data)
		if err != nil {
			if !errors.Is(err, ErrNotPlayable) {
				t.Fatalf("refusal %v does not wrap ErrNotPlayable", err)
			}
			return
		}
		h, err := scanJPEG(data)
		if b := img.Bounds(); err != nil || b.Dx() != h.width || b.Dy() != h.height || b.Dx() > MaxWidth || b.Dy() > MaxHeight {
			t.Fatalf("decoded %v, header %+v (%v)", b, h, err)
		}
	})
}

// FuzzScanJPEG checks the JPEG header scan never panics.
func FuzzScanJPEG(f *testing.F) {
	for _, s := range [][]byte{blockJPEG(16, 8, 2, 1, flat(1)), unhex("ffd8 ffc2 0011 08 0010 0010 03 011100 021100 031100")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := checkJPEG(data); err == nil && (h.width > MaxWidth || h.height > MaxHeight) {
			t.Fatalf("accepted %+v", h)
		}
	})
}

// FuzzMOVRoundTrip writes clips of fuzzed shape with WriteMOV and checks
// the parser reads back the same frames, in order, at the same rate.
func FuzzMOVRoundTrip(f *testing.F) {
	f.Add(uint8(3), uint32(600), uint32(20), uint8(1), false, false, false)
	f.Add(uint8(5), uint32(30000), uint32(1001), uint8(2), true, true, true)
	f.Add(uint8(1), uint32(1), uint32(1), uint8(7), true, false, true)
	f.Fuzz(func(t *testing.T, n uint8, scale, delta uint32, perChunk uint8, moovFirst, co64, audio bool) {
		if n == 0 || n > 20 || scale == 0 || delta == 0 || delta > 1<<20 {
			return
		}
		fr := frames(int(n), func(k int) []byte { return blockJPEG(8, 8, 1, 1, flat(k)) })
		var b bytes.Buffer
		m := MOV{Frames: fr, Width: 8, Height: 8, Timescale: scale, Delta: delta, MoovFirst: moovFirst,
			Co64: co64, SamplesPerChunk: int(perChunk), Audio: audio}
		if err := WriteMOV(&b, m); err != nil {
			t.Fatal(err)
		}
		data := b.Bytes()
		mv, err := parseMOV(byteReaderAt(data), int64(len(data)))
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		for i := range fr {
			got, err := mv.sample(byteReaderAt(data), i)
			if err != nil || !bytes.Equal(got, fr[i]) {
				t.Fatalf("frame %d differs (%v)", i, err)
			}
		}
		if mv.duration != uint64(n)*uint64(delta) || mv.timescale != scale {
			t.Fatalf("timing %d/%d", mv.duration, mv.timescale)
		}
	})
}
