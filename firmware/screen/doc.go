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
// and waits). Which frame is on the panel follows the clip's position on
// its timeline, never a count of frames drawn: position 0 is the clip's
// start (the moment a timed request names, else when the board took the
// request), frame i of play k is due at k plays plus the delays of the
// frames before i (1/fps for a MOV, the file's delays for a GIF). The
// player decodes the frame due next, waits on the injected clock until it
// is due and draws it. A frame that reaches the panel more than LateSlack
// after its due time counts as late; a player that falls behind draws the
// frame due when it comes to it and drops the ones in between, so it
// never drifts from its timeline.
//
// When the board is aligned with the gateway's clock (Options.Aligned,
// PUT /time, extension clip-sync) a clip started then follows the aligned
// clock: each new alignment moves its timeline by the drift since the last
// one, and the panel drops a frame (clock put on) or holds one (put back)
// when that crosses a frame's edge. Boards that started one clip together
// so stay within a frame of each other for as long as it loops. The
// state's clip object reports frame (numbered from the start across
// plays), dropped, held, synced and start_us.
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
