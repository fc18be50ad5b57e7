// Package installation keeps a whole show installation as code: every
// board's files, saved scenes and settings, written once as a description
// (YAML or JSON), planned against what each board holds, applied to the
// fleet with the same safety as a firmware rollout, and remembered as
// numbered revisions.
//
// # Desired, observed, written
//
// The desired state of a board is its Target: the profile its assignments
// give it (Resolve), with per-board values merged over it. The observed
// state is read through the board's own API: the listing of each
// directory the profile manages (GET /fs/list), the saved scenes and
// settings (from the fleet's copy of the board's event stream when it has
// one, else GET /scenes and GET /settings), GET /servos and the link
// settings when the profile sets them. The gateway also remembers what it
// wrote to each board (path, size, SHA-256 and the mtime the board gave
// the file): a file whose size and mtime match that record is taken to be
// intact without hashing it; only the others are hashed on the board (GET
// /fs/entry?sha256=true). A board that changed nothing thus costs one
// listing per managed directory and nothing else.
//
// # Apply order on one board
//
//  1. files added or replaced, each with ?sha256= so the board keeps it
//     only when every byte matched (it writes <name>.part and renames);
//  2. scenes saved, each only once every file it names is in place;
//  3. settings, servo calibration and policy, link settings;
//  4. with prune: scenes the profile does not list deleted, then files.
//
// Every step reads nothing it wrote: a board cut off at any point holds
// the old or the new version of each file, never a saved scene that names
// a missing file (a scene is saved only after its file is there; a file
// is removed only after every scene naming it is gone), and the next
// apply plans again from what the board holds and finishes the job.
//
// Boards the gateway reaches only over an RS485 line (the link serves no
// files) take scenes and settings over JSON lines; their files are
// reported as needing the LAN.
//
// # In a cluster
//
// With Options.Shared (gateway/cluster's Installation) the revisions, the
// current revision, the content files and every board's last finding
// are the cluster's (shared.go): a revision number is taken by
// compare-and-set (ErrRevisionTaken for the loser), each gateway runs
// every new current revision over the boards it owns, and Status lists
// every gateway's boards. Runs and written records stay in each
// gateway's store; the store keeps a copy of each revision it ran.
//
// # Store layout (bucket "installation")
//
//	rev/<%08d revision>     Revision (description, who, when, message)
//	current                 the revision number applied last
//	run/<%08d run>          Run (the apply of a revision over the fleet)
//	rb/<%08d run>/<board>   RunBoard (one board's part in a run)
//	w/<board>               Written (what the gateway wrote to the board)
package installation

import "errors"

// Errors of the package.
var (
	// ErrInvalid: the description is malformed or does not hold
	// together (a *ParseError lists every problem with file:line:column).
	ErrInvalid = errors.New("installation: invalid description")
	// ErrContent: a content file is missing, unreadable, or does not
	// match the sha256 the description gives.
	ErrContent = errors.New("installation: content")
	// ErrNotFound: no such revision, run or content.
	ErrNotFound = errors.New("installation: not found")
	// ErrState: the run's state does not allow the request (resume of
	// a finished run, a second apply while one runs, ...).
	ErrState = errors.New("installation: not allowed in this state")
	// ErrConflict: a board matched by assignments that give it
	// different profiles with the same precedence.
	ErrConflict = errors.New("installation: conflicting assignments")
	// ErrBoard: the board refused a step or answered badly; the message
	// says which step and the board's error.
	ErrBoard = errors.New("installation: board step failed")
	// ErrUnreachable: the board cannot be reached now.
	ErrUnreachable = errors.New("installation: board unreachable")
)
