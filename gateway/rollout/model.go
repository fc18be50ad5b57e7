package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// Rollout states.
const (
	StateRunning   = "running"
	StatePaused    = "paused"
	StateAborted   = "aborted"   // no board starts; staged images are discarded
	StateReverting = "reverting" // aborted, and updated boards go back
	StateReverted  = "reverted"
	StateDone      = "done"
)

// Board phases. The terminal ones end a board's part in the rollout.
const (
	PhasePending    = "pending"
	PhaseStaging    = "staging"
	PhaseStaged     = "staged"
	PhaseActivating = "activating"
	PhaseRestarting = "restarting"
	PhaseReverting  = "reverting"

	PhaseSucceeded   = "succeeded"
	PhaseSkipped     = "skipped"     // already ran the target
	PhaseRolledBack  = "rolled_back" // came back on the old image
	PhaseTimedOut    = "timed_out"
	PhaseFailed      = "failed"
	PhaseUnreachable = "unreachable" // offline through every retry
	PhaseCancelled   = "cancelled"   // aborted before activation
	PhaseReverted    = "reverted"
)

// Phases lists every phase, in order of the steps.
var Phases = []string{PhasePending, PhaseStaging, PhaseStaged, PhaseActivating, PhaseRestarting, PhaseReverting,
	PhaseSucceeded, PhaseSkipped, PhaseRolledBack, PhaseTimedOut, PhaseFailed, PhaseUnreachable, PhaseCancelled, PhaseReverted}

// Terminal reports whether phase ends a board's steps.
func Terminal(phase string) bool {
	switch phase {
	case PhaseSucceeded, PhaseSkipped, PhaseRolledBack, PhaseTimedOut, PhaseFailed, PhaseUnreachable, PhaseCancelled, PhaseReverted:
		return true
	}
	return false
}

// OverallFailure is the overall failure threshold of a run over boards
// (a rollout, an installation's apply): once minSample boards finished,
// the run pauses when the failures beyond the acked ones (those an
// operator accepted by resuming) reach share of the finished boards. It
// returns why, or "" while the run may go on.
func OverallFailure(failed, finished, acked, minSample int, share float64) string {
	if finished < minSample || failed <= acked || float64(failed) < share*float64(finished) {
		return ""
	}
	return fmt.Sprintf("%d of %d finished boards failed (threshold %.0f%%)", failed, finished, share*100)
}

// failed reports whether phase counts against the failure thresholds.
func failed(phase string) bool {
	return phase == PhaseRolledBack || phase == PhaseTimedOut || phase == PhaseFailed
}

// Image is what a rollout installs.
type Image struct {
	SHA256 string       `json:"sha256"`
	Size   int64        `json:"size"`
	App    boardapi.App `json:"app"`
	// Trust is the artifact's verdict when the rollout was created
	// (artifact.TrustTrusted, TrustSigned, TrustUnsigned); Signers are
	// the hex key digests whose blocks verify.
	Trust   string   `json:"trust,omitempty"`
	Signers []string `json:"signers,omitempty"`
}

// Rollout is one rollout as stored.
type Rollout struct {
	ID    string `json:"id"`
	Plan  Plan   `json:"plan"`
	Image Image  `json:"image"`
	State string `json:"state"`
	// Reason says why the state last changed.
	Reason  string     `json:"reason,omitempty"`
	Waves   [][]string `json:"waves"`
	Refused []Refusal  `json:"refused,omitempty"`
	// Wave is the index of the wave being updated (len(Waves) when done).
	Wave int `json:"wave"`
	// SoakUntil is set when the current wave finished well: the next
	// starts then.
	SoakUntil time.Time `json:"soak_until,omitzero"`
	// AckWave is the current wave's number (index+1) once an operator
	// resumed it: its thresholds no longer stop it. AckFailed is how many
	// boards had failed then: the overall threshold counts from there.
	AckWave   int `json:"ack_wave,omitempty"`
	AckFailed int `json:"ack_failed,omitempty"`
	// Finished is set once no board has anything left to do.
	Finished bool      `json:"finished,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// Board is one board's part in a rollout.
type Board struct {
	Rollout  string    `json:"rollout"`
	Board    string    `json:"board"`
	Wave     int       `json:"wave"`
	Phase    string    `json:"phase"`
	Attempts int       `json:"attempts,omitempty"`
	NextTry  time.Time `json:"next_try,omitzero"`
	// FromSlot and FromVersion are what the board ran before; ToSlot is
	// the slot the image was staged into.
	FromSlot    string `json:"from_slot,omitempty"`
	FromVersion string `json:"from_version,omitempty"`
	ToSlot      string `json:"to_slot,omitempty"`
	// Inline is set, before the upload leaves, when the upload carries
	// the activation (activate and reboot): after a crash the board may
	// already be restarting into ToSlot, or back from it.
	Inline   bool      `json:"inline,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Transfer is how the image last went to the board: TransferDelta
	// or TransferFull (push only); Sent is how many bytes that took.
	Transfer string `json:"transfer,omitempty"`
	Sent     int64  `json:"sent,omitempty"`
	// NoDelta, once set, says why a delta failed for this board: it is
	// sent the whole image from then on.
	NoDelta string `json:"no_delta,omitempty"`
	// Waiting says what a pending board waits for before it starts (a
	// show on it, a health condition); empty once it starts.
	Waiting string `json:"waiting,omitempty"`
	// Kicked is when a restart was last asked for.
	Kicked   time.Time `json:"kicked,omitzero"`
	Error    string    `json:"error,omitempty"`
	Timeline []Step    `json:"timeline"`
}

// How an image went to a board (Board.Transfer).
const (
	TransferFull  = "full"  // the whole image
	TransferDelta = "delta" // a delta from the image the board ran (bus/imagedelta)
)

// Step is one entry of a board's timeline.
type Step struct {
	Time  time.Time `json:"time"`
	Phase string    `json:"phase"`
	Note  string    `json:"note,omitempty"`
}

// MaxTimeline bounds a board's timeline (the oldest steps go).
const MaxTimeline = 64

func (b *Board) clone() *Board {
	c := *b
	c.Timeline = slices.Clone(b.Timeline)
	return &c
}

// Progress counts a rollout's boards by phase.
type Progress struct {
	Boards int            `json:"boards"`
	Phases map[string]int `json:"phases"`
	Done   int            `json:"done"`   // terminal
	Failed int            `json:"failed"` // rolled back, timed out, failed
	// Waiting counts pending boards held by the show guard or a health
	// condition (their Board.Waiting says why).
	Waiting int     `json:"waiting"`
	Percent float64 `json:"percent"`
}

// Status is a rollout with its progress.
type Status struct {
	Rollout
	Progress Progress `json:"progress"`
	// WindowOpen and NextWindow, for a plan with a window, say whether it
	// is open now and when it next opens (now when open; absent when it
	// never opens again).
	WindowOpen bool       `json:"window_open,omitempty"`
	NextWindow *time.Time `json:"next_window,omitempty"`
}

// Event is one change of a rollout or of one of its boards.
type Event struct {
	N       uint64    `json:"n"`
	Time    time.Time `json:"time"`
	Rollout string    `json:"rollout"`
	// Board is empty for changes of the rollout itself.
	Board string `json:"board,omitempty"`
	State string `json:"state,omitempty"` // the rollout's state
	Phase string `json:"phase,omitempty"` // the board's phase
	// Wave is the wave's index (0-based); the last wave's once every
	// wave finished.
	Wave int    `json:"wave"`
	Note string `json:"note,omitempty"`
}

// Keys of the store bucket.
const bucket = "rollouts"

func rolloutKey(id string) string      { return "r/" + id }
func boardKey(id, board string) string { return "b/" + id + "/" + board }
func activeKey(board string) string    { return "a/" + board }
