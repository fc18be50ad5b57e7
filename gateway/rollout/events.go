package rollout

import (
	"context"

	"github.com/holofleet/holofleet/gateway/eventlog"
)

// Live is the after of a Watch that wants only the events from now on;
// after = 0 replays from the first event still kept.
const Live = eventlog.Live

// WatchQueue is how many events may wait for one watcher before it is
// cut off (its channel closes; watch again with after to resume).
const WatchQueue = 1024

// The engine's events live in an eventlog.Log guarded by Engine.mu.
func newEventLog(size int) *eventlog.Log[Event] {
	return eventlog.New(size, func(ev *Event, n uint64) { ev.N = n })
}

func (e *Engine) emitLocked(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = e.o.Clock.Now().UTC()
	}
	e.events.Append(ev)
}

// Watch streams the events of rollout id (every rollout when empty)
// numbered after after: first those still kept (after = 0: from the
// first kept; Live: none), then new ones. The channel closes when ctx
// ends or the watcher falls WatchQueue events behind.
func (e *Engine) Watch(ctx context.Context, id string, after uint64) <-chan Event {
	var match func(Event) bool
	if id != "" {
		match = func(ev Event) bool { return ev.Rollout == id }
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.events.Watch(ctx, after, WatchQueue, match).C
}
