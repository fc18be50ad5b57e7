package cluster

// The rollout journal: the coordinator's records (rollout.Store) kept in
// the HOLO_ROLLOUTS stream as a log of batches. A batch is written as one
// or more parts, each a message; a reader applies a batch only when it
// has every part, so a coordinator killed in the middle of a batch leaves
// it unapplied, as a bbolt transaction would be. Every part is published
// with the stream's expected last sequence: a coordinator that lost its
// lease (another has written since) cannot write any more (ErrFenced).
// A new coordinator reads the log, writes its state as one snapshot
// batch, and purges what came before it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrFenced: another coordinator has written the journal since this one
// read it; this one must stop.
var ErrFenced = errors.New("cluster: the rollout journal was written by another coordinator")

const (
	subjectJournal = "holo.rollouts.journal"
	// partBytes bounds one part of a batch (the engine's messages carry
	// 1 MiB by default).
	partBytes = 256 << 10
)

// journalPart is one message of the journal.
type journalPart struct {
	Batch    string                     `json:"batch"`
	Part     int                        `json:"part"`
	Parts    int                        `json:"parts"`
	Snapshot bool                       `json:"snapshot,omitempty"` // the batch replaces every key
	KV       map[string]json.RawMessage `json:"kv"`                 // null deletes
}

// Journal is rollout.Store over the rollouts stream.
type Journal struct {
	js     jetstream.JetStream
	stream jetstream.Stream

	mu    sync.Mutex
	state map[string]json.RawMessage
	last  uint64 // the stream's last sequence as this journal knows it
	seq   uint64 // batch counter
	id    string
}

// openJournal creates or binds the stream and reads the journal.
func openJournal(ctx context.Context, c *Cluster) (*Journal, error) {
	cfg := jetstream.StreamConfig{Name: StreamRollouts, Description: "holo rollout coordinator's journal",
		Subjects: []string{subjectJournal}, Retention: jetstream.LimitsPolicy, Replicas: c.eng.Replicas(),
		Storage: jetstream.FileStorage}
	j := &Journal{js: c.js, state: map[string]json.RawMessage{}, id: c.name + "-" + c.boot}
	err := retry(ctx, c.log, "stream "+StreamRollouts, func(ctx context.Context) error {
		st, err := c.js.CreateOrUpdateStream(ctx, cfg)
		j.stream = st
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := j.load(ctx); err != nil {
		return nil, err
	}
	return j, nil
}

// ErrJournalTorn: reading the journal skipped messages; the coordinator
// tries again rather than take (and snapshot) a state that lost batches.
var ErrJournalTorn = errors.New("cluster: the rollout journal read skipped messages")

// load reads every complete batch of the stream. It reads every message
// from the stream's first to its last: the journal has no holes (only
// its head is purged, behind a snapshot), so a read whose sequence
// numbers do not follow one another lost batches (a consumer on an
// engine node that was catching up after a restart jumped ahead), and
// its state is not taken (ErrJournalTorn). Taken, it was written back as
// the new coordinator's snapshot: the soak saw a rollout vanish so, its
// boards left half updated.
func (j *Journal) load(ctx context.Context) error {
	info, err := j.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("cluster: journal: %w", err)
	}
	j.last = info.State.LastSeq
	if info.State.Msgs == 0 {
		if info.State.LastSeq > 0 {
			// Never purged whole: a snapshot is always left.
			return fmt.Errorf("%w: no message, last sequence %d", ErrJournalTorn, info.State.LastSeq)
		}
		return nil
	}
	cons, err := j.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("cluster: journal: %w", err)
	}
	var open []journalPart // the parts of the batch being read
	var prev uint64        // the last sequence read
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return fmt.Errorf("cluster: journal: reading: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("cluster: journal: %w", err)
		}
		switch seq := md.Sequence.Stream; {
		case prev == 0 && seq > info.State.FirstSeq:
			return fmt.Errorf("%w: the first message read is %d, the stream's first %d", ErrJournalTorn, seq, info.State.FirstSeq)
		case prev != 0 && seq != prev+1:
			return fmt.Errorf("%w: %d read after %d", ErrJournalTorn, seq, prev)
		}
		prev = md.Sequence.Stream
		var p journalPart
		if json.Unmarshal(m.Data(), &p) == nil {
			if len(open) > 0 && open[0].Batch != p.Batch {
				open = nil // an unfinished batch: never applied
			}
			if p.Part == len(open) {
				open = append(open, p)
			}
			if len(open) == p.Parts {
				j.apply(open)
				open = nil
			}
		}
		if md.Sequence.Stream >= j.last {
			return nil
		}
	}
}

func (j *Journal) apply(parts []journalPart) {
	if parts[0].Snapshot {
		clear(j.state)
	}
	for _, p := range parts {
		for k, v := range p.KV {
			if string(v) == "null" {
				delete(j.state, k)
			} else {
				j.state[k] = v
			}
		}
	}
}

// Keys implements rollout.Store.
func (j *Journal) Keys() ([]string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	keys := make([]string, 0, len(j.state))
	for k := range j.state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// Get implements rollout.Store.
func (j *Journal) Get(key string, v any) (bool, error) {
	j.mu.Lock()
	raw, ok := j.state[key]
	j.mu.Unlock()
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}

// Batch implements rollout.Store: the puts are durable in the stream (on
// as many replicas as it has) when it returns.
func (j *Journal) Batch(puts map[string]any) error {
	kv := make(map[string]json.RawMessage, len(puts))
	for k, v := range puts {
		if v == nil {
			kv[k] = json.RawMessage("null")
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("cluster: journal: encode %s: %w", k, err)
		}
		kv[k] = raw
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return j.write(ctx, kv, false)
}

// write appends one batch and applies it.
func (j *Journal) write(ctx context.Context, kv map[string]json.RawMessage, snapshot bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	batch := j.id + "-" + strconv.FormatUint(j.seq, 10)
	var parts []journalPart
	cur := journalPart{Batch: batch, Snapshot: snapshot, KV: map[string]json.RawMessage{}}
	size := 0
	for _, k := range slices.Sorted(mapsKeys(kv)) {
		v := kv[k]
		if size > 0 && size+len(k)+len(v) > partBytes {
			parts = append(parts, cur)
			cur = journalPart{Batch: batch, Snapshot: snapshot, KV: map[string]json.RawMessage{}}
			size = 0
		}
		cur.KV[k] = v
		size += len(k) + len(v) + 8
	}
	parts = append(parts, cur)
	for i := range parts {
		parts[i].Part, parts[i].Parts = i, len(parts)
		data, err := json.Marshal(parts[i])
		if err != nil {
			return err
		}
		m := nats.NewMsg(subjectJournal)
		m.Data = data
		ack, err := j.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(j.last))
		if err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				return fmt.Errorf("%w: %v", ErrFenced, err)
			}
			return fmt.Errorf("cluster: journal: %w", err)
		}
		j.last = ack.Sequence
	}
	j.apply(parts)
	return nil
}

// compact writes the whole state as one snapshot batch and purges the
// messages before it.
func (j *Journal) compact(ctx context.Context) error {
	j.mu.Lock()
	kv := make(map[string]json.RawMessage, len(j.state))
	for k, v := range j.state {
		kv[k] = v
	}
	first := j.last + 1
	j.mu.Unlock()
	if err := j.write(ctx, kv, true); err != nil {
		return err
	}
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSequence(first)); err != nil {
		return fmt.Errorf("cluster: journal: purge: %w", err)
	}
	return nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
