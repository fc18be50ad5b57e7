package mqtt

import (
	"fmt"
	"sync"

	"github.com/holofleet/holofleet/gateway/mqtt/layout"
	"github.com/holofleet/holofleet/store"
)

// names holds the boards' topic names: a name set by a rename (kept in
// the store), else one derived from the hostname, else the id. Names are
// unique; a hostname two boards share gets the id's tail appended.
type names struct {
	bucket *store.Bucket // nil: in memory only

	mu      sync.Mutex
	renamed map[string]string // id -> name set by a rename
	byID    map[string]string // id -> name in use
	byName  map[string]string // name in use -> id
}

func openNames(db *store.DB) (*names, error) {
	n := &names{renamed: map[string]string{}, byID: map[string]string{}, byName: map[string]string{}}
	if db == nil {
		return n, nil
	}
	n.bucket = db.Bucket(namesBucket)
	keys, err := n.bucket.Keys()
	if err != nil {
		return nil, fmt.Errorf("mqtt: names: %w", err)
	}
	for _, id := range keys {
		var name string
		if ok, err := n.bucket.Get(id, &name); err != nil || !ok || layout.ValidName(name) != nil {
			continue
		}
		n.renamed[id] = name
	}
	return n, nil
}

// assign returns the board's name, choosing one when it has none.
func (n *names) assign(id, hostname string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.byID[id]; ok {
		return name
	}
	name := n.renamed[id]
	if name == "" || n.byName[name] != "" {
		name = layout.DefaultName(hostname)
	}
	if name == "" {
		name = layout.DefaultName(id)
	}
	if other := n.byName[name]; other != "" && other != id {
		tail := id
		if len(tail) > 6 {
			tail = tail[len(tail)-6:]
		}
		name = layout.DefaultName(name + "-" + tail)
		if n.byName[name] != "" {
			name = layout.DefaultName(id)
		}
	}
	n.byID[id], n.byName[name] = name, id
	return name
}

// assignAmong is assign for a bridge of a cluster: prefer is the name
// another bridge gave the board (used unless a rename here says
// otherwise), and taken reports names other bridges' boards have, which
// are avoided like this bridge's own.
func (n *names) assignAmong(id, hostname, prefer string, taken func(string) bool) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.byID[id]; ok {
		return name
	}
	free := func(name string) bool {
		other := n.byName[name]
		return name != "" && (other == "" || other == id) && !taken(name)
	}
	name := n.renamed[id]
	if !free(name) {
		name = prefer
		if layout.ValidName(name) != nil || !free(name) {
			name = layout.DefaultName(hostname)
		}
	}
	if name == "" {
		name = layout.DefaultName(id)
	}
	if !free(name) {
		tail := id
		if len(tail) > 6 {
			tail = tail[len(tail)-6:]
		}
		name = layout.DefaultName(name + "-" + tail)
		if !free(name) {
			name = layout.DefaultName(id)
		}
	}
	n.byID[id], n.byName[name] = name, id
	return name
}

// rename gives a board a new name and keeps it; it returns the old one.
func (n *names) rename(id, name string) (string, error) {
	if err := layout.ValidName(name); err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if other := n.byName[name]; other != "" && other != id {
		return "", fmt.Errorf("%w: %q is board %s", ErrNameTaken, name, other)
	}
	if n.bucket != nil {
		if err := n.bucket.Put(id, name); err != nil {
			return "", err
		}
	}
	old := n.byID[id]
	delete(n.byName, old)
	n.byID[id], n.byName[name] = name, id
	n.renamed[id] = name
	return old, nil
}

// id returns the board named name (or with that id).
func (n *names) id(nameOrID string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id, ok := n.byName[nameOrID]; ok {
		return id, true
	}
	if _, ok := n.byID[nameOrID]; ok {
		return nameOrID, true
	}
	return "", false
}

// name returns the board's name, or "".
func (n *names) name(id string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byID[id]
}

// Name returns the topic name of the board with that id ("" before the
// bridge has seen it).
func (b *Bridge) Name(id string) string { return b.names.name(id) }
