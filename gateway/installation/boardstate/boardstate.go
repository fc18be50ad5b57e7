// Package boardstate names the states of a board against an
// installation's current revision (gateway/installation): what the
// installation's status and metrics say of a board and what Home
// Assistant's installation sensor shows (gateway/mqtt/homeassistant).
// It is a leaf, so that the MQTT side names them without linking the
// installation.
package boardstate

// A board's states.
const (
	InSync      = "in_sync"     // holds what the revision gives it
	Drifted     = "drifted"     // differs from it (the diff says how)
	Applying    = "applying"    // a run or a heal is applying it now
	Unreachable = "unreachable" // could not be checked
	Failed      = "failed"      // the last run failed on it, and it is still not in sync
	NeedsLAN    = "needs_lan"   // reached only over a line: its files need the LAN
	Unassigned  = "unassigned"  // no assignment of the revision selects it (or none is applied yet)
)

// Checked are the states a check finds of an assigned board.
var Checked = []string{InSync, Drifted, Applying, Unreachable, Failed, NeedsLAN}

// All are every state: Checked, then Unassigned.
var All = append(Checked[:len(Checked):len(Checked)], Unassigned)
