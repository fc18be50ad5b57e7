package cue

import "context"

// StateBucket keeps each list's standby across restarts: list name ->
// {"standby": number}. A gateway restarted mid-show comes back with the
// standby where it was (waits and follows under way are not resumed).
const StateBucket = "cuestate"

// savedState is a list's state as StateBucket keeps it.
type savedState struct {
	Standby Number `json:"standby"`
}

// touch marks a list's standby for saving. e.mu is held.
func (e *Engine) touch(name string) {
	if e.o.DB == nil {
		return
	}
	e.dirty[name] = true
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// persist writes the standbys marked by touch, off the engine's lock,
// until ctx ends (then once more).
func (e *Engine) persist(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			e.flush()
			return
		case <-e.wake:
			e.flush()
		}
	}
}

// flush writes the marked standbys in one transaction.
func (e *Engine) flush() {
	e.mu.Lock()
	puts := make(map[string]any, len(e.dirty))
	for name := range e.dirty {
		if ls := e.lists[name]; ls != nil {
			puts[name] = savedState{Standby: e.standbyNumber(ls)}
		} else {
			puts[name] = nil // deleted
		}
	}
	clear(e.dirty)
	e.mu.Unlock()
	if len(puts) == 0 {
		return
	}
	if err := e.o.DB.Bucket(StateBucket).Batch(puts); err != nil {
		e.log.Error("cue: saving the standby", "err", err)
	}
}

// restore puts each list's standby where it was saved. It runs in New.
func (e *Engine) restore() {
	b := e.o.DB.Bucket(StateBucket)
	for name, ls := range e.lists {
		var st savedState
		ok, err := b.Get(name, &st)
		if err != nil || !ok {
			continue
		}
		if st.Standby == "" {
			ls.standby = len(ls.l.Cues)
		} else if i := ls.l.index(st.Standby); i >= 0 {
			ls.standby = i
		}
	}
}
