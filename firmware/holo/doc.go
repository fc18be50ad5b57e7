// Package holo drives the holoprojector: two hobby servos, pan (x, left to
// right) and tilt (y, down to up), their calibration and drive policy, and
// the motions and behaviours that move them in time.
//
// # Servos
//
// The servo ids are "pan" and "tilt"; "all" names both, for release only.
// Each servo keeps, saved in the Store under "servo/<id>":
//
//	calibration  {min_us, max_us}: the pulse at the closed end and at the
//	             open end of the holo's travel. Each 500-2500 µs, at least
//	             MinSpan apart. min_us may be the larger one: a servo
//	             mounted the other way round. Until a servo is calibrated
//	             the holo is not ready and motions answer 409 not_ready.
//	policy       {hold_at_ends, hold_between}: whether the servo is still
//	             driven once it has settled at an end of its travel
//	             (within EndMargin of it), or anywhere between. Defaults:
//	             false at the ends (the holo rests on its stops and a
//	             driven servo would only hum and heat), true between
//	             (something has to hold the holo up).
//
// POST /servos/move drives one servo to a pulse. It works on an
// uncalibrated servo (that is how the ends are found) within 500-2500 µs;
// on a calibrated one the pulse must lie within its calibration. It stops
// a running behaviour. It never answers not_ready.
//
// # Position
//
// x and y run from -1 to 1: -1 is the min_us end, 1 the max_us end, 0 the
// middle; positive is right (pan) and up (tilt). The state reports where
// the horns are now (they travel at a finite speed), not where they were
// sent. Uncalibrated servos are mapped through DefaultMinUS-DefaultMaxUS.
//
// # Motions
//
// Native numbers in brackets. Parameters a motion does not use are
// ignored; every parameter is checked when given.
//
//	center (0)  go to 0,0.
//	move   (1)  go to x,y (each -1..1; a missing axis stays).
//	nudge  (2)  go by x,y from where the holo is (each -2..2; the result
//	            is kept within -1..1).
//	twitch (3)  hold still, then jump to a random point within range of
//	            where it started, after a random pause drawn from
//	            interval_s [min, max] seconds; count twitches, then back
//	            home.
//	wag    (4)  side to side (x) around where it is, range wide, one
//	            swing out and back per duration_ms, count times.
//	nod    (5)  up and down (y) likewise.
//	scan   (6)  a slow even sweep of x across range around the centre;
//	            duration_ms per sweep there and back.
//	circle (7)  a circle of radius range around the centre, one turn per
//	            duration_ms.
//	stop   (8)  end a behaviour; the holo holds where it is.
//	off    (9)  end a behaviour and release both servos (limp).
//
// duration_ms (0-65535) is the time a move, centre or nudge takes (0: as
// fast as the servos go) or the period of one cycle of the others. range
// (1-100) is a percent of the half travel. count (0-255) is the number of
// cycles or twitches; 0 or absent repeats until something else is asked.
// The defaults are in the Defaults table. center, move and nudge end by
// themselves (state motion "move" while the horns travel, then "hold");
// the others run until their count is done or another motion replaces
// them.
//
// POST /holo/motion answers 202 with the state when something starts to
// move, and 200 for stop and off, which are complete at once. stop and off
// are accepted when the holo is not ready; the rest answer 409 not_ready.
//
// Over the native HOLO message x and y are hundredths: -100..100 for move
// (so 100 is 1.0) and -128..127 for nudge; duration_ms, range and count of
// 0 take the defaults (see FromNative).
//
// # State
//
// {"motion", "x", "y", "moving", "ready", "reason"}: motion is hold, move,
// twitch, wag, nod, scan, circle or off (limp); moving is true while a
// horn travels; reason says why the holo is not ready and is absent when
// it is. It is published as the "holo" state on every change of motion or
// readiness, and while the holo moves at most every PublishInterval.
package holo

import (
	"errors"
)

// Errors of the holo. Those returned through the API are also *api.Error
// values (bad_request, not_found or not_ready), so callers may test either;
// a refused motion request matches boardapi.ErrMotion.
var (
	// ErrNotReady: a servo is not calibrated, so the holo cannot move.
	ErrNotReady = errors.New("holo: not ready")
	// ErrUnknownServo: a servo id other than pan and tilt (or all, for
	// release).
	ErrUnknownServo = errors.New("holo: unknown servo")
	// ErrCalibration: a calibration or pulse outside the servo's limits.
	ErrCalibration = errors.New("holo: bad calibration or pulse")
	// ErrConfig: the controller's options are unusable.
	ErrConfig = errors.New("holo: bad configuration")
)
