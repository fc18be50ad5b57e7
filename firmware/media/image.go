package media

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/draw"
	"image/gif"
	"image/jpeg"
	"image/png"
	"time"
)

// probeImage checks a PNG, JPEG or GIF held in data from its headers
// alone, without decoding pixels: the format, dimensions within the
// screen, a JPEG coding the decoder takes, a GIF's block structure and
// frame delays. openImage decodes only what passes.
func probeImage(data []byte) (Info, error) {
	info := Info{Kind: KindImage, Size: int64(len(data)), Frames: 1}
	switch Sniff(data) {
	case FormatPNG:
		info.Format = FormatPNG
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return Info{}, refuse(ErrMalformed, "PNG: %v", err)
		}
		if err := checkDimensions(cfg.Width, cfg.Height); err != nil {
			return Info{}, err
		}
		info.Width, info.Height = cfg.Width, cfg.Height
	case FormatJPEG:
		info.Format = FormatJPEG
		h, err := checkJPEG(data)
		if err != nil {
			return Info{}, err
		}
		info.Width, info.Height = h.width, h.height
	case FormatGIF:
		w, h, frames, err := scanGIF(data)
		if err != nil {
			return Info{}, err
		}
		return gifInfo(data, w, h, frames), nil
	default:
		return Info{}, refuse(ErrFormat, "not a PNG, JPEG or GIF")
	}
	return info, nil
}

// openImage checks and decodes a PNG, JPEG or GIF held in data.
func openImage(data []byte) (Clip, error) {
	info, err := probeImage(data)
	if err != nil {
		return nil, err
	}
	var img image.Image
	switch info.Format {
	case FormatPNG:
		if img, err = png.Decode(bytes.NewReader(data)); err != nil {
			return nil, refuse(ErrMalformed, "PNG: %v", err)
		}
	case FormatJPEG:
		if img, err = jpeg.Decode(bytes.NewReader(data)); err != nil {
			return nil, refuse(ErrMalformed, "JPEG: %v", err)
		}
	case FormatGIF:
		return openGIF(data, info)
	}
	b := img.Bounds()
	info.Width, info.Height = b.Dx(), b.Dy()
	return &stillClip{info: info, img: img}, nil
}

// stillClip is an image as a one-frame clip.
type stillClip struct {
	info Info
	img  image.Image
}

func (c *stillClip) Info() Info              { return c.info }
func (c *stillClip) Frames() int             { return 1 }
func (c *stillClip) FPS() float64            { return 0 }
func (c *stillClip) Width() int              { return c.info.Width }
func (c *stillClip) Height() int             { return c.info.Height }
func (c *stillClip) Delay(int) time.Duration { return 0 }
func (c *stillClip) Close() error            { return nil }

func (c *stillClip) Frame(i int) (image.Image, error) {
	if i != 0 {
		return nil, fmt.Errorf("%w: %d of 1", ErrFrameIndex, i)
	}
	return c.img, nil
}

// gifFrame is what the GIF block scan learns of one frame.
type gifFrame struct {
	rect  image.Rectangle
	delay time.Duration
}

// scanGIF walks a GIF's blocks without decoding pixels. The layout:
// "GIF87a"/"GIF89a"; logical screen width u16, height u16 (little
// endian), flags (bit 7 global colour table, bits 0-2 its size as
// 2^(n+1) entries of 3 bytes), background, aspect; then blocks: 0x21
// extension (label, sub-blocks), 0x2C image (left, top, width, height
// u16, flags with a local table like the global one, LZW code size,
// sub-blocks), 0x3B trailer. A sub-block is a length byte then that many
// bytes; length 0 ends the list. The graphic control extension (label
// 0xF9) carries the next frame's delay in hundredths of a second.
func scanGIF(b []byte) (w, h int, frames []gifFrame, err error) {
	if len(b) < 13 {
		return 0, 0, nil, refuse(ErrMalformed, "GIF: header cut off")
	}
	w, h = int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:]))
	if err := checkDimensions(w, h); err != nil {
		return 0, 0, nil, err
	}
	i := 13
	if b[10]&0x80 != 0 {
		i += 3 << ((b[10] & 7) + 1)
	}
	skipSubBlocks := func() error {
		for {
			if i >= len(b) {
				return refuse(ErrMalformed, "GIF: cut off inside a block")
			}
			n := int(b[i])
			i++
			if n == 0 {
				return nil
			}
			i += n
		}
	}
	delay := time.Duration(0)
	pixels := 0
	for {
		if i >= len(b) {
			return 0, 0, nil, refuse(ErrMalformed, "GIF: cut off before its trailer")
		}
		switch b[i] {
		case 0x21:
			if i+2 > len(b) {
				return 0, 0, nil, refuse(ErrMalformed, "GIF: cut off in an extension")
			}
			if b[i+1] == 0xF9 && i+8 <= len(b) && b[i+2] == 4 {
				delay = time.Duration(binary.LittleEndian.Uint16(b[i+4:])) * 10 * time.Millisecond
			}
			i += 2
			if err := skipSubBlocks(); err != nil {
				return 0, 0, nil, err
			}
		case 0x2C:
			if i+10 > len(b) {
				return 0, 0, nil, refuse(ErrMalformed, "GIF: cut off in an image descriptor")
			}
			d := b[i+1:]
			left, top := int(binary.LittleEndian.Uint16(d[0:])), int(binary.LittleEndian.Uint16(d[2:]))
			fw, fh := int(binary.LittleEndian.Uint16(d[4:])), int(binary.LittleEndian.Uint16(d[6:]))
			r := image.Rect(left, top, left+fw, top+fh)
			if !r.In(image.Rect(0, 0, w, h)) {
				return 0, 0, nil, refuse(ErrMalformed, "GIF: frame %d at %v lies outside the %dx%d screen", len(frames), r, w, h)
			}
			pixels += fw * fh
			if pixels > MaxAnimationPixels {
				return 0, 0, nil, refuse(ErrLimit, "GIF: frames total over %d pixels", MaxAnimationPixels)
			}
			flags := d[8]
			i += 10
			if flags&0x80 != 0 {
				i += 3 << ((flags & 7) + 1)
			}
			i++ // LZW minimum code size
			if err := skipSubBlocks(); err != nil {
				return 0, 0, nil, err
			}
			if delay < MinGIFDelay {
				delay = DefaultGIFDelay
			}
			frames = append(frames, gifFrame{rect: r, delay: delay})
			delay = 0
		case 0x3B:
			if len(frames) == 0 {
				return 0, 0, nil, refuse(ErrMalformed, "GIF: no frames")
			}
			return w, h, frames, nil
		default:
			return 0, 0, nil, refuse(ErrMalformed, "GIF: unknown block 0x%02X at byte %d", b[i], i)
		}
	}
}

// gifInfo describes a GIF from its block scan: an image with one frame,
// an animation with more.
func gifInfo(data []byte, w, h int, frames []gifFrame) Info {
	info := Info{Kind: KindImage, Format: FormatGIF, Size: int64(len(data)), Width: w, Height: h, Frames: len(frames)}
	if len(frames) > 1 {
		info.Kind = KindAnimation
		var total time.Duration
		for _, f := range frames {
			total += f.delay
		}
		info.DurationMS = total.Milliseconds()
		info.FPS = roundFPS(float64(len(frames)) / total.Seconds())
	}
	return info
}

// openGIF decodes a GIF that probeImage described as info.
func openGIF(data []byte, info Info) (Clip, error) {
	_, _, frames, err := scanGIF(data)
	if err != nil {
		return nil, err
	}
	g, err := gif.DecodeAll(bytes.NewReader(data))
	if err != nil {
		return nil, refuse(ErrMalformed, "GIF: %v", err)
	}
	if len(g.Image) != len(frames) {
		return nil, refuse(ErrMalformed, "GIF: %d frames decoded, %d found", len(g.Image), len(frames))
	}
	return &animClip{info: info, g: g, frames: frames}, nil
}

// animClip plays a GIF: frames are drawn in order onto a canvas, honouring
// each frame's disposal; asking for an earlier frame replays from 0.
type animClip struct {
	info   Info
	g      *gif.GIF
	frames []gifFrame
	canvas *image.RGBA
	next   int         // frame the canvas is ready to draw
	saved  *image.RGBA // canvas before a frame disposed to "previous"
}

func (c *animClip) Info() Info   { return c.info }
func (c *animClip) Frames() int  { return len(c.frames) }
func (c *animClip) FPS() float64 { return c.info.FPS }
func (c *animClip) Width() int   { return c.info.Width }
func (c *animClip) Height() int  { return c.info.Height }
func (c *animClip) Close() error { return nil }

func (c *animClip) Delay(i int) time.Duration {
	if i < 0 || i >= len(c.frames) || len(c.frames) == 1 {
		return 0
	}
	return c.frames[i].delay
}

func (c *animClip) Frame(i int) (image.Image, error) {
	if i < 0 || i >= len(c.frames) {
		return nil, fmt.Errorf("%w: %d of %d", ErrFrameIndex, i, len(c.frames))
	}
	if c.canvas == nil || i < c.next {
		c.canvas = image.NewRGBA(image.Rect(0, 0, c.info.Width, c.info.Height))
		c.next = 0
	}
	var out *image.RGBA
	for ; c.next <= i; c.next++ {
		k := c.next
		disposal := byte(0)
		if k < len(c.g.Disposal) {
			disposal = c.g.Disposal[k]
		}
		if disposal == gif.DisposalPrevious {
			c.saved = cloneRGBA(c.canvas)
		}
		src := c.g.Image[k]
		draw.Draw(c.canvas, src.Bounds(), src, src.Bounds().Min, draw.Over)
		if k == i {
			out = cloneRGBA(c.canvas)
		}
		switch disposal {
		case gif.DisposalBackground:
			draw.Draw(c.canvas, src.Bounds(), image.Transparent, image.Point{}, draw.Src)
		case gif.DisposalPrevious:
			if c.saved != nil {
				c.canvas = c.saved
				c.saved = nil
			}
		}
	}
	return out, nil
}

func cloneRGBA(m *image.RGBA) *image.RGBA {
	out := &image.RGBA{Pix: append([]byte(nil), m.Pix...), Stride: m.Stride, Rect: m.Rect}
	return out
}
