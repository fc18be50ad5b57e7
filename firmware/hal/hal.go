// Package hal is the line between the firmware and the hardware. Everything
// above it (the API, scenes, the link) behaves the same on a real board and
// in the simulator; everything below it is one small interface per device.
//
// The simulator in hal/sim implements every interface for real: a 240x240
// framebuffer with the round mask, an LED strip animated in time, servos
// that travel at a finite speed, flash partitions as files. It is the
// default, and the only implementation tests need.
package hal

import (
	"image"
	"image/color"
	"time"
)

// Screen geometry of the round display.
const (
	ScreenWidth  = 240
	ScreenHeight = 240
)

// Display is the round 240x240 panel with its backlight and touch layer.
type Display interface {
	// Show replaces the whole picture. The image is ScreenWidth x
	// ScreenHeight; pixels outside the round glass are never visible.
	Show(img *image.RGBA) error
	// Fill shows one colour over the whole panel.
	Fill(c color.RGBA) error
	// SetPower wakes (true) or sleeps (false) the panel.
	SetPower(on bool) error
	// SetBacklight sets the backlight in percent, 0-100.
	SetBacklight(percent int) error
	// Snapshot returns what the glass shows now (black when asleep or the
	// backlight is 0), with the round mask applied.
	Snapshot() *image.RGBA
}

// TouchEvent is one touch down or up at a pixel of the panel.
type TouchEvent struct {
	Down bool
	X, Y int // 0-239
}

// Touch delivers touch events; the firmware reads them from Events.
type Touch interface {
	Events() <-chan TouchEvent
}

// LEDStrip is an addressable LED strip on one GPIO pin.
type LEDStrip interface {
	// Configure sets the number of LEDs and the data pin. It takes effect
	// at start (the firmware calls it once after loading settings).
	Configure(count, gpio int) error
	// Write sends one colour per LED (already scaled by brightness);
	// len(px) is the configured count.
	Write(px []color.RGBA) error
}

// Servo drives one hobby servo with a pulse width in microseconds.
type Servo interface {
	// Drive sends pulses of the given width until told otherwise.
	Drive(us int) error
	// Release stops sending pulses: the servo goes limp.
	Release() error
	// Position reports the pulse width the horn is at now (it moves at
	// a finite speed towards the last driven pulse) and whether the
	// servo is being driven.
	Position() (us int, driven bool)
}

// Flash is the board's raw storage: named partitions of fixed size.
type Flash interface {
	// Partition opens a partition by label (otadata, ota_0, ota_1, ...).
	Partition(label string) (Partition, error)
}

// Partition is a fixed-size region of flash.
type Partition interface {
	Label() string
	Size() int64
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	// Erase sets the range to 0xFF, as erasing NOR flash does.
	Erase(off, n int64) error
	Sync() error
}

// Pin is a digital output such as the host link's ATTN line.
type Pin interface {
	Set(high bool) error
}

// Uptime tells how long the board has been running; the simulator counts
// from process (or fleet-board) start.
type Uptime interface {
	Since() time.Duration
}
