// Package sim is the simulated board behind the hal interfaces: what the
// firmware runs on by default and what every test drives.
//
// Each device behaves like the part it stands for, in time:
//
//   - [Display] keeps a 240x240 RGBA framebuffer. [Display.Snapshot] is what
//     a person would see on the glass: pixels outside the inscribed circle
//     are black, the picture is dimmed by the backlight, and it is all black
//     while the panel sleeps. Touches are injected with [Display.Touch] and
//     read from [Display.Events].
//   - [LEDStrip] keeps the last frame written to it and counts frames, so a
//     test (or the simulator view) can read the strip at any moment.
//   - [Servo] moves its horn towards the last pulse at a finite speed
//     ([ServoSpeed]) measured on the injected clock; [Servo.Position]
//     interpolates where the horn is now. A released servo goes limp and
//     stays where it was.
//
// Nothing here starts a goroutine: positions are computed from the clock
// when asked, so a fake clock moves the hardware exactly.
package sim

import "errors"

// Errors returned by the simulated devices.
var (
	// ErrSize: a frame or image of the wrong size.
	ErrSize = errors.New("sim: wrong size")
	// ErrRange: a parameter outside what the part accepts (backlight
	// percent, LED count, GPIO number, pulse width).
	ErrRange = errors.New("sim: out of range")
)
