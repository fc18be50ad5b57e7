package console

import (
	"context"
	"sync/atomic"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Emitter records happenings; the board's event hub implements it.
type Emitter interface {
	Emit(kind string, fields any) events.Happening
}

// TouchEvent is the body of a touch happening (after event, seq, t_ms).
type TouchEvent struct {
	Action string `json:"action"`
	X      int    `json:"x"`
	Y      int    `json:"y"`
}

// Touch is touch reporting for one boot: it reads the touch controller all
// the time (as firmware must, or its queue fills) and, while reporting is
// on, emits each touch as a touch happening, which the SSE stream and the
// host link pass on. Reporting starts off at every start; the console's
// touch on|off turns it on and off until the next restart.
type Touch struct {
	emit Emitter
	on   atomic.Bool
}

// NewTouch returns touch reporting, off, emitting through e.
func NewTouch(e Emitter) *Touch { return &Touch{emit: e} }

// SetReporting turns touch reporting on or off.
func (t *Touch) SetReporting(on bool) { t.on.Store(on) }

// Reporting reports whether touch reporting is on.
func (t *Touch) Reporting() bool { return t.on.Load() }

// Handle takes one touch from the controller.
func (t *Touch) Handle(ev hal.TouchEvent) {
	if !t.on.Load() {
		return
	}
	a := "up"
	if ev.Down {
		a = "down"
	}
	t.emit.Emit(events.KindTouch, TouchEvent{Action: a, X: ev.X, Y: ev.Y})
}

// handledTeller is a touch controller that wants to know when an event
// it delivered has been handled (the simulator's, so that POST /sim/touch
// replies only once the touch was judged with the reporting of its time).
type handledTeller interface{ Handled() }

// Run reads the touch controller until ctx ends.
func (t *Touch) Run(ctx context.Context, src hal.Touch) {
	if src == nil {
		return
	}
	ch := src.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-ch:
			t.Handle(ev)
			if h, ok := src.(handledTeller); ok {
				h.Handled()
			}
		}
	}
}

// Status sets the status block's touch flag (bit 0) while reporting is on.
func (t *Touch) Status(sb *frame.StatusBlock) {
	if t.on.Load() {
		sb.Flags |= frame.FlagTouch
	}
}

type touchKey struct{}

// SetTouch makes t the touch reporting of boot b (the install function
// in firmware/assemble calls it).
func SetTouch(b *board.Boot, t *Touch) { b.Set(touchKey{}, t) }

// TouchOf returns the touch reporting of boot b, or nil.
func TouchOf(b *board.Boot) *Touch {
	t, _ := b.Value(touchKey{}).(*Touch)
	return t
}
