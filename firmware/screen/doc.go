// Package screen drives the board's round 240x240 panel: what it shows
// (nothing, a colour, the calibration crosshair, a still image, or a clip
// playing), its power and its backlight. It serves GET, PATCH and DELETE
// /screen and POST /screen/show.
//
// # What the panel shows
//
// Showing is one of
//
//	nothing       black, or asleep after DELETE /screen
//	colour        one colour over the whole panel; State.Colour is #rrggbb
//	calibration   the crosshair: white lines through the centre, a ring on
//	              the edge of the round glass and one half-way in
//	image         a PNG, JPEG or one-frame GIF, centred on black; also the
//	              last frame of a clip that finished by itself
//	clip          a Motion-JPEG MOV or an animated GIF, playing
//
// A show request names exactly one of path, colour or calibration; more
// than one is refused with 400 bad_request, as is loop or loops without a
// path. Everything is checked before anything changes: the request's
// shape, the colour, and the file (it exists and the board can play it),
// so an error means the panel did not change.
//
// # Plays
//
// A clip plays `loops` times, forever with loop true, and once with loop
// false. With neither it plays forever, except where the caller asks for
// one play by default (a scene that restores or turns off at its end).
// A clip that finishes its plays by itself leaves its last frame on the
// panel: the state becomes showing image with the clip's path.
//
// # Timing
//
// Each clip has its own goroutine, owned by the Controller (Close stops it
// and waits). It decodes a frame ahead, waits on the injected clock until
// the frame is due, and draws it. Frame 0 is due when it has been decoded
// (the clip's start); frame i is due at the start plus the delays of the
// frames before it (1/fps for a MOV, the file's delays for a GIF), across
// loops. A frame that reaches the panel more than LateSlack after its due
// time counts as late; late frames are still drawn, never skipped, and the
// schedule does not slip, so a player that falls behind catches up by
// drawing at once.
//
// # Events
//
// The screen state is published (kind screen) on every change of what is
// shown, of power or of backlight; the frame counters are not changes and
// travel with the periodic state the board sends while a clip plays.
// clip_started is emitted when a clip or animation starts (path, loop,
// plays with 0 for forever, frames, fps), clip_ended when it stops
// (finished true when it played all its plays, false when replaced,
// stopped or its file went away).
//
// A Watcher (the scenes feature) hears, with the screen locked, that the
// content it put up is being replaced, and, from the player before
// clip_ended, that a clip finished its plays: that is what lets a scene's
// scene_ended come before the clip_ended its restore causes.
package screen
