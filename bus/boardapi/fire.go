package boardapi

import "time"

// Scheduled changes: an extension of the board API (docs/spec-decisions.md,
// "Scheduled apply"). The changing endpoints of a show (PATCH /leds, POST
// /screen/show, DELETE /screen, POST /holo/motion, POST /scenes/apply,
// POST /scenes/end) take one of two query parameters naming when to make
// the change:
//
//	fire_at=N  the moment on the board's clock: microseconds since the
//	           board started, the clock of GET /time (TimeReply)
//	at_ms=N    a lead from the moment the board took the request, 0-60000
//
// The board checks the request at once (a refusal is the same error as
// without a time), answers 202 with a FireReply, and makes the change at
// that moment. A moment that has come already (up to MaxFireLate ago) is
// made at once and answered as without a time; one further ahead than
// MaxFireLead, or further past than MaxFireLate, is 400 bad_request.
const (
	QueryFireAt = "fire_at"
	QueryAtMS   = "at_ms"
	// MaxFireLead is how far ahead a change may be scheduled.
	MaxFireLead = 60 * time.Second
	// MaxFireLate is how far in the past a fire_at may be and still be
	// made (at once): further back it is taken for a moment of another
	// boot of the board (its clock starts over at a restart).
	MaxFireLate = 10 * time.Second
	// MaxFirePending is how many scheduled changes a board holds at once;
	// one more is 409 busy.
	MaxFirePending = 64
)

// FireReply is the 202 reply to a changing request with fire_at or at_ms:
// the change was checked and will be made at FireAt (board clock, µs),
// InUS after the board took the request. Scheduled is always true: it
// tells this reply from an endpoint's own 202 (POST /holo/motion answers
// 202 with the holo state when it starts a motion now).
type FireReply struct {
	Scheduled bool  `json:"scheduled" doc:"always true: the change is scheduled, not made yet"`
	FireAt    int64 `json:"fire_at" doc:"when the change will be made, microseconds on the board's clock (GET /time)"`
	InUS      int64 `json:"in_us" doc:"microseconds from the request's arrival to the change"`
}
