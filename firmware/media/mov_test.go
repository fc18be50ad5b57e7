package media

import (
	"bytes"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func TestReadAtomHeader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want atom
		err  error
	}{
		{"plain", "0000000c 66726565 00000000", atom{typ: "free", off: 8, size: 4}, nil},
		{"64-bit size", "00000001 6d646174 0000000000000012 0000", atom{typ: "mdat", off: 16, size: 2}, nil},
		{"to the end", "00000000 6d646174 01020304", atom{typ: "mdat", off: 8, size: 4}, nil},
		{"past the end", "00000010 6d6f6f76 0000", atom{}, ErrMalformed},
		{"smaller than header", "00000004 6d6f6f76", atom{}, ErrMalformed},
		{"64-bit smaller than header", "00000001 6d646174 0000000000000008", atom{}, ErrMalformed},
		{"64-bit huge", "00000001 6d646174 ffffffffffffffff", atom{}, ErrMalformed},
		{"stray bytes", "000000", atom{}, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := unhex(tc.in)
			got, err := readAtomHeader(byteReaderAt(b), 0, int64(len(b)))
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(got, tc.want, cmp.AllowUnexported(atom{})); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

func TestScanJPEG(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want jpegHeader
		err  error
	}{
		{"4:4:4", blockJPEG(16, 8, 1, 1, flat(0)), jpegHeader{16, 8, 3, "4:4:4"}, nil},
		{"4:2:2", blockJPEG(16, 8, 2, 1, flat(0)), jpegHeader{16, 8, 3, "4:2:2"}, nil},
		{"4:2:0", blockJPEG(16, 16, 2, 2, flat(0)), jpegHeader{16, 16, 3, "4:2:0"}, nil},
		{"4:4:0", blockJPEG(8, 16, 1, 2, flat(0)), jpegHeader{8, 16, 3, "4:4:0"}, nil},
		{"no SOI", unhex("ffd9"), jpegHeader{}, ErrMalformed},
		{"EOI first", unhex("ffd8 ffd9"), jpegHeader{}, ErrMalformed},
		{"progressive", unhex("ffd8 ffc2 0011 08 0010 0010 03 011100 021100 031100"), jpegHeader{}, ErrCodec},
		{"lossless", unhex("ffd8 ffc3 0011 08 0010 0010 03 011100 021100 031100"), jpegHeader{}, ErrCodec},
		{"arithmetic", unhex("ffd8 ffc9 0011 08 0010 0010 03 011100 021100 031100"), jpegHeader{}, ErrCodec},
		{"12-bit", unhex("ffd8 ffc1 0011 0c 0010 0010 03 011100 021100 031100 ffda"), jpegHeader{}, ErrCodec},
		{"too wide", unhex("ffd8 ffc0 0011 08 0010 0100 03 011100 021100 031100 ffda 0002"), jpegHeader{256, 16, 3, "4:4:4"}, ErrDimensions},
		{"segment past end", unhex("ffd8 ffe0 0100 00"), jpegHeader{}, ErrMalformed},
		{"scan before frame", unhex("ffd8 ffda 0002"), jpegHeader{}, ErrMalformed},
		{"two components", unhex("ffd8 ffc0 000e 08 0010 0010 02 011100 021100 ffda"), jpegHeader{16, 16, 2, ""}, ErrCodec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scanJPEG(tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(got, tc.want, cmp.AllowUnexported(jpegHeader{})); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

// TestFrameContents checks each frame is read from its own offset (chunks
// of two samples, moov first) by the colour it decodes to.
func TestFrameContents(t *testing.T) {
	data, err := os.ReadFile("testdata/clip-48x32-422-2997-moovfirst-co64.mov")
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for k := range c.Frames() {
		img, err := c.Frame(k)
		if err != nil {
			t.Fatal(err)
		}
		y, cb, cr := flat(k)(0, 0)
		got := color.YCbCrModel.Convert(img.At(1, 1)).(color.YCbCr)
		if d := int(got.Y) - int(y); d < -2 || d > 2 || absDiff(got.Cb, cb) > 2 || absDiff(got.Cr, cr) > 2 {
			t.Errorf("frame %d pixel %v, want Y=%d Cb=%d Cr=%d", k, got, y, cb, cr)
		}
		if d := c.Delay(k); d != 1001*time.Second/30000 {
			t.Errorf("frame %d delay %v", k, d)
		}
	}
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

func TestDelays(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []time.Duration
	}{
		{"clip-16x16-440-mjpa-vfr.mov", []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}},
		{"anim-32x24.gif", []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}},
		{"image-32x24.png", []time.Duration{0}},
	} {
		c, err := OpenFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var got []time.Duration
		for i := range c.Frames() {
			got = append(got, c.Delay(i))
		}
		c.Close()
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s delays (-got +want):\n%s", tc.file, diff)
		}
	}
}

func TestAnimationReplay(t *testing.T) {
	c, err := OpenFile("testdata/anim-32x24.gif")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var first [][]byte
	for i := range c.Frames() {
		img, err := c.Frame(i)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, img.(*image.RGBA).Pix)
	}
	for i := c.Frames() - 1; i >= 0; i-- {
		img, _ := c.Frame(i)
		if !bytes.Equal(img.(*image.RGBA).Pix, first[i]) {
			t.Errorf("frame %d differs when asked again", i)
		}
	}
}

func TestOpenFileErrors(t *testing.T) {
	if _, err := OpenFile("testdata/nope.mov"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := OpenFile("testdata"); err == nil || errors.Is(err, ErrNotPlayable) {
		t.Errorf("directory: %v", err)
	}
}
