// Package rollout runs staged firmware updates over the fleet: a plan
// (an artifact, a target, waves after canaries, limits, thresholds) is
// resolved into waves of boards when it is created, then an Engine drives
// every board through its steps, wave after wave, and stops on its own
// when failures pass a threshold.
//
// # One board's steps
//
//	pending ──▶ staging ──▶ staged ──▶ activating ──▶ restarting ──▶ succeeded
//	   │           (PUT /ota/image   (window?)  (POST /ota/activate,       ├─▶ rolled_back (back on the old image)
//	   ▼            or POST /ota/pull)            POST /restart)           └─▶ timed_out   (never back / never confirmed)
//	skipped (already runs the target)                                    failed, unreachable, cancelled
//	succeeded ──▶ reverting ──▶ reverted  (revert: the previous slot activated again)
//
// Without a restart cap (Plan.MaxRestarting) the upload carries the
// activation (PUT /ota/image with activate and reboot): staged,
// activating and restarting are recorded together when the board
// replies. Plan.MaxInFlight counts boards from pending to the restart
// request; restarting boards wait outside it, bounded by the wave and by
// MaxRestarting when set.
//
// Success is counted only when GET /ota shows the board running the
// target version from the slot the image was staged into, with that slot
// confirmed: the image booted and the firmware confirmed it, as an
// ESP-IDF app confirms itself after a good start.
//
// # Signed firmware
//
// A board with secure boot on (keys in GET /ota's secure_boot) takes only
// images one of its trusted, unrevoked keys signed. Dry run and create
// read every selected board's keys and refuse, with the reason, each board
// that would refuse the artifact; before the image leaves for a board the
// worker checks again, so a secure board is never sent an image it does
// not trust (trust.go). The gateway's own keys (artifact.Options.Trusted)
// must admit the artifact too.
//
// # A working venue (docs/rollouts.md)
//
// A board running an image the gateway holds is sent the delta to the
// target (bus/imagedelta, made once per base by the artifact store), and
// the whole image on any failure of the delta (worker.send). Before a
// pending board starts, the gate (gate.go) holds it while it is busy with
// a show (a scene running to its end, the label show=live, a ShowGuard)
// or fails one of the plan's health conditions; held boards wait (or are
// skipped) and never count as failures. A strict window starts no board
// outside it.
//
// # Crash safety
//
// Every decision is written to the store before it is acted on: a board
// enters staging before its upload starts (marked inline when the upload
// carries the activation) and activating before the activation request
// leaves. Every step starts by reading the board's GET
// /ota and deciding from what the board reports, so doing a step again
// after a crash is harmless: an image already staged is not sent again,
// an activation already done is not repeated, a board already running
// the target is finished. A board is never updated twice, and a rollout
// aborted or reverted discards images staged but never activated.
//
// Store layout (one bucket, "rollouts", written in group commits):
//
//	r/<rollout id>            Rollout
//	b/<rollout id>/<board>    Board (phase, attempts, timeline)
//	a/<board>                 the rollout id the board belongs to while it runs
package rollout

import (
	"github.com/holofleet/holofleet/gateway/fault"
)

// Errors of rollouts.
var (
	// ErrPlan: the plan is impossible (empty target, bad thresholds,
	// unknown canary, ...); the message lists every problem.
	ErrPlan = fault.New(fault.Invalid, "rollout: bad plan")
	// ErrArtifact: the plan's artifact is unknown or does not suit the
	// boards.
	ErrArtifact = fault.New(fault.Invalid, "rollout: bad artifact")
	// ErrNotFound: no rollout has that id.
	ErrNotFound = fault.New(fault.NotFound, "rollout: not found")
	// ErrState: the rollout's state does not allow the request (resume
	// of a finished rollout, revert twice, ...).
	ErrState = fault.New(fault.Precondition, "rollout: not allowed in this state")
	// ErrClosed: the engine is not running.
	ErrClosed = fault.New(fault.Unavailable, "rollout: engine closed")
)
