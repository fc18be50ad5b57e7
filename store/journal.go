package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Batcher writes every key or none (a nil value deletes), durably, as
// Bucket.Batch does.
type Batcher interface {
	Batch(puts map[string]any) error
}

// Journal writes records durably with group commits: records that arrive
// while a transaction is being written wait and go together in the next
// one, so twenty writers finishing at once cost a few transactions, not
// twenty. Records queued later are never written before ones queued
// earlier: each transaction takes everything queued so far, and a key
// queued twice keeps its latest value. The zero Journal is not usable;
// make one with NewJournal. Its methods are safe for concurrent use.
//
// Over a store that can be read (a Reader, as Bucket is), the journal is
// also a view of it that reads its own writes: Get and Scan see what was
// queued and is not on disk yet, and Batch writes in the same order as
// Add. A caller that queues records without waiting for them (Add) can
// read them back at once, through the journal.
type Journal struct {
	st Batcher

	mu      sync.Mutex
	pending map[string]any
	waiters []chan error
	writing bool
	// unsynced holds every key queued and not yet written (pending, or
	// in the transaction being written), with its latest value and the
	// number of the Add that queued it.
	unsynced map[string]queued
	adds     uint64
}

type queued struct {
	v   any
	add uint64
}

// Reader reads a store as Bucket does.
type Reader interface {
	Get(key string, v any) (bool, error)
	Scan(from, to string, reverse bool, fn func(key string, raw []byte) (bool, error)) error
}

// ErrNotReadable: Get or Scan on a journal whose store is not a Reader.
var ErrNotReadable = errors.New("store: the journal's store cannot be read")

// NewJournal returns a journal writing to st.
func NewJournal(st Batcher) *Journal {
	return &Journal{st: st, pending: map[string]any{}, unsynced: map[string]queued{}}
}

// Add queues kv and returns at once; the channel (buffered) receives
// the transaction's error, nil once kv is on disk.
func (j *Journal) Add(kv map[string]any) <-chan error {
	done := make(chan error, 1)
	j.mu.Lock()
	j.adds++
	for k, v := range kv {
		j.pending[k] = v
		j.unsynced[k] = queued{v, j.adds}
	}
	j.waiters = append(j.waiters, done)
	if !j.writing {
		j.writing = true
		go j.flush()
	}
	j.mu.Unlock()
	return done
}

// Write queues kv and waits until it is on disk, or ctx ends. When ctx
// ends first the write may still land: callers treat it as not done and
// redo their (idempotent) step after reading the store again.
func (j *Journal) Write(ctx context.Context, kv map[string]any) error {
	select {
	case err := <-j.Add(kv):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush writes transactions until nothing waits. Add starts it; it ends
// on its own.
func (j *Journal) flush() {
	for {
		j.mu.Lock()
		if len(j.waiters) == 0 {
			j.writing = false
			j.mu.Unlock()
			return
		}
		kv, waiters, upTo := j.pending, j.waiters, j.adds
		j.pending, j.waiters = map[string]any{}, nil
		j.mu.Unlock()
		err := j.st.Batch(kv)
		// Written (or failed: then the store holds what it held, and
		// reads show that): readers go to the store for these keys,
		// except those queued again since.
		j.mu.Lock()
		for k := range kv {
			if q, ok := j.unsynced[k]; ok && q.add <= upTo {
				delete(j.unsynced, k)
			}
		}
		j.mu.Unlock()
		for _, w := range waiters {
			w <- err
		}
	}
}

// Batch writes kv and waits until it is on disk, after everything queued
// before it: Write without a context.
func (j *Journal) Batch(kv map[string]any) error { return j.Write(context.Background(), kv) }

// Get reads key into v as the store's Get does, seeing a value queued and
// not yet written (a queued nil reads as absent).
func (j *Journal) Get(key string, v any) (bool, error) {
	r, ok := j.st.(Reader)
	if !ok {
		return false, ErrNotReadable
	}
	j.mu.Lock()
	q, queued := j.unsynced[key]
	j.mu.Unlock()
	if !queued {
		return r.Get(key, v)
	}
	if q.v == nil {
		return false, nil
	}
	raw, err := json.Marshal(q.v)
	if err != nil {
		return false, fmt.Errorf("store: encode %s: %w", key, err)
	}
	return true, json.Unmarshal(raw, v)
}

// Scan calls fn as the store's Scan does, over the store's keys merged
// with the keys queued and not yet written in [from, to): a queued value
// is seen instead of the stored one, and a queued nil hides the key.
func (j *Journal) Scan(from, to string, reverse bool, fn func(key string, raw []byte) (bool, error)) error {
	r, ok := j.st.(Reader)
	if !ok {
		return ErrNotReadable
	}
	type kv struct {
		k   string
		raw []byte // nil: deleted
	}
	var over []kv
	j.mu.Lock()
	for k, q := range j.unsynced {
		if k < from || (to != "" && k >= to) {
			continue
		}
		e := kv{k: k}
		if q.v != nil {
			raw, err := json.Marshal(q.v)
			if err != nil {
				j.mu.Unlock()
				return fmt.Errorf("store: encode %s: %w", k, err)
			}
			e.raw = raw
		}
		over = append(over, e)
	}
	j.mu.Unlock()
	if len(over) == 0 {
		return r.Scan(from, to, reverse, fn)
	}
	// before says whether a comes before b in the scan's order.
	before := func(a, b string) bool { return (a < b) != reverse && a != b }
	slices.SortFunc(over, func(a, b kv) int {
		if reverse {
			return strings.Compare(b.k, a.k)
		}
		return strings.Compare(a.k, b.k)
	})
	stopped := false
	// emit gives fn the queued keys that come before key (all of them
	// when key is ""), and reports whether the scan goes on.
	emit := func(key string, all bool) (bool, error) {
		for len(over) > 0 && (all || before(over[0].k, key)) {
			e := over[0]
			over = over[1:]
			if e.raw == nil {
				continue
			}
			if more, err := fn(e.k, e.raw); err != nil || !more {
				stopped = true
				return false, err
			}
		}
		return true, nil
	}
	err := r.Scan(from, to, reverse, func(key string, raw []byte) (bool, error) {
		if more, err := emit(key, false); err != nil || !more {
			return false, err
		}
		if len(over) > 0 && over[0].k == key {
			e := over[0]
			over = over[1:]
			if e.raw == nil {
				return true, nil
			}
			raw = e.raw
		}
		more, err := fn(key, raw)
		if err != nil || !more {
			stopped = true
		}
		return more, err
	})
	if err != nil || stopped {
		return err
	}
	_, err = emit("", true)
	return err
}
