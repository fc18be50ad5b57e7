package rollout

import (
	"context"
	"sync"
)

// journal writes records durably with group commits: writers that arrive
// while a transaction is being written wait and go together in the next
// one. put returns once the records are on disk.
type journal struct {
	bk Store

	mu      sync.Mutex
	pending map[string]any
	waiters []chan error
	writing bool
}

func newJournal(st Store) *journal {
	return &journal{bk: st, pending: map[string]any{}}
}

// put writes kv (nil values delete) and waits until it is durable.
func (j *journal) put(ctx context.Context, kv map[string]any) error {
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
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The write may still land; callers treat that as not done and
		// redo the (idempotent) step after reading the store again.
		return ctx.Err()
	}
}

// flush writes batches until nothing waits. It is started by put and
// ends on its own.
func (j *journal) flush() {
	for {
		j.mu.Lock()
		if len(j.waiters) == 0 {
			j.writing = false
			j.mu.Unlock()
			return
		}
		batch, waiters := j.pending, j.waiters
		j.pending, j.waiters = map[string]any{}, nil
		j.mu.Unlock()
		err := j.bk.Batch(batch)
		for _, w := range waiters {
			w <- err
		}
	}
}
