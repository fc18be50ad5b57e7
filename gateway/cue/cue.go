// Package cue runs shows: cue lists stored in the gateway, a GO that
// fires the standby cue, pre-waits and follows on the injected clock, and
// timecode chase.
//
// A cue list is an ordered list of cues. A cue has a number (1, 1.5, 2:
// decimals ordered as numbers), a name, one or more fleet actions (kind,
// selector, body, checked by fleet.Prepare when the list is saved), a
// pre-wait, a follow, an optional timecode and notes for the operator.
//
// Timing. GO takes the standby cue at the next moment every board can
// make: now plus Options.Lead (the time a line needs to keep itself free
// and send a timed frame; 150 ms by default), or now with ASAP. The cue
// fires at that moment plus its pre-wait, all its actions as one timed
// fire (every action's fleet.Action.At is the same moment). A follow
// chains the next cue: FollowContinue starts it at the moment the cue
// fires, FollowAfter that long after; the followed cue then runs its own
// pre-wait. Moments chain from moments, never from when a timer woke, so
// a chain of follows stays on the frame. GO moves the standby past the
// whole chain of follows it started, as QLab's playhead does.
//
// A cue's actions go to the fleet Lead before their moment (the timed
// fire's own planning takes it from there); until then STOP cancels
// them. STOP cancels every waiting pre-wait and follow of the list; a fire
// already handed to the fleet completes.
//
// Every change of a list's state (GO, a fire, STOP, the standby, an edit,
// timecode) is an Event carrying the whole State; Watch streams them.
//
// The engine neither authenticates nor audits: its surfaces (REST, OSC,
// MQTT) ask auth.Guard with resource auth.ResCues first.
package cue

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timecode"
)

// Errors.
var (
	// ErrBadList: a cue list that cannot be saved (a bad name or number,
	// two cues with one number, an action the fleet refuses, a bad
	// follow, pre-wait or timecode); the text says which cue and why.
	ErrBadList = fault.New(fault.Invalid, "cue: bad cue list")
	// ErrBadRequest: a request about cue lists that is malformed (a
	// body, a flag, an argument); the text says why.
	ErrBadRequest = fault.New(fault.Invalid, "cue: bad request")
	// ErrNoList: no cue list of that name.
	ErrNoList = fault.New(fault.NotFound, "cue: no such cue list")
	// ErrNoCue: no cue of that number in the list.
	ErrNoCue = fault.New(fault.NotFound, "cue: no such cue")
	// ErrEnd: GO with the standby past the last cue.
	ErrEnd = fault.New(fault.Precondition, "cue: no standby cue (the end of the list)")
	// ErrClosed: the engine was closed.
	ErrClosed = fault.New(fault.Unavailable, "cue: engine closed")
)

// Limits of a cue list.
const (
	MaxCues       = 1000
	MaxActions    = 32
	MaxWait       = 24 * time.Hour
	MaxNameLen    = 64
	MaxCueNameLen = 200
	MaxNotesLen   = 4000
)

// Follows.
type Follow string

// Follow modes: what happens to the next cue when this one fires.
const (
	FollowNone     Follow = "none"     // nothing: the operator GOes it
	FollowContinue Follow = "continue" // it starts as this one fires
	FollowAfter    Follow = "after"    // it starts FollowMS after this one fires
)

// Number is a cue number: digits, optionally a point and more digits
// ("1", "1.5", "10.25"). Numbers order as decimals; "1.50" is "1.5".
type Number string

var numberRE = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,6})?$`)

// ParseNumber checks s and returns its canonical form (no leading zeros,
// no trailing zeros after the point).
func ParseNumber(s string) (Number, error) {
	s = strings.TrimSpace(s)
	if !numberRE.MatchString(s) {
		return "", fmt.Errorf("%w: cue number %q (digits, optionally a point and digits: 1, 1.5)", ErrBadList, s)
	}
	i, f, _ := strings.Cut(s, ".")
	i = strings.TrimLeft(i, "0")
	if i == "" {
		i = "0"
	}
	f = strings.TrimRight(f, "0")
	if f == "" {
		return Number(i), nil
	}
	return Number(i + "." + f), nil
}

// Compare orders canonical numbers: -1, 0 or 1.
func (n Number) Compare(m Number) int {
	ni, nf, _ := strings.Cut(string(n), ".")
	mi, mf, _ := strings.Cut(string(m), ".")
	a, _ := strconv.ParseInt(ni, 10, 64)
	b, _ := strconv.ParseInt(mi, 10, 64)
	if a != b {
		if a < b {
			return -1
		}
		return 1
	}
	return strings.Compare(nf, mf) // no trailing zeros: decimals compare as strings
}

// Action is one fleet action of a cue.
type Action struct {
	Kind     string          `json:"kind"`
	Selector fleet.Selector  `json:"selector"`
	Body     json.RawMessage `json:"body,omitempty"`
}

// Cue is one cue of a list.
type Cue struct {
	Number  Number   `json:"number"`
	Name    string   `json:"name,omitempty"`
	Actions []Action `json:"actions"`
	// PreWaitMS is how long after its GO the cue fires.
	PreWaitMS int64 `json:"pre_wait_ms,omitempty"`
	// Follow says what the next cue does when this one fires ("" is
	// none); FollowMS is the delay of FollowAfter.
	Follow   Follow `json:"follow,omitempty"`
	FollowMS int64  `json:"follow_ms,omitempty"`
	// Timecode, when set, fires the cue when incoming timecode passes it
	// ("HH:MM:SS:FF"; any rate's labels: cues order by their label).
	Timecode string `json:"timecode,omitempty"`
	Notes    string `json:"notes,omitempty"`
}

// PreWait is the pre-wait as a duration.
func (c Cue) PreWait() time.Duration { return time.Duration(c.PreWaitMS) * time.Millisecond }

// followDelay is how long after this cue fires the next one starts, and
// whether it does.
func (c Cue) followDelay() (time.Duration, bool) {
	switch c.Follow {
	case FollowContinue:
		return 0, true
	case FollowAfter:
		return time.Duration(c.FollowMS) * time.Millisecond, true
	}
	return 0, false
}

// tcKey orders a cue's timecode label (rate-independent: labels order
// as hours, minutes, seconds, frames); -1 for none.
func tcKey(t timecode.Timecode) int64 {
	return ((int64(t.Hours)*60+int64(t.Minutes))*60+int64(t.Seconds))*100 + int64(t.Frames)
}

// List is a cue list.
type List struct {
	Name string `json:"name"`
	Cues []Cue  `json:"cues"`
}

// Clone returns a copy of l that shares nothing with it a caller may
// change: its cues and their actions are copied; an action's body bytes
// are shared (the engine replaces a body, never writes into one).
func (l List) Clone() List {
	out := List{Name: l.Name, Cues: make([]Cue, len(l.Cues))}
	for i, c := range l.Cues {
		c.Actions = slices.Clone(c.Actions)
		out.Cues[i] = c
	}
	return out
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckName checks a cue list's name: a letter or digit, then letters,
// digits, '_', '.', '-'; at most 64 (it is an OSC address part and a URL
// path segment).
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: name %q (letters, digits, _ . -; at most %d)", ErrBadList, name, MaxNameLen)
	}
	return nil
}

// Check checks l as saving does and puts it in its canonical form:
// numbers canonical, cues sorted by number, follow "" as none. Every
// action is prepared by fleet.Prepare (its body, its selector), so a cue
// that would be refused at its GO is refused now.
func (l *List) Check() error {
	if err := CheckName(l.Name); err != nil {
		return err
	}
	if l.Cues == nil {
		l.Cues = []Cue{} // "cues": [], never null
	}
	if len(l.Cues) > MaxCues {
		return fmt.Errorf("%w: %d cues (at most %d)", ErrBadList, len(l.Cues), MaxCues)
	}
	for i := range l.Cues {
		c := &l.Cues[i]
		n, err := ParseNumber(string(c.Number))
		if err != nil {
			return fmt.Errorf("cue %d of %d: %w", i+1, len(l.Cues), err)
		}
		c.Number = n
		if err := c.check(); err != nil {
			return fmt.Errorf("cue %s: %w", n, err)
		}
	}
	slices.SortStableFunc(l.Cues, func(a, b Cue) int { return a.Number.Compare(b.Number) })
	for i := 1; i < len(l.Cues); i++ {
		if l.Cues[i].Number == l.Cues[i-1].Number {
			return fmt.Errorf("%w: two cues numbered %s", ErrBadList, l.Cues[i].Number)
		}
	}
	return nil
}

func (c *Cue) check() error {
	switch {
	case len(c.Name) > MaxCueNameLen:
		return fmt.Errorf("%w: name longer than %d", ErrBadList, MaxCueNameLen)
	case len(c.Notes) > MaxNotesLen:
		return fmt.Errorf("%w: notes longer than %d", ErrBadList, MaxNotesLen)
	case len(c.Actions) == 0 || len(c.Actions) > MaxActions:
		return fmt.Errorf("%w: %d actions (1-%d)", ErrBadList, len(c.Actions), MaxActions)
	case c.PreWaitMS < 0 || c.PreWait() > MaxWait:
		return fmt.Errorf("%w: pre_wait_ms %d (0-%d)", ErrBadList, c.PreWaitMS, MaxWait.Milliseconds())
	}
	switch c.Follow {
	case "":
		c.Follow = FollowNone
	case FollowNone, FollowContinue:
	case FollowAfter:
	default:
		return fmt.Errorf("%w: follow %q (none, continue or after)", ErrBadList, c.Follow)
	}
	if c.FollowMS < 0 || time.Duration(c.FollowMS)*time.Millisecond > MaxWait || c.Follow != FollowAfter && c.FollowMS != 0 {
		return fmt.Errorf("%w: follow_ms %d (0-%d, with follow after only)", ErrBadList, c.FollowMS, MaxWait.Milliseconds())
	}
	if c.Timecode != "" {
		t, err := timecode.Parse(c.Timecode, timecode.SMPTE)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadList, err)
		}
		c.Timecode = t.String()
	}
	for i, a := range c.Actions {
		if len(a.Body) == 0 {
			c.Actions[i].Body = json.RawMessage("{}")
		}
		if _, err := fleet.Prepare(a.Selector, fleet.Action{Kind: a.Kind, Body: c.Actions[i].Body}, time.Time{}); err != nil {
			return fmt.Errorf("action %d: %w", i+1, err)
		}
	}
	return nil
}

// index is the position of the cue numbered n, or -1.
func (l *List) index(n Number) int {
	return slices.IndexFunc(l.Cues, func(c Cue) bool { return c.Number == n })
}
