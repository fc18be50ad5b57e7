// Package eventlog is an ordered log of events with replay and live
// watchers: the shape the gateway's event streams share (the fleet's
// board events, the rollout engine's events).
//
// Every appended entry gets the next number, 1 for the first. The log
// keeps the last Size entries; a watcher asks for the entries numbered
// after some N (what it already has) and gets first the kept ones, then
// each new one as it is appended, in number order, with nothing left out
// and nothing twice. After = 0 replays from the first entry still kept;
// after = Live asks for new entries only.
//
// A watcher has a bounded queue. One that lets it fill up is cut off: its
// channel closes and, until its context ends, Dropped counts the matching
// entries it misses. It resumes with a new Watch after the last number it
// got. A replay that asks for entries the log no longer keeps counts them
// in Dropped too, without closing the channel.
//
// A Log is not safe for concurrent use on its own: its owner calls
// Append and Watch under the lock that orders its events (so numbers
// follow that order, and a match function may read what the lock
// guards). Watchers leave by themselves when their context ends; that
// takes only the log's own small lock.
package eventlog

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
)

// Live is the after of a watcher that wants only the entries appended
// from now on.
const Live uint64 = math.MaxUint64

// Log is an ordered log of entries of type E. The zero Log is not usable:
// make one with New.
type Log[E any] struct {
	setN func(*E, uint64)

	mu       sync.Mutex // guards watchers against the cancels of their contexts
	n        uint64     // number of the last entry
	ring     []E        // entry N sits at ring[(N-1) % len(ring)]
	watchers map[*watcher[E]]struct{}
	dropped  atomic.Uint64 // entries cut-off watchers missed
	missed   atomic.Uint64 // entries replays asked for that had left the log
}

// New makes a log that keeps the last size entries (at least one).
// setN, when not nil, writes an entry's number into it as it is appended,
// so watchers see it.
func New[E any](size int, setN func(e *E, n uint64)) *Log[E] {
	return &Log[E]{setN: setN, ring: make([]E, max(size, 1)), watchers: map[*watcher[E]]struct{}{}}
}

type watcher[E any] struct {
	match   func(E) bool
	ch      chan E
	dropped atomic.Uint64
	cut     bool // ch is closed
}

// Watcher is one watch of a log.
type Watcher[E any] struct {
	// C carries the entries, in number order. It closes when the watch's
	// context ends or the watcher fell behind.
	C <-chan E
	w *watcher[E]
}

// Dropped is how many entries this watcher asked for and did not get:
// those its replay wanted that the log no longer kept, and those that
// matched while it was cut off.
func (w *Watcher[E]) Dropped() uint64 { return w.w.dropped.Load() }

// Last is the number of the last entry appended (0 before the first).
func (l *Log[E]) Last() uint64 { return l.n }

// Oldest is the number of the oldest entry kept (0 while empty).
func (l *Log[E]) Oldest() uint64 {
	if l.n == 0 {
		return 0
	}
	if l.n > uint64(len(l.ring)) {
		return l.n - uint64(len(l.ring)) + 1
	}
	return 1
}

// Stats returns the entries cut-off watchers missed and those replays
// asked for that had left the log, since the log was made.
func (l *Log[E]) Stats() (dropped, replayMissed uint64) {
	return l.dropped.Load(), l.missed.Load()
}

// Append numbers e, keeps it and hands it to every watcher it matches; it
// returns e as numbered.
func (l *Log[E]) Append(e E) E {
	l.n++
	if l.setN != nil {
		l.setN(&e, l.n)
	}
	l.ring[(l.n-1)%uint64(len(l.ring))] = e
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.watchers {
		if w.match != nil && !w.match(e) {
			continue
		}
		if w.cut {
			w.dropped.Add(1)
			l.dropped.Add(1)
			continue
		}
		select {
		case w.ch <- e:
		default:
			w.cut = true
			close(w.ch)
			w.dropped.Add(1)
			l.dropped.Add(1)
		}
	}
	return e
}

// Watch hands out the entries numbered after after that match (all when
// match is nil): first the kept ones, then new ones as they are appended,
// until ctx ends or queue entries wait unread (then C closes). match is
// called with each entry as it is replayed or appended.
func (l *Log[E]) Watch(ctx context.Context, after uint64, queue int, match func(E) bool) *Watcher[E] {
	w := &watcher[E]{match: match}
	var replay []E
	if after < l.n {
		from := after + 1
		if oldest := l.Oldest(); from < oldest {
			gone := oldest - from
			w.dropped.Add(gone)
			l.missed.Add(gone)
			from = oldest
		}
		for n := from; n <= l.n; n++ {
			e := l.ring[(n-1)%uint64(len(l.ring))]
			if match == nil || match(e) {
				replay = append(replay, e)
			}
		}
	}
	w.ch = make(chan E, max(queue, 1)+len(replay))
	for _, e := range replay {
		w.ch <- e
	}
	l.mu.Lock()
	l.watchers[w] = struct{}{}
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.watchers, w)
		if !w.cut {
			w.cut = true
			close(w.ch)
		}
	})
	return &Watcher[E]{C: w.ch, w: w}
}

// Watchers is how many watches are open.
func (l *Log[E]) Watchers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.watchers)
}
