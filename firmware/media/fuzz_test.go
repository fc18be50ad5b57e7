package media

import (
	"bytes"
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
