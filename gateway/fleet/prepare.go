package fleet

import (
	"fmt"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/gateway/action"
)

// Preparing an action: every surface that takes an action (the REST and
// gRPC API, MQTT set topics and requests, OSC, the cluster's routing, and
// Do itself) hands it to Prepare before anything else looks at it, and
// nothing else in the gateway decodes an action body (a test walks the
// syntax of every gateway package to keep it so). One function means one
// set of rules: a body, a selector or a moment that one surface accepts,
// every surface accepts, and the refusals are the same typed errors
// everywhere:
//
//	what is checked            rule                                           error
//	the body                   decoded strictly by package action and checked ErrBadAction (wraps action.ErrUnknownKind
//	                           by the board's rules for its request           or action.ErrInvalid)
//	the selector               names boards, groups, labels or all; groups    ErrBadSelector
//	                           are the spec's 1-31 (frame.MaxGroup)
//	the moment                 At or Lead, not both; a lead 0-MaxFireLead;    ErrBadTime
//	                           given now, the moment at most MaxFireLead
//	                           ahead of it and MaxFirePast behind
//
// The moment is measured on the clock of whoever runs the action: the
// fleet core's (Do), or the routing gateway's in a cluster. A surface
// that passes the action on to a fleet.Service gives the zero time: it
// checks the moment's form, and the service, which prepares the action
// again on its own clock, checks its bounds and resolves a lead (so that
// a lead runs from when the service takes the action).
//
// The checks run in that order, so a request wrong in two ways is refused
// for its body first, as Do always did. Prepare reads no state: whether
// the boards, groups and labels exist is the fleet's to say when it runs
// the action (ErrUnknownBoard, ErrUnknownGroup).
//
// Prepare lives in the fleet core rather than in package action because
// its rules are the fleet's (selectors, groups, fire times) and its
// errors are the fleet's sentinels, which every surface already maps;
// package action stays the board's body types and their decoder.

// Prepared is an action checked and ready to run.
type Prepared struct {
	// Selector is the selector as given, checked.
	Selector Selector
	// Action is the action as given (kind, body, and At or Lead), for a
	// surface that passes it on to a fleet.Service: the service prepares
	// it again against its own clock (a cluster resolves the lead once,
	// where it routes the action).
	Action Action
	// Body is the decoded body, checked by the board's rules.
	Body action.Body
	// At is the moment resolved at now: At, or now plus Lead; zero fires
	// now (or, prepared without a now, at the unresolved Lead).
	At time.Time
}

// Kind is the prepared action's kind.
func (p Prepared) Kind() action.Kind { return p.Body.Kind() }

// Timed reports whether the action fires at a moment rather than now.
func (p Prepared) Timed() bool { return !p.At.IsZero() || p.Action.Lead > 0 }

// Resolved is the action with its moment resolved (At set, Lead zero),
// as it is passed on to another gateway so that it keeps its moment.
// Prepared without a now, it is the action as given.
func (p Prepared) Resolved() Action {
	a := p.Action
	if !p.At.IsZero() {
		a.At, a.Lead = p.At, 0
	}
	return a
}

// Prepare decodes and checks the action a for the selector sel at the
// moment now (see the table above; a zero now checks the moment's form
// only): it returns the decoded body, the checked selector and the moment
// the action fires, or an error matching ErrBadAction, ErrBadSelector or
// ErrBadTime that says why.
func Prepare(sel Selector, a Action, now time.Time) (Prepared, error) {
	ab, err := action.Decode(action.Kind(a.Kind), a.Body)
	if err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrBadAction, err)
	}
	if err := CheckSelector(sel); err != nil {
		return Prepared{}, err
	}
	timed, err := FireTime(a, now)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{Selector: sel, Action: a, Body: ab, At: timed.At}, nil
}

// CheckSelector checks a selector as Prepare does: it names boards,
// groups, labels or all, and its groups are 1-31. The error matches
// ErrBadSelector.
func CheckSelector(sel Selector) error {
	if len(sel.Boards) == 0 && len(sel.Groups) == 0 && len(sel.Labels) == 0 && !sel.All {
		return fmt.Errorf("%w: no boards, groups, labels or all", ErrBadSelector)
	}
	for _, g := range sel.Groups {
		if err := CheckGroup(g); err != nil {
			return err
		}
	}
	return nil
}

// CheckGroup checks a group number: the spec's 1-31, on every surface.
// The error matches ErrBadSelector.
func CheckGroup(g int) error {
	if g < 1 || g > frame.MaxGroup {
		return fmt.Errorf("%w: group %d (groups are 1-%d)", ErrBadSelector, g, frame.MaxGroup)
	}
	return nil
}
