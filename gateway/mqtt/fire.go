package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
)

// Timed commands: a show command's payload in the board's form (leds,
// screen, holo, scene; one board or a group) may carry, beside the body,
// when to fire it:
//
//	"fire_at": "2026-03-01T20:00:00.250Z"   the moment (RFC 3339, any zone)
//	"lead_ms": 250                          a lead from when the gateway takes it, 0-60000
//
// The two keys are taken out and the rest is the body, read as always.
// The command then runs as a fleet timed fire (fleet.Action.At): every
// board changes at that moment. Home Assistant's light commands, the
// backlight, settings, restart and update take no time.
const (
	keyFireAt = "fire_at"
	keyLeadMS = "lead_ms"
)

// fireTime is a command's time: a moment or a lead.
type fireTime struct {
	at   time.Time
	lead time.Duration
}

// takeFireTime takes fire_at or lead_ms out of a payload; timed is false
// (and rest the payload as it was) when it has neither.
func takeFireTime(payload []byte) (rest []byte, ft fireTime, timed bool, err error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return payload, ft, false, nil // the body's reader says why
	}
	rawAt, hasAt := m[keyFireAt]
	rawLead, hasLead := m[keyLeadMS]
	if !hasAt && !hasLead {
		return payload, ft, false, nil
	}
	if hasAt && hasLead {
		return nil, ft, true, fmt.Errorf("%w: give fire_at or lead_ms, not both", ErrBadCommand)
	}
	if hasAt {
		var s string
		if err := json.Unmarshal(rawAt, &s); err != nil {
			return nil, ft, true, fmt.Errorf("%w: fire_at must be an RFC 3339 time string", ErrBadCommand)
		}
		if ft.at, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return nil, ft, true, fmt.Errorf("%w: fire_at %q is not an RFC 3339 time", ErrBadCommand, s)
		}
	} else {
		n, err := strconv.ParseInt(string(rawLead), 10, 64)
		if err != nil || n < 0 || n > fleet.MaxFireLead.Milliseconds() {
			return nil, ft, true, fmt.Errorf("%w: lead_ms must be an integer 0-%d", ErrBadCommand, fleet.MaxFireLead.Milliseconds())
		}
		ft.lead = time.Duration(n) * time.Millisecond
	}
	delete(m, keyFireAt)
	delete(m, keyLeadMS)
	rest, err = json.Marshal(m)
	return rest, ft, true, err
}

// timedAction is the fleet action of a timed show command in the board's
// form, refusing what takes no time.
func timedAction(resource string, body []byte, ft fireTime) (fleet.Action, error) {
	switch resource {
	case "leds", "holo", "scene", "screen":
	default:
		return fleet.Action{}, fmt.Errorf("%w: %s takes no fire_at or lead_ms (leds, screen, holo and scene do)", ErrBadCommand, resource)
	}
	if _, ha, _ := homeassistant.ParseLight(resource, body); ha {
		return fleet.Action{}, fmt.Errorf("%w: a Home Assistant light command takes no fire_at or lead_ms", ErrBadCommand)
	}
	a, err := boardAction(resource, body)
	if err != nil {
		return fleet.Action{}, err
	}
	if a.Kind == "" {
		return fleet.Action{}, fmt.Errorf("%w: the backlight takes no fire_at or lead_ms", ErrBadCommand)
	}
	a.At, a.Lead = ft.at, ft.lead
	// Any selector: the command's own is checked where it is named, and
	// again by the fleet when it runs the action.
	p, err := prepare(fleet.Selector{All: true}, a)
	if err != nil {
		return fleet.Action{}, err
	}
	out := actionOf(p.Body)
	out.At, out.Lead = a.At, a.Lead
	return out, nil
}

// runTimed runs a timed show command on sel.
func (b *Bridge) runTimed(ctx context.Context, sel fleet.Selector, resource string, body []byte, ft fireTime) ([]fleet.Result, error) {
	a, err := timedAction(resource, body, ft)
	if err != nil {
		return nil, err
	}
	return b.o.Fleet.Do(ctx, sel, a)
}

// MaxTimed bounds the timed commands waiting for their moment at once;
// one more is refused busy.
const MaxTimed = 256

// timed reports whether a show command carries a time (cheaply: the keys
// are there; takeFireTime reads them when it runs).
func (c command) timed() bool {
	if c.sort != cmdSet && c.sort != cmdGroup {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(c.payload, &m) != nil {
		return false
	}
	_, at := m[keyFireAt]
	_, lead := m[keyLeadMS]
	return at || lead
}

// runTimedCommand runs a timed command on a goroutine of its own, so that
// the workers stay free while it waits for its moment.
func (b *Bridge) runTimedCommand(ctx context.Context, c command) {
	select {
	case b.timedSem <- struct{}{}:
	default:
		b.refuse(c, fmt.Errorf("%w: %d timed commands waiting", ErrBusy, MaxTimed))
		return
	}
	b.timed.Go(func() {
		defer func() { <-b.timedSem }()
		cctx, cancel := context.WithTimeout(ctx, commandTimeout+fleet.MaxFireLead)
		defer cancel()
		data, err := b.run(cctx, c)
		b.finish(c, data, err)
	})
}
