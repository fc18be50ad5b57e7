package sim

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"sync"
	"sync/atomic"

	"github.com/holofleet/holofleet/firmware/hal"
)

// TouchBuffer is how many touch events wait in [Display.Events] before new
// ones are dropped (a reader that does not keep up loses touches, as a real
// touch controller's FIFO does).
const TouchBuffer = 16

// Display is the simulated round panel with its backlight and touch layer.
// It implements hal.Display and hal.Touch. The zero value is not usable;
// call NewDisplay.
type Display struct {
	mu sync.Mutex
	// fb is the framebuffer once a picture was shown; while the panel
	// shows one colour (at start, after Fill) it is nil and fill holds the
	// colour, so an idle simulated board does not carry 225 KiB of pixels.
	fb        *image.RGBA
	fill      color.RGBA
	powered   bool
	backlight int
	shown     int
	touches   chan hal.TouchEvent
	unhandled atomic.Int64 // touches injected and not yet handled
	dropped   int
}

var (
	_ hal.Display = (*Display)(nil)
	_ hal.Touch   = (*Display)(nil)
)

// NewDisplay returns a powered panel at full backlight showing black.
func NewDisplay() *Display {
	return &Display{
		powered:   true,
		backlight: 100,
		touches:   make(chan hal.TouchEvent, TouchBuffer),
	}
}

// Show copies img into the framebuffer. img must be ScreenWidth x
// ScreenHeight (its origin may be anywhere).
func (d *Display) Show(img *image.RGBA) error {
	if img == nil || img.Rect.Dx() != hal.ScreenWidth || img.Rect.Dy() != hal.ScreenHeight {
		return fmt.Errorf("show: want a %dx%d image: %w", hal.ScreenWidth, hal.ScreenHeight, ErrSize)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fb == nil {
		d.fb = image.NewRGBA(image.Rect(0, 0, hal.ScreenWidth, hal.ScreenHeight))
	}
	draw.Draw(d.fb, d.fb.Rect, img, img.Rect.Min, draw.Src)
	d.shown++
	return nil
}

// pixels returns the framebuffer's contents (a fresh image when the panel
// holds one colour). d.mu is held.
func (d *Display) pixels() *image.RGBA {
	if d.fb != nil {
		return d.fb
	}
	img := image.NewRGBA(image.Rect(0, 0, hal.ScreenWidth, hal.ScreenHeight))
	if d.fill != (color.RGBA{}) {
		draw.Draw(img, img.Rect, image.NewUniform(d.fill), image.Point{}, draw.Src)
	}
	return img
}

// Fill paints the whole framebuffer with c.
func (d *Display) Fill(c color.RGBA) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fb, d.fill = nil, c
	d.shown++
	return nil
}

// SetPower wakes or sleeps the panel; the framebuffer is kept.
func (d *Display) SetPower(on bool) error {
	d.mu.Lock()
	d.powered = on
	d.mu.Unlock()
	return nil
}

// SetBacklight sets the backlight in percent, 0-100.
func (d *Display) SetBacklight(percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("backlight %d%%: %w", percent, ErrRange)
	}
	d.mu.Lock()
	d.backlight = percent
	d.mu.Unlock()
	return nil
}

// Powered reports whether the panel is awake.
func (d *Display) Powered() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.powered
}

// Backlight reports the backlight percent.
func (d *Display) Backlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.backlight
}

// Shown counts the pictures shown (Show and Fill calls).
func (d *Display) Shown() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.shown
}

// Framebuffer returns a copy of the raw framebuffer, without mask,
// backlight or power applied.
func (d *Display) Framebuffer() *image.RGBA {
	d.mu.Lock()
	defer d.mu.Unlock()
	fb := d.pixels()
	out := image.NewRGBA(fb.Rect)
	copy(out.Pix, fb.Pix)
	return out
}

// Visible reports whether pixel (x, y) lies on the round glass: its centre
// is inside the circle inscribed in the square panel.
func Visible(x, y int) bool {
	const r = hal.ScreenWidth / 2
	// Work in half pixels so the test is exact in integers: the centre
	// of pixel x is x+0.5, the circle's centre is r.
	dx := 2*x + 1 - 2*r
	dy := 2*y + 1 - 2*r
	return dx*dx+dy*dy <= 4*r*r
}

// Snapshot returns what the glass shows: the framebuffer scaled by the
// backlight, black outside the round mask, all black while asleep.
func (d *Display) Snapshot() *image.RGBA {
	d.mu.Lock()
	defer d.mu.Unlock()
	fb := d.pixels()
	out := image.NewRGBA(fb.Rect)
	level := d.backlight
	if !d.powered {
		level = 0
	}
	for y := range hal.ScreenHeight {
		for x := range hal.ScreenWidth {
			i := out.PixOffset(x, y)
			if level == 0 || !Visible(x, y) {
				out.Pix[i+3] = 0xff
				continue
			}
			for k := range 3 {
				out.Pix[i+k] = uint8((int(fb.Pix[i+k])*level + 50) / 100)
			}
			out.Pix[i+3] = 0xff
		}
	}
	return out
}

// Events returns the touch events, as hal.Touch requires.
func (d *Display) Events() <-chan hal.TouchEvent { return d.touches }

// Touch injects a touch down or up at (x, y), as the touch controller
// would report it. Coordinates are clamped to the panel. It never blocks:
// when TouchBuffer events wait unread, the new one is dropped and
// counted (see Dropped).
func (d *Display) Touch(down bool, x, y int) {
	ev := hal.TouchEvent{Down: down, X: clamp(x, 0, hal.ScreenWidth-1), Y: clamp(y, 0, hal.ScreenHeight-1)}
	d.unhandled.Add(1)
	select {
	case d.touches <- ev:
	default:
		d.unhandled.Add(-1)
		d.mu.Lock()
		d.dropped++
		d.mu.Unlock()
	}
}

// Handled is told by the firmware's touch handler that it is done with
// one event it read (it acted on it, or chose not to).
func (d *Display) Handled() { d.unhandled.Add(-1) }

// Pending counts touch events not yet handled: waiting unread, or read
// and still being handled. A reader that never calls Handled leaves
// every event it read counted here.
func (d *Display) Pending() int { return int(d.unhandled.Load()) }

// Dropped counts touch events lost because nobody read them.
func (d *Display) Dropped() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

func clamp(v, lo, hi int) int {
	return max(lo, min(hi, v))
}
