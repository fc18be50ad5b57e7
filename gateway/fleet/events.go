package fleet

import (
	"context"

	"github.com/holofleet/holofleet/gateway/eventlog"
)

// Live is the after of a Watch that wants only the events from now on;
// after = 0 replays from the first event the buffer still holds.
const Live = eventlog.Live

// The fleet's events live in an eventlog.Log guarded by Fleet.mu, so
// events are numbered, kept and handed out in one order: the order of
// each board's reports.
func newEventLog(size int) *eventlog.Log[Event] {
	return eventlog.New(size, func(e *Event, n uint64) { e.N = n })
}

// emitLocked puts ev, an event of board b, on the stream.
func (f *Fleet) emitLocked(b *boardState, ev Event) {
	ev.Board = b.rec.ID
	ev.Time = f.clk.Now()
	b.events++
	f.ev.Append(ev)
}

// Watch streams the events of boards matching flt numbered after after:
// first those the buffer still holds (after = 0: from the first it
// holds; Live: none), then new ones as they happen. A watcher that lets
// WatcherQueue events pile up is cut off: C closes, and Dropped counts
// the events it missed from then until ctx ends (also counted in
// Stats.Dropped). Resuming with Watch(after = the last N received)
// replays what the buffer still holds. Events a replay asks for that
// already left the buffer count in Dropped (and Stats.ReplayMissed)
// without closing C. The filter is applied to each board as it is when
// the event is handed out.
func (f *Fleet) Watch(ctx context.Context, flt Filter, after uint64) *Watcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.ev.Watch(ctx, after, f.o.WatcherQueue, func(ev Event) bool {
		b := f.boards[ev.Board] // f.mu is held: Append and Watch run under it
		return b != nil && b.matches(flt)
	})
	return &Watcher{C: w.C, Dropped: w.Dropped}
}
