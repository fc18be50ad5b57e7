package fleet

import (
	"encoding/json"
	"slices"
)

// State returns the last state of kind ("scenes", "settings", "link",
// ...) board id reported in its present boot: what its GET would answer,
// as the board's event stream (or the re-read after the stream opened)
// last gave it. ok is false when the board is unknown, offline, or
// reported no such state since it last started. A consumer that needs to
// be sure reads the board itself; the copy saves a request when it
// already shows what the consumer wants.
func (f *Fleet) State(id, kind string) (json.RawMessage, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boards[id]
	if !ok || !b.online {
		return nil, false
	}
	s, ok := b.states[kind]
	if !ok {
		return nil, false
	}
	return slices.Clone(s), true
}
