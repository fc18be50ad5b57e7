// Package scenes keeps the board's saved scenes and runs them.
//
// A scene sets any of three parts at once, in this order: the screen (a
// show request), the LEDs (a PATCH /leds body) and the holo (a POST
// /holo/motion body); a part left out is left alone. Its `then` says what
// happens when it ends: `stay` (the default) leaves everything as it is
// and the scene never runs to an end; `restore` puts screen, LEDs and
// holo back to what they did before; `off` turns screen and LEDs off and
// lets the servos go limp.
//
// # Saving
//
// Up to MaxScenes (bus/boardapi) scenes are saved by name (1-32 bytes of UTF-8 without
// control characters) in the board's store, with an optional slot 1-255
// unique among them (small hosts apply a scene by slot). The parts are
// checked as their own endpoints check them, but files are not looked at
// until the scene is applied. A restore or off scene must be able to end:
// it has a duration_s, or a clip that does not loop forever (a clip with
// neither loop nor loops then plays once).
//
// # Applying
//
// Applying checks every part first (the request shapes, the file on the
// volume, whether the holo can move) so that a bad part changes nothing;
// the error has the part's own code and its message starts with the
// part's name ("screen: ..."). Then the scene running to its end, if any,
// ends with by=replaced (its then is not done), and the parts are set.
// clip_started of the scene's clip therefore comes just before
// scene_started.
//
// # Running to an end
//
// A restore or off scene runs until the first of: its clip finishing its
// plays (by=clip), duration_s passing (by=time), POST /scenes/end
// (by=end), another scene applied or something else shown on the screen
// it set (by=replaced). scene_ended is emitted before its then is done,
// so with restore the scene's clip_ended and the earlier clip's
// clip_started follow it. A restore scene that replaces another restore
// scene takes over that scene's record of before, so the board goes back
// to what it did before the first; restore brings back the parts the
// scenes of such a chain set, and leaves the others alone.
package scenes
