package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// fakeMsg is a stream message: only what readConsumer reads.
type fakeMsg struct {
	jetstream.Msg
	seq  uint64
	data []byte
}

func (m fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}
func (m fakeMsg) Data() []byte         { return m.data }
func (m fakeMsg) Headers() nats.Header { return nats.Header{} }

// fakeIter hands out msgs, then what fail says: a timeout each time (a
// consumer that fell silent) or an error (one that failed).
type fakeIter struct {
	mu   sync.Mutex
	msgs []fakeMsg
	fail error
}

func (it *fakeIter) Next(...jetstream.NextOpt) (jetstream.Msg, error) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if len(it.msgs) == 0 {
		return nil, it.fail
	}
	m := it.msgs[0]
	it.msgs = it.msgs[1:]
	return m, nil
}
func (it *fakeIter) Stop()  {}
func (it *fakeIter) Drain() {}

// TestReadConsumerNeverSilent: a consumer that hands out nothing more
// while the stream holds events after the last one handed out (seen when
// an engine node died under a watch) is left for a new one, started
// after the last event handed out; one that is silent because nothing
// happened is kept; one that fails is left too. Before, the watch stayed
// on the silent consumer for good.
func TestReadConsumerNeverSilent(t *testing.T) {
	msg := func(seq uint64) fakeMsg {
		b, _ := json.Marshal(fleet.Event{Board: "b1", Type: fleet.EventHappening, Seq: uint16(seq)})
		return fakeMsg{seq: seq, data: b}
	}
	for _, tc := range []struct {
		name     string
		last     uint64 // the stream's last sequence
		fail     error
		wantNext uint64 // what readConsumer returns; 0: it keeps reading
	}{
		{"silent while the stream went on", 9, nats.ErrTimeout, 4},
		{"silent because nothing happened", 3, nats.ErrTimeout, 0},
		{"failed", 3, errors.New("consumer deleted"), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &events{c: &Cluster{log: slog.New(slog.DiscardHandler)}}
			it := &fakeIter{msgs: []fakeMsg{msg(1), msg(2), msg(3)}, fail: tc.fail}
			info := func() (*jetstream.StreamInfo, error) {
				return &jetstream.StreamInfo{State: jetstream.StreamState{FirstSeq: 1, LastSeq: tc.last}}, nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := make(chan streamEvent, 8)
			done := make(chan uint64, 1)
			go func() { done <- ev.readConsumer(ctx, it, 1, time.Millisecond, info, out) }()
			for want := uint64(1); want <= 3; want++ {
				if se := <-out; se.e.N != want {
					t.Fatalf("event %d handed out as %d", want, se.e.N)
				}
			}
			if tc.wantNext == 0 {
				// Still reading: a new message is handed out.
				it.mu.Lock()
				it.msgs = append(it.msgs, msg(4))
				it.mu.Unlock()
				if se := <-out; se.e.N != 4 {
					t.Fatalf("got %d, want 4", se.e.N)
				}
				select {
				case n := <-done:
					t.Fatalf("left a consumer that was only quiet (next %d)", n)
				default:
				}
				cancel()
				<-done
				return
			}
			if n := <-done; n != tc.wantNext {
				t.Fatalf("next = %d, want %d", n, tc.wantNext)
			}
		})
	}
}
