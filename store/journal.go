package store

import (
	"context"
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
type Journal struct {
	st Batcher

	mu      sync.Mutex
	pending map[string]any
	waiters []chan error
	writing bool
}

// NewJournal returns a journal writing to st.
func NewJournal(st Batcher) *Journal {
	return &Journal{st: st, pending: map[string]any{}}
}

// Add queues kv and returns at once; the channel (buffered) receives
// the transaction's error, nil once kv is on disk.
func (j *Journal) Add(kv map[string]any) <-chan error {
	done := make(chan error, 1)
	j.mu.Lock()
	for k, v := range kv {
		j.pending[k] = v
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
		kv, waiters := j.pending, j.waiters
		j.pending, j.waiters = map[string]any{}, nil
		j.mu.Unlock()
		err := j.st.Batch(kv)
		for _, w := range waiters {
			w <- err
		}
	}
}
