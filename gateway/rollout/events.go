package rollout

import "context"

// eventLog numbers events, keeps the last ones for replays and hands
// them to watchers. Guarded by Engine.mu.
type eventLog struct {
	n        uint64
	ring     []Event
	watchers map[*watcher]struct{}
}

type watcher struct {
	rollout string
	ch      chan Event
	cut     bool
}

func newEventLog(size int) eventLog {
	return eventLog{ring: make([]Event, size), watchers: map[*watcher]struct{}{}}
}

// WatchQueue is how many events may wait for one watcher before it is
// cut off (its channel closes; watch again with after to resume).
const WatchQueue = 1024

func (e *Engine) emitLocked(ev Event) {
	l := &e.events
	l.n++
	ev.N = l.n
	if ev.Time.IsZero() {
		ev.Time = e.o.Clock.Now().UTC()
	}
	l.ring[(ev.N-1)%uint64(len(l.ring))] = ev
	for w := range l.watchers {
		if w.cut || (w.rollout != "" && w.rollout != ev.Rollout) {
			continue
		}
		select {
		case w.ch <- ev:
		default:
			w.cut = true
			close(w.ch)
		}
	}
}

// Watch streams the events of rollout id (every rollout when empty):
// first the kept events numbered after after, then new ones. The channel
// closes when ctx ends or the watcher falls WatchQueue events behind.
func (e *Engine) Watch(ctx context.Context, id string, after uint64) <-chan Event {
	w := &watcher{rollout: id}
	e.mu.Lock()
	l := &e.events
	var replay []Event
	if after < l.n {
		from := after + 1
		if l.n > uint64(len(l.ring)) {
			from = max(from, l.n-uint64(len(l.ring))+1)
		}
		for n := from; n <= l.n; n++ {
			ev := l.ring[(n-1)%uint64(len(l.ring))]
			if id == "" || ev.Rollout == id {
				replay = append(replay, ev)
			}
		}
	}
	w.ch = make(chan Event, WatchQueue+len(replay))
	for _, ev := range replay {
		w.ch <- ev
	}
	l.watchers[w] = struct{}{}
	e.mu.Unlock()
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.events.watchers, w)
		if !w.cut {
			w.cut = true
			close(w.ch)
		}
	})
	return w.ch
}
