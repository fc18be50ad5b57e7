package osc

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/holofleet/holofleet/gateway/action"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// ErrBadRequest: an address outside the gateway's address space, or
// arguments an address does not take. The text says why.
var ErrBadRequest = fault.New(fault.Invalid, "osc: bad request")

// Address classes, the metrics' class label.
const (
	ClassScene     = "scene"
	ClassLEDs      = "leds"
	ClassScreen    = "screen"
	ClassHolo      = "holo"
	ClassSubscribe = "subscribe"
	ClassSession   = "session" // replyPort, alwaysReply, thump, unsubscribe
	ClassUnknown   = "unknown"
	ClassMalformed = "malformed" // a packet that does not decode
)

// Classes lists every address class.
var Classes = []string{ClassScene, ClassLEDs, ClassScreen, ClassHolo, ClassCue, ClassTimecode, ClassSubscribe, ClassSession, ClassUnknown, ClassMalformed}

// Target is what a show address names: /holo/group/<g>, /holo/board/<id>
// or /holo/all, <g> and <id> possibly OSC patterns.
type Target struct {
	Scope string // "group", "board" or "all"
	Name  string // the group or board part, "" for all
}

// showAction is a parsed show address: its targets and its action.
type showAction struct {
	Target Target
	Class  string
	Action fleet.Action
}

// parseShow reads /holo/{group/<g>|board/<id>|all}/<action path> and its
// arguments into an action. ok is false when the address is not a show
// address at all.
func parseShow(m *Message) (showAction, bool, error) {
	parts := strings.Split(m.Address, "/")
	if len(parts) < 3 || parts[0] != "" || parts[1] != "holo" {
		return showAction{}, false, nil
	}
	var t Target
	var rest []string
	switch parts[2] {
	case "group", "board":
		if len(parts) < 5 || parts[3] == "" {
			return showAction{}, false, nil
		}
		t, rest = Target{Scope: parts[2], Name: parts[3]}, parts[4:]
	case "all":
		if len(parts) < 4 {
			return showAction{}, false, nil
		}
		t, rest = Target{Scope: "all"}, parts[3:]
	default:
		return showAction{}, false, nil
	}
	class, a, err := parseAction(strings.Join(rest, "/"), m.Args)
	if class == "" {
		return showAction{}, false, nil
	}
	return showAction{Target: t, Class: class, Action: a}, true, err
}

// parseAction maps an action path ("scene", "leds/colour"...) and its
// arguments to a fleet action. class is "" for a path that is none.
func parseAction(p string, args []any) (class string, a fleet.Action, err error) {
	body := func(kind action.Kind, v any) fleet.Action {
		b, _ := json.Marshal(v)
		return fleet.Action{Kind: string(kind), Body: b}
	}
	switch p {
	case "scene":
		class = ClassScene
		if len(args) != 1 {
			return class, a, fmt.Errorf("%w: %s takes one argument: a scene name (s) or slot (i)", ErrBadRequest, p)
		}
		switch v := args[0].(type) {
		case string:
			return class, body(action.KindSceneApply, map[string]string{"name": v}), nil
		case int32:
			return class, body(action.KindSceneApply, map[string]int32{"slot": v}), nil
		}
		return class, a, fmt.Errorf("%w: scene: a name (s) or slot (i), not %s", ErrBadRequest, typeTag(args[0]))
	case "scene/end":
		return ClassScene, body(action.KindSceneEnd, struct{}{}), noArgs(p, args)
	case "leds":
		s, err := oneString(p, args, "the JSON body of PATCH /leds")
		return ClassLEDs, fleet.Action{Kind: string(action.KindLEDs), Body: json.RawMessage(s)}, err
	case "leds/colour", "leds/color":
		s, err := oneString(p, args, "a colour")
		return ClassLEDs, body(action.KindLEDs, map[string]string{"colour": s}), err
	case "leds/mode":
		s, err := oneString(p, args, "a mode")
		return ClassLEDs, body(action.KindLEDs, map[string]string{"mode": s}), err
	case "leds/off":
		return ClassLEDs, body(action.KindLEDs, map[string]string{"mode": "off"}), noArgs(p, args)
	case "leds/brightness":
		class = ClassLEDs
		if len(args) != 1 {
			return class, a, fmt.Errorf("%w: %s takes one argument: 1-100 (i) or 0-1 (f)", ErrBadRequest, p)
		}
		var pct int
		switch v := args[0].(type) {
		case int32:
			pct = int(v)
		case float32:
			if math.IsNaN(float64(v)) || v < 0 || v > 1 {
				return class, a, fmt.Errorf("%w: %s: a float is 0-1, not %v", ErrBadRequest, p, v)
			}
			pct = max(1, int(math.Round(float64(v)*100)))
		default:
			return class, a, fmt.Errorf("%w: %s: 1-100 (i) or 0-1 (f), not %s", ErrBadRequest, p, typeTag(args[0]))
		}
		return class, body(action.KindLEDs, map[string]int{"brightness": pct}), nil
	case "screen/colour", "screen/color":
		s, err := oneString(p, args, "a colour")
		return ClassScreen, body(action.KindScreenShow, map[string]string{"colour": s}), err
	case "screen/show":
		s, err := oneString(p, args, "a path on the board's volume")
		return ClassScreen, body(action.KindScreenShow, map[string]string{"path": s}), err
	case "screen/off":
		return ClassScreen, body(action.KindScreenOff, struct{}{}), noArgs(p, args)
	case "holo/motion":
		s, err := oneString(p, args, "the JSON body of POST /holo/motion")
		return ClassHolo, fleet.Action{Kind: string(action.KindHolo), Body: json.RawMessage(s)}, err
	case "holo/center", "holo/centre":
		return ClassHolo, body(action.KindHolo, map[string]string{"motion": "center"}), noArgs(p, args)
	}
	return "", a, nil
}

func noArgs(p string, args []any) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: %s takes no arguments", ErrBadRequest, p)
	}
	return nil
}

func oneString(p string, args []any, what string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("%w: %s takes one string argument: %s", ErrBadRequest, p, what)
	}
	s, ok := args[0].(string)
	if !ok {
		return "", fmt.Errorf("%w: %s takes a string (s): %s, not %s", ErrBadRequest, p, what, typeTag(args[0]))
	}
	return s, nil
}

// typeTag is the OSC type tag of an argument value.
func typeTag(v any) string {
	b, err := (&Message{Address: "/", Args: []any{v}}).AppendBinary(nil)
	if err != nil || len(b) < 6 {
		return "?"
	}
	return string(b[5])
}

// selector expands a target against the fleet's boards: a group or board
// pattern selects the known groups or boards it matches. A literal group
// number is taken as is (1-31, checked by the fleet).
func selector(t Target, boards []fleet.BoardView) (fleet.Selector, error) {
	switch t.Scope {
	case "all":
		return fleet.Selector{All: true}, nil
	case "group":
		if !IsPattern(t.Name) {
			g, err := strconv.Atoi(t.Name)
			if err != nil {
				return fleet.Selector{}, fmt.Errorf("%w: group %q is not a number", ErrBadRequest, t.Name)
			}
			return fleet.Selector{Groups: []int{g}}, nil
		}
		var gs []int
		for _, b := range boards {
			for _, g := range b.Groups {
				if !slices.Contains(gs, g) && MatchPart(t.Name, strconv.Itoa(g)) {
					gs = append(gs, g)
				}
			}
		}
		if len(gs) == 0 {
			return fleet.Selector{}, fmt.Errorf("%w: no known group matches %q", ErrBadRequest, t.Name)
		}
		slices.Sort(gs)
		return fleet.Selector{Groups: gs}, nil
	}
	var ids []string
	for _, b := range boards {
		if MatchPart(t.Name, b.ID) {
			ids = append(ids, b.ID)
		}
	}
	if len(ids) == 0 {
		return fleet.Selector{}, fmt.Errorf("%w: no known board matches %q", ErrBadRequest, t.Name)
	}
	slices.Sort(ids)
	return fleet.Selector{Boards: ids}, nil
}
