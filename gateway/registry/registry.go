// Package registry is the gateway's record of every board it has met:
// who the board is (the id of GET /info), what it is called, where it was
// reached (an RS485 line and bus address, a LAN base URL), its groups,
// the transports that reached it, when it was last seen, the firmware it
// runs, and the labels operators gave it.
//
// Records are JSON documents in one bbolt bucket of the gateway's store
// (bucket "boards", key = board id), so they survive restarts. An
// in-memory copy of every record answers reads without touching the file;
// writes go to the file first and to the copy once they landed.
//
// # Labels
//
// A label is a key and a value chosen by an operator ("room" = "lobby").
// Keys are 1-63 characters of a-z, 0-9, '.', '_', '-' and '/'; values are
// at most 63 printable ASCII characters (an empty value is allowed). A
// board has at most MaxLabels labels.
package registry

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/holofleet/holofleet/store"
)

// Errors of the registry.
var (
	// ErrNotFound: no record has that id.
	ErrNotFound = errors.New("registry: no such board")
	// ErrBadID: the id is empty, too long, or has characters outside
	// a-z, A-Z, 0-9, '.', '_', '-'.
	ErrBadID = errors.New("registry: bad board id")
	// ErrBadLabel: a label key or value breaks the label rules.
	ErrBadLabel = errors.New("registry: bad label")
)

// Bucket is the store bucket holding the records.
const Bucket = "boards"

// Limits of ids and labels.
const (
	MaxIDLen       = 64
	MaxLabelKey    = 63
	MaxLabelValue  = 63
	MaxLabels      = 64
	maxStoredBatch = 256
)

// Record is what the registry keeps of one board.
type Record struct {
	ID       string `json:"id"`
	Hostname string `json:"hostname"`
	// Line and Address say where the board sits on an RS485 line (Address
	// 0 when it was never seen on one).
	Line    string `json:"line,omitempty"`
	Address int    `json:"address,omitempty"`
	// URL is the board's LAN base URL, empty when never seen on the LAN.
	URL    string `json:"url,omitempty"`
	Groups []int  `json:"groups"`
	// Transports are the drivers that reached it when it was last seen.
	Transports []string          `json:"transports"`
	LastSeen   time.Time         `json:"last_seen"`
	Firmware   string            `json:"firmware"`
	Labels     map[string]string `json:"labels"`
}

// Clone returns a deep copy of r.
func (r Record) Clone() Record {
	r.Groups = slices.Clone(r.Groups)
	r.Transports = slices.Clone(r.Transports)
	r.Labels = maps.Clone(r.Labels)
	return r
}

// normal fills nil slices and maps so every record reads the same in JSON.
func (r *Record) normal() {
	if r.Groups == nil {
		r.Groups = []int{}
	}
	if r.Transports == nil {
		r.Transports = []string{}
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
}

// Registry is the set of records. Its methods are safe for concurrent use.
type Registry struct {
	bucket *store.Bucket

	mu   sync.RWMutex
	recs map[string]Record
}

// Open loads every record of db's "boards" bucket. A record that does not
// decode is an error: the file is the operator's and is not overwritten
// behind their back.
func Open(db *store.DB) (*Registry, error) {
	r := &Registry{bucket: db.Bucket(Bucket), recs: map[string]Record{}}
	err := store.Each(r.bucket, func(k string, rec Record) error {
		rec.ID = k
		rec.normal()
		r.recs[k] = rec
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	return r, nil
}

// Len is the number of records.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.recs)
}

// List returns a copy of every record, ordered by id.
func (r *Registry) List() []Record {
	r.mu.RLock()
	out := make([]Record, 0, len(r.recs))
	for _, rec := range r.recs {
		out = append(out, rec.Clone())
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Record) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Get returns a copy of the record with that id.
func (r *Registry) Get(id string) (Record, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rec, ok := r.recs[id]
	if !ok {
		return Record{}, false
	}
	return rec.Clone(), true
}

// Put stores rec (replacing any record with its id) after checking its id
// and labels.
func (r *Registry) Put(rec Record) error {
	return r.PutMany([]Record{rec})
}

// PutMany stores several records in as few transactions as it can (one
// per 256 records); each transaction lands whole or not at all.
func (r *Registry) PutMany(recs []Record) error {
	clean := make([]Record, 0, len(recs))
	for _, rec := range recs {
		if err := ValidateID(rec.ID); err != nil {
			return err
		}
		if err := ValidateLabels(rec.Labels); err != nil {
			return fmt.Errorf("board %s: %w", rec.ID, err)
		}
		rec = rec.Clone()
		rec.normal()
		clean = append(clean, rec)
	}
	for chunk := range slices.Chunk(clean, maxStoredBatch) {
		puts := make(map[string]any, len(chunk))
		for _, rec := range chunk {
			puts[rec.ID] = rec
		}
		if err := r.bucket.Batch(puts); err != nil {
			return fmt.Errorf("registry: %w", err)
		}
		r.mu.Lock()
		for _, rec := range chunk {
			r.recs[rec.ID] = rec
		}
		r.mu.Unlock()
	}
	return nil
}

// SetLabels replaces the labels of the board with that id and returns the
// record as stored.
func (r *Registry) SetLabels(id string, labels map[string]string) (Record, error) {
	if err := ValidateLabels(labels); err != nil {
		return Record{}, err
	}
	r.mu.RLock()
	rec, ok := r.recs[id]
	r.mu.RUnlock()
	if !ok {
		return Record{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	rec = rec.Clone()
	rec.Labels = maps.Clone(labels)
	if err := r.Put(rec); err != nil {
		return Record{}, err
	}
	return rec.Clone(), nil
}

// Delete forgets the board with that id; an unknown id is not an error.
func (r *Registry) Delete(id string) error {
	if err := r.bucket.Delete(id); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	r.mu.Lock()
	delete(r.recs, id)
	r.mu.Unlock()
	return nil
}

// ValidateID checks a board id: 1-64 characters of a-z, A-Z, 0-9, '.',
// '_', '-'.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %q must be 1-%d characters", ErrBadID, id, MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q", ErrBadID, id, c)
		}
	}
	return nil
}

// ValidateLabelKey checks one label key.
func ValidateLabelKey(k string) error {
	if k == "" || len(k) > MaxLabelKey {
		return fmt.Errorf("%w: key %q must be 1-%d characters", ErrBadLabel, k, MaxLabelKey)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return fmt.Errorf("%w: key %q: only a-z, 0-9, '.', '_', '-' and '/' are allowed", ErrBadLabel, k)
		}
	}
	return nil
}

// ValidateLabelValue checks one label value.
func ValidateLabelValue(v string) error {
	if len(v) > MaxLabelValue {
		return fmt.Errorf("%w: value %q is longer than %d", ErrBadLabel, v, MaxLabelValue)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: value %q: only printable ASCII is allowed", ErrBadLabel, v)
		}
	}
	return nil
}

// ValidateLabels checks every label of a set.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("%w: %d labels, at most %d", ErrBadLabel, len(labels), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if err := ValidateLabelKey(k); err != nil {
			return err
		}
		if err := ValidateLabelValue(labels[k]); err != nil {
			return fmt.Errorf("label %s: %w", k, err)
		}
	}
	return nil
}
