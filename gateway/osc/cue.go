package osc

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/timecode"
)

// Cue lists over OSC, in QLab's spirit (docs/show.md):
//
//	address                                  args                 does (role)
//	/holo/cue/go                             none                 GO the current list (operator)
//	/holo/cue/stop                           none                 STOP every list (operator)
//	/holo/cue/back                           none                 standby one back (operator)
//	/holo/cue/state                          none                 reply with the state (viewer)
//	/holo/cue/<n>/start                      none                 jump: fire cue n (operator)
//	/holo/cue/<n>/standby                    none                 standby on cue n (operator)
//	/holo/cuelist/<name>/go|stop|back|state  none                 the same on the list <name>
//	/holo/cuelist/<name>/cue/<n>/start|standby
//	/holo/timecode                           s "HH:MM:SS:FF" [rate]  one frame of timecode (operator)
//	/holo/timecode                           i h, i m, i s, i f [rate]
//
// The current list is the one last run (cue.Engine.Current). A rate is
// s ("25", "29.97df") or i/f (24, 25, 29.97, 30); without one, 30, or
// 29.97df when the text has ';' before the frames. Replies carry the
// list's state; a timecode frame taken is not answered (30 replies a
// second would only load the link) and not audited one by one (refusals
// are). Subscribers of /holo/cue (every list) or /holo/cuelist/<name>
// get /holo/cuelist/<name>/state with the event's JSON (type, cue,
// state) at every change.

// Classes of the cue addresses.
const (
	ClassCue      = "cue"
	ClassTimecode = "timecode"
)

// Cues is what the server needs of the cue engine (*cue.Engine).
type Cues interface {
	Go(name string, asap bool) (cue.State, error)
	Start(name string, n cue.Number, asap bool) (cue.State, error)
	Stop(name string) (cue.State, error)
	StopAll()
	Back(name string) (cue.State, error)
	SetStandby(name string, n cue.Number) (cue.State, error)
	State(name string) (cue.State, error)
	Timecode(source string, t timecode.Timecode) error
	Watch(ctx context.Context) <-chan cue.Event
}

// cueOp is a parsed cue address.
type cueOp struct {
	op     string // go, stop, stop-all, back, state, start, standby, timecode
	list   string // "" the current
	number cue.Number
}

// parseCue reads a cue address; ok is false when m is none.
func parseCue(m *Message) (cueOp, bool) {
	p := strings.Split(m.Address, "/")
	if len(p) < 3 || p[0] != "" || p[1] != "holo" {
		return cueOp{}, false
	}
	switch {
	case p[2] == "timecode" && len(p) == 3:
		return cueOp{op: "timecode"}, true
	case p[2] == "cue" && len(p) == 4:
		switch p[3] {
		case "go", "back", "state":
			return cueOp{op: p[3]}, true
		case "stop":
			return cueOp{op: "stop-all"}, true
		}
	case p[2] == "cue" && len(p) == 5 && (p[4] == "start" || p[4] == "standby"):
		return cueOp{op: p[4], number: cue.Number(p[3])}, true
	case p[2] == "cuelist" && len(p) == 5 && p[3] != "":
		switch p[4] {
		case "go", "stop", "back", "state":
			return cueOp{op: p[4], list: p[3]}, true
		}
	case p[2] == "cuelist" && len(p) == 7 && p[3] != "" && p[4] == "cue" && (p[6] == "start" || p[6] == "standby"):
		return cueOp{op: p[6], list: p[3], number: cue.Number(p[5])}, true
	}
	return cueOp{}, false
}

// cueClass is the class of a cue address ("" for none).
func cueClass(m *Message) string {
	op, ok := parseCue(m)
	switch {
	case !ok:
		return ""
	case op.op == "timecode":
		return ClassTimecode
	}
	return ClassCue
}

// cueMessage runs a cue address; ok is false when m is none.
func (s *Server) cueMessage(c *client, m *Message) (class, status string, data any, ok bool) {
	op, ok := parseCue(m)
	if !ok {
		return "", "", nil, false
	}
	class = ClassCue
	if op.op == "timecode" {
		class = ClassTimecode
	}
	a := s.attrs(c, m)
	a.Verb, a.Resource, a.Name = auth.VerbAct, auth.ResCues, op.list
	if op.op == "state" {
		a.Verb = auth.VerbRead
	}
	if s.o.Cues == nil {
		err := fmt.Errorf("%w: this gateway runs no cue lists", ErrBadRequest)
		return class, StatusError, errData(err), true
	}
	var tc timecode.Timecode
	var err error
	if op.op == "timecode" {
		tc, err = parseTimecode(m.Args)
	} else if len(m.Args) != 0 {
		err = fmt.Errorf("%w: %s takes no arguments", ErrBadRequest, m.Address)
	}
	if err != nil {
		status, code := outcome(err)
		s.o.Guard.Record(a, false, code, err.Error())
		return class, status, errData(err), true
	}
	p, err := s.o.Guard.Check(a)
	if err != nil {
		status, _ := outcome(err)
		return class, status, errData(err), true
	}
	var st cue.State
	switch op.op {
	case "timecode":
		// A stream of frames, not one change: refusals are recorded,
		// frames taken are not (p.Done is not called).
		if err := s.o.Cues.Timecode("osc", tc); err != nil {
			status, _ := outcome(err)
			return class, status, errData(err), true
		}
		return class, StatusOK, nil, true
	case "go":
		st, err = s.o.Cues.Go(op.list, false)
	case "stop":
		st, err = s.o.Cues.Stop(op.list)
	case "stop-all":
		s.o.Cues.StopAll()
		st, err = s.o.Cues.State("")
		if err != nil { // no list at all: STOP did what it could
			p.Done(auth.CodeOK)
			return class, StatusOK, nil, true
		}
	case "back":
		st, err = s.o.Cues.Back(op.list)
	case "state":
		st, err = s.o.Cues.State(op.list)
	case "start":
		st, err = s.o.Cues.Start(op.list, op.number, false)
	case "standby":
		st, err = s.o.Cues.SetStandby(op.list, op.number)
	}
	p.Done(auth.CodeOf(err))
	if err != nil {
		status, _ := outcome(err)
		return class, status, errData(err), true
	}
	return class, StatusOK, st, true
}

// parseTimecode reads /holo/timecode's arguments.
func parseTimecode(args []any) (timecode.Timecode, error) {
	bad := fmt.Errorf("%w: /holo/timecode takes s \"HH:MM:SS:FF\" or i hours, minutes, seconds, frames; then optionally a rate (24, 25, 29.97df, 30)", ErrBadRequest)
	rate := timecode.SMPTE
	rateArg := func(v any) error {
		var err error
		switch r := v.(type) {
		case string:
			rate, err = timecode.ParseRate(r)
		case int32:
			rate, err = timecode.ParseRate(strconv.Itoa(int(r)))
		case float32:
			rate, err = timecode.ParseRate(strconv.FormatFloat(float64(r), 'f', -1, 32))
		default:
			return bad
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return nil
	}
	switch {
	case len(args) >= 1 && len(args) <= 2:
		txt, ok := args[0].(string)
		if !ok {
			return timecode.Timecode{}, bad
		}
		if len(args) == 2 {
			if err := rateArg(args[1]); err != nil {
				return timecode.Timecode{}, err
			}
		}
		t, err := timecode.Parse(txt, rate)
		if err != nil {
			return t, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return t, nil
	case len(args) == 4 || len(args) == 5:
		var v [4]uint8
		for i := range 4 {
			n, ok := args[i].(int32)
			if !ok || n < 0 || n > 255 {
				return timecode.Timecode{}, bad
			}
			v[i] = uint8(n)
		}
		if len(args) == 5 {
			if err := rateArg(args[4]); err != nil {
				return timecode.Timecode{}, err
			}
		}
		t := timecode.Timecode{Hours: v[0], Minutes: v[1], Seconds: v[2], Frames: v[3], Rate: rate}
		if err := t.Check(); err != nil {
			return t, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return t, nil
	}
	return timecode.Timecode{}, bad
}

// cueFeedback is the feedback message of a cue event.
func cueFeedback(ev cue.Event) *Message {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil
	}
	return &Message{Address: "/holo/cuelist/" + ev.List + "/state", Args: []any{string(b)}}
}

// coversList reports whether the subscription takes the events of the
// cue list name.
func (sub subscription) coversList(name string) bool {
	switch sub.scope {
	case "cue":
		return true
	case "cuelist":
		return MatchPart(sub.name, name)
	}
	return false
}

// feedCues turns the cue engine's events into feedback on q, as feed
// does the fleet's.
func (c *client) feedCues(ctx context.Context, ch <-chan cue.Event, q chan<- []byte, enqueue func(pkt []byte) bool) {
	for {
		var ev cue.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-ch:
		}
		if !ok {
			if ctx.Err() == nil {
				c.drop("the cue engine's event queue overflowed")
			}
			return
		}
		c.mu.Lock()
		want := false
		for _, sub := range c.subs {
			if sub.coversList(ev.List) {
				want = true
				break
			}
		}
		c.mu.Unlock()
		if !want {
			continue
		}
		m := cueFeedback(ev)
		if m == nil {
			continue
		}
		pkt, err := Encode(m)
		if err != nil {
			continue
		}
		if !enqueue(pkt) {
			return
		}
	}
}
