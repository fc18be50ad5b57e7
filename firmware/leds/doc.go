// Package leds is the board's LED strip controller: what the strip shows
// now (mode, colour, loop, brightness) and the animations that play it in
// time on a hal.LEDStrip.
//
// One [Controller] serves every caller: the HTTP handler (GET and PATCH
// /leds), the host link's native LEDS message, scenes and the console all
// call [Controller.Patch]. Every change is published as the "leds" state.
//
// # Modes
//
// Numbers are the native LEDS message's mode byte (0xFF leaves the mode).
//
//	0 off      every LED dark (colour and loop are kept for later)
//	1 solid    every LED the colour
//	2 wipe     the colour fills the strip from the first LED, one LED per
//	           frame (WipeStep); with loop it then clears LED by LED the
//	           same way and fills again, forever; without loop it stays full
//	3 rainbow  hues spread once along the strip; with loop they rotate by
//	           one full turn every RainbowPeriod, forever; without loop
//	           they make one turn and stop; the colour is not used
//	4 flicker  each LED wavers between FlickerLow and 100% of the colour,
//	           like a flame, until the mode changes; loop changes nothing
//
// Animations render at FrameRate on the injected clock and are pure
// functions of the time since they started, so a fake clock reproduces
// them exactly. A still picture (off, solid, a finished wipe or rainbow)
// is written once and the frame timer stops.
//
// # Brightness
//
// Brightness is a percent, 1-100, that scales every written colour
// linearly. 0 is refused over HTTP, as the native message uses 0 to mean
// "leave as is" and the status block reports 1-100; turn the strip dark
// with mode off. Keep 30 or less when the board powers the strip. The
// saved setting leds.brightness is given to New by the board at start.
//
// # Colours
//
// See boardapi.ParseColour: #rrggbb, R,G,B or a name (case-insensitive); reported
// as #rrggbb.
package leds

import "errors"

// Errors of the LED controller. Errors from Patch are *api.Error with code
// bad_request that also match the rule's sentinel in bus/boardapi
// (ErrLEDMode, ErrColour, ErrBrightness), so callers may test either.
var (
	// ErrConfig: a strip configuration the controller cannot use.
	ErrConfig = errors.New("leds: bad configuration")
)
