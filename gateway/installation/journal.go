package installation

import "sync"

// journal writes records durably with group commits: writes that arrive
// while a transaction is being written wait and go together in the next
// one, so twenty boards finishing at once cost a few transactions, not
// twenty. batch returns once its records are on disk (or failed).
type journal struct {
	st Store

	mu      sync.Mutex
	pending map[string]any
	waiters []chan error
	writing bool
}

func (j *journal) batch(kv map[string]any) error {
	return <-j.add(kv)
}

// add queues kv and returns at once; the channel tells when it is on
// disk. Records queued later are never written before it: each
// transaction takes everything queued so far.
func (j *journal) add(kv map[string]any) <-chan error {
	done := make(chan error, 1)
	j.mu.Lock()
	if j.pending == nil {
		j.pending = map[string]any{}
	}
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

func (j *journal) flush() {
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
