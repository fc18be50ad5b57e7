package media

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sharedMedia is the folder of real test media made by ffmpeg and
// jpegtran, beside the repository.
const sharedMedia = "../../../shared/media"

func TestSharedMedia(t *testing.T) {
	if _, err := os.Stat(sharedMedia); err != nil {
		t.Fatalf("shared media absent: %v (the suite reads them from ../shared/media beside the repository)", err)
	}
	playable := []struct {
		file string
		want Info
	}{
		{"clip-240-30fps.mov", Info{Kind: KindClip, Format: FormatMOV, Codec: "jpeg", Width: 240, Height: 240, Frames: 60, FPS: 30, DurationMS: 2000}},
		{"clip-160x120-12fps.mov", Info{Kind: KindClip, Format: FormatMOV, Codec: "jpeg", Width: 160, Height: 120, Frames: 36, FPS: 12, DurationMS: 3000}},
		{"image-240.png", Info{Kind: KindImage, Format: FormatPNG, Width: 240, Height: 240, Frames: 1}},
		{"image-baseline.jpg", Info{Kind: KindImage, Format: FormatJPEG, Width: 240, Height: 240, Frames: 1}},
		{"anim-120.gif", Info{Kind: KindAnimation, Format: FormatGIF, Width: 120, Height: 120, Frames: 0, FPS: 10}},
	}
	for _, tc := range playable {
		t.Run(tc.file, func(t *testing.T) {
			name := filepath.Join(sharedMedia, tc.file)
			c, err := OpenFile(name)
			if err != nil {
				t.Fatalf("OpenFile: %v", err)
			}
			defer c.Close()
			got := c.Info()
			st, _ := os.Stat(name)
			tc.want.Size = st.Size()
			if tc.want.Kind == KindAnimation {
				tc.want.Frames = got.Frames
				tc.want.DurationMS = got.DurationMS
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("info (-got +want):\n%s", diff)
			}
			for i := range c.Frames() {
				img, err := c.Frame(i)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if b := img.Bounds(); b.Dx() != got.Width || b.Dy() != got.Height {
					t.Fatalf("frame %d is %v", i, b)
				}
			}
		})
	}
	refused := []struct {
		file string
		want error
	}{
		{"too-large-320x240.mov", ErrDimensions},
		{"not-mjpeg-mpeg4.mov", ErrCodec},
		{"image-progressive.jpg", ErrCodec},
	}
	for _, tc := range refused {
		t.Run(tc.file, func(t *testing.T) {
			_, err := ProbeFile(filepath.Join(sharedMedia, tc.file))
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrNotPlayable) {
				t.Fatalf("ProbeFile: %v, want %v", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}
}
