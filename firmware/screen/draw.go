package screen

import (
	"image"
	"image/color"
	"image/draw"

	"github.com/holofleet/holofleet/firmware/hal"
)

// canvas returns a black picture of the panel's size.
func canvas() *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, hal.ScreenWidth, hal.ScreenHeight))
	for i := 3; i < len(m.Pix); i += 4 {
		m.Pix[i] = 0xff
	}
	return m
}

// drawCentred draws src in the middle of dst (the panel's size); what
// src does not cover is black. Pictures are never larger than the panel.
func drawCentred(dst *image.RGBA, src image.Image) {
	b := src.Bounds()
	x0 := (dst.Rect.Dx() - b.Dx()) / 2
	y0 := (dst.Rect.Dy() - b.Dy()) / 2
	r := image.Rect(x0, y0, x0+b.Dx(), y0+b.Dy())
	if r != dst.Rect {
		draw.Draw(dst, dst.Rect, image.NewUniform(color.RGBA{A: 0xff}), image.Point{}, draw.Src)
	}
	draw.Draw(dst, r, src, b.Min, draw.Src)
}

// Calibration returns the calibration crosshair: on black, white lines
// through the centre across the whole panel, a ring just inside the edge
// of the round glass, a ring at half the radius, and a dot at the centre.
func Calibration() *image.RGBA {
	m := canvas()
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	const w, h = hal.ScreenWidth, hal.ScreenHeight
	for i := range w {
		m.SetRGBA(i, h/2-1, white)
		m.SetRGBA(i, h/2, white)
	}
	for j := range h {
		m.SetRGBA(w/2-1, j, white)
		m.SetRGBA(w/2, j, white)
	}
	// Rings in half-pixel units, as the glass's own mask is computed.
	ring := func(r2, width int) {
		for y := range h {
			for x := range w {
				dx, dy := 2*x+1-w, 2*y+1-h
				d := dx*dx + dy*dy
				if d <= r2 && d > r2-width {
					m.SetRGBA(x, y, white)
				}
			}
		}
	}
	const r = w - 2 // radius 119 px, doubled
	ring(r*r, 4*r*2)
	ring(r*r/4, 4*r)
	for y := h/2 - 3; y < h/2+3; y++ {
		for x := w/2 - 3; x < w/2+3; x++ {
			m.SetRGBA(x, y, white)
		}
	}
	return m
}
