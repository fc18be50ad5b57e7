package fleet

import (
	"context"
	"sync/atomic"
)

// eventLog numbers the fleet's events, keeps the last ones for replays
// and hands every event to the watchers whose filter it passes. Guarded
// by Fleet.mu, so events are numbered, kept and handed out in one order:
// the order of each board's reports.
type eventLog struct {
	n        uint64  // N of the last event
	ring     []Event // event N sits at ring[(N-1) % len(ring)]
	watchers map[*watcher]struct{}
}

type watcher struct {
	flt     Filter
	ch      chan Event
	dropped atomic.Uint64
	// cut is set when the watcher fell behind: its channel is closed and
	// it stays registered until its context ends, counting what it misses.
	cut bool
}

func newEventLog(size int) eventLog {
	return eventLog{ring: make([]Event, size), watchers: map[*watcher]struct{}{}}
}

// emitLocked puts ev, an event of board b, on the stream.
func (f *Fleet) emitLocked(b *boardState, ev Event) {
	l := &f.ev
	l.n++
	ev.N = l.n
	ev.Board = b.rec.ID
	ev.Time = f.clk.Now()
	b.events++
	l.ring[(ev.N-1)%uint64(len(l.ring))] = ev
	for w := range l.watchers {
		if !b.matches(w.flt) {
			continue
		}
		if w.cut {
			w.dropped.Add(1)
			f.st.dropped++
			continue
		}
		select {
		case w.ch <- ev:
		default:
			w.cut = true
			close(w.ch)
			w.dropped.Add(1)
			f.st.dropped++
		}
	}
}

// Watch streams the events of boards matching flt: with after > 0 first
// the buffered events numbered after it, then new ones as they happen. A
// watcher that lets WatcherQueue events pile up is cut off: C closes, and
// Dropped counts the events it missed from then until ctx ends (also
// counted in Stats.Dropped). Resuming with Watch(after = the last N
// received) replays what the buffer still holds. Events a replay asks for
// that already left the buffer count in Dropped (and Stats.ReplayMissed)
// without closing C. The filter is applied to each board as it is when
// the event is handed out.
func (f *Fleet) Watch(ctx context.Context, flt Filter, after uint64) *Watcher {
	w := &watcher{flt: flt}
	f.mu.Lock()
	l := &f.ev
	var replay []Event
	if after > 0 && after < l.n {
		oldest := uint64(1)
		if l.n > uint64(len(l.ring)) {
			oldest = l.n - uint64(len(l.ring)) + 1
		}
		from := after + 1
		if from < oldest {
			missed := oldest - from
			w.dropped.Add(missed)
			f.st.replayMissed += missed
			from = oldest
		}
		for n := from; n <= l.n; n++ {
			ev := l.ring[(n-1)%uint64(len(l.ring))]
			if b := f.boards[ev.Board]; b != nil && b.matches(flt) {
				replay = append(replay, ev)
			}
		}
	}
	w.ch = make(chan Event, f.o.WatcherQueue+len(replay))
	for _, ev := range replay {
		w.ch <- ev
	}
	l.watchers[w] = struct{}{}
	f.mu.Unlock()
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.ev.watchers, w)
		if !w.cut {
			w.cut = true
			close(w.ch)
		}
	})
	return &Watcher{C: w.ch, Dropped: w.dropped.Load}
}
