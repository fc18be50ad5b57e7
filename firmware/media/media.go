package media

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"math"
	"os"
	"time"
)

// Limits of what the board plays.
const (
	// MaxWidth and MaxHeight bound clips and images: the screen's size.
	MaxWidth  = 240
	MaxHeight = 240
	// MaxMoov bounds the "moov" atom, which the parser reads whole.
	MaxMoov = 4 << 20
	// MaxFrames bounds the samples of a clip (about 55 minutes at 30 fps).
	MaxFrames = 100_000
	// MaxSample bounds one JPEG sample: far above any 240x240 picture.
	MaxSample = 1 << 20
	// MaxAnimationPixels bounds the pixels of all frames of a GIF
	// together (one byte each once decoded).
	MaxAnimationPixels = 8 << 20
	// MaxImageFile bounds the size of a PNG, JPEG or GIF file read whole.
	MaxImageFile = 8 << 20
	// MinGIFDelay is the shortest frame delay honoured; shorter ones
	// (including 0) play as DefaultGIFDelay.
	MinGIFDelay     = 20 * time.Millisecond
	DefaultGIFDelay = 100 * time.Millisecond
)

// Errors. Every reason a file is refused wraps ErrNotPlayable; the more
// precise sentinels below wrap it too, so callers test either.
var (
	// ErrNotPlayable means the screen cannot show the file.
	ErrNotPlayable = errors.New("media: not playable")
	// ErrFormat means the file is none of MOV, PNG, JPEG or GIF.
	ErrFormat = fmt.Errorf("%w: unknown format", ErrNotPlayable)
	// ErrCodec means a MOV whose video is not Motion-JPEG, or a JPEG
	// coding the decoder does not take (progressive, lossless, arithmetic).
	ErrCodec = fmt.Errorf("%w: unsupported coding", ErrNotPlayable)
	// ErrDimensions means wider or taller than 240 pixels, or empty.
	ErrDimensions = fmt.Errorf("%w: bad dimensions", ErrNotPlayable)
	// ErrMalformed means a truncated or inconsistent file.
	ErrMalformed = fmt.Errorf("%w: malformed", ErrNotPlayable)
	// ErrLimit means the file is over one of the package's caps.
	ErrLimit = fmt.Errorf("%w: over a limit", ErrNotPlayable)
	// ErrFrameIndex means Frame was asked for a frame the clip lacks.
	ErrFrameIndex = errors.New("media: frame index out of range")
)

// refuse builds an error wrapping sentinel whose text is only reason.
func refuse(sentinel error, format string, args ...any) error {
	return &reasonError{sentinel: sentinel, reason: fmt.Sprintf(format, args...)}
}

type reasonError struct {
	sentinel error
	reason   string
}

func (e *reasonError) Error() string { return e.reason }
func (e *reasonError) Unwrap() error { return e.sentinel }

// Kind says how the screen shows a file.
type Kind string

// The kinds of playable file.
const (
	KindClip      Kind = "clip"
	KindImage     Kind = "image"
	KindAnimation Kind = "animation"
)

// Format is the container or image format found in the file's first bytes.
type Format string

// The formats the package recognises.
const (
	FormatMOV  Format = "mov"
	FormatPNG  Format = "png"
	FormatJPEG Format = "jpeg"
	FormatGIF  Format = "gif"
)

// Info describes a playable file.
type Info struct {
	Kind   Kind   `json:"kind" doc:"clip, image or animation"`
	Format Format `json:"format" doc:"mov, png, jpeg or gif"`
	// Codec is the MOV sample description (jpeg or mjpa); empty otherwise.
	Codec  string `json:"codec,omitempty"`
	Size   int64  `json:"size" doc:"file size in bytes"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Frames int    `json:"frames" doc:"1 for an image"`
	// FPS is the average frame rate, rounded to 3 decimals; 0 for images.
	FPS        float64 `json:"fps" doc:"average frame rate; 0 for an image"`
	DurationMS int64   `json:"duration_ms" doc:"time to play once; 0 for an image"`
}

// Clip is a decodable playable file: a MOV clip, an animated GIF, or an
// image as a one-frame clip. A Clip reads its file lazily and is not safe
// for concurrent use; Close releases the file.
type Clip interface {
	Info() Info
	// Frames is the number of frames, at least 1.
	Frames() int
	// FPS is the average frame rate (0 for an image).
	FPS() float64
	Width() int
	Height() int
	// Frame decodes frame i (0-based). The image is the caller's.
	Frame(i int) (image.Image, error)
	// Delay is how long frame i stays on screen (0 for an image).
	Delay(i int) time.Duration
	Close() error
}

// Sniff names the format from a file's first bytes ("" when unknown).
func Sniff(head []byte) Format {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return FormatPNG
	case bytes.HasPrefix(head, []byte{0xFF, 0xD8, 0xFF}):
		return FormatJPEG
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return FormatGIF
	case len(head) >= 8 && topLevelAtoms[string(head[4:8])]:
		return FormatMOV
	}
	return ""
}

// ProbeFile checks the file at name (an operating-system path) and
// describes it. Refusals wrap ErrNotPlayable; a missing file gives an
// error matching fs.ErrNotExist.
func ProbeFile(name string) (Info, error) {
	c, err := OpenFile(name)
	if err != nil {
		return Info{}, err
	}
	defer c.Close()
	return c.Info(), nil
}

// OpenFile checks the file at name and opens it for decoding.
func OpenFile(name string) (Clip, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("media: %s: %w", name, errIsDir)
	}
	c, err := Open(f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

var errIsDir = &fs.PathError{Op: "open", Err: errors.New("is a directory")}

// Open checks r (size bytes) and returns it as a Clip. The Clip owns r
// and closes it; on error r is not closed.
func Open(r io.ReaderAt, size int64) (Clip, error) {
	head := make([]byte, 16)
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	switch Sniff(head) {
	case FormatMOV:
		m, err := parseMOV(r, size)
		if err != nil {
			return nil, err
		}
		return newMovieClip(r, m), nil
	case FormatPNG, FormatJPEG, FormatGIF:
		if size > MaxImageFile {
			return nil, refuse(ErrLimit, "image file of %d bytes is over the %d-byte limit", size, MaxImageFile)
		}
		data := make([]byte, size)
		if _, err := r.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("media: reading image: %w", err)
		}
		c, err := openImage(data)
		if err != nil {
			return nil, err
		}
		if cl, ok := r.(io.Closer); ok {
			_ = cl.Close()
		}
		return c, nil
	}
	return nil, refuse(ErrFormat, "not a MOV clip, PNG, JPEG or GIF")
}

// OpenBytes is Open for a file held in memory.
func OpenBytes(data []byte) (Clip, error) { return Open(bytes.NewReader(data), int64(len(data))) }

func checkDimensions(w, h int) error {
	if w <= 0 || h <= 0 {
		return refuse(ErrDimensions, "empty picture (%dx%d)", w, h)
	}
	if w > MaxWidth || h > MaxHeight {
		return refuse(ErrDimensions, "%dx%d is larger than the %dx%d screen", w, h, MaxWidth, MaxHeight)
	}
	return nil
}

func roundFPS(f float64) float64 { return math.Round(f*1000) / 1000 }
