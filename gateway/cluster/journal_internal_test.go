package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeJournalStream is the rollouts stream as an engine node answers it:
// Info from the stream's leader, the messages a consumer hands out.
type fakeJournalStream struct {
	jetstream.Stream
	state jetstream.StreamState
	msgs  []fakeMsg
}

func (s *fakeJournalStream) Info(context.Context, ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	return &jetstream.StreamInfo{State: s.state}, nil
}

func (s *fakeJournalStream) OrderedConsumer(context.Context, jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	return &fakeJournalConsumer{msgs: s.msgs}, nil
}

type fakeJournalConsumer struct {
	jetstream.Consumer
	msgs []fakeMsg
}

func (c *fakeJournalConsumer) Next(...jetstream.FetchOpt) (jetstream.Msg, error) {
	if len(c.msgs) == 0 {
		return nil, jetstream.ErrNoMessages
	}
	m := c.msgs[0]
	c.msgs = c.msgs[1:]
	return m, nil
}

func journalMsg(t *testing.T, seq uint64, batch string, snapshot bool, kv map[string]string) fakeMsg {
	t.Helper()
	p := journalPart{Batch: batch, Parts: 1, Snapshot: snapshot, KV: map[string]json.RawMessage{}}
	for k, v := range kv {
		p.KV[k] = json.RawMessage(v)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return fakeMsg{seq: seq, data: b}
}

// TestJournalLoadWhole: a new coordinator takes the journal's state only
// from a read of every message from the stream's first to its last. A
// read that skipped messages (a consumer on an engine node catching up
// after a restart jumped from what it had to the newest) is refused
// with ErrJournalTorn: taken, it lost the batch that created a rollout,
// and the new coordinator's snapshot wrote that loss back for good (the
// soak's rollout that vanished, four boards never updated).
func TestJournalLoadWhole(t *testing.T) {
	snap := func(seq uint64) fakeMsg { return journalMsg(t, seq, "gw1-a-1", true, map[string]string{"r/old": `{}`}) }
	created := func(seq uint64) fakeMsg {
		return journalMsg(t, seq, "gw1-a-2", false, map[string]string{"r/new": `{}`, "b/new/b1": `{"phase":"pending"}`})
	}
	step := func(seq uint64) fakeMsg {
		return journalMsg(t, seq, "gw1-a-3", false, map[string]string{"b/new/b1": `{"phase":"staged"}`})
	}
	st := func(first, last, msgs uint64) jetstream.StreamState {
		return jetstream.StreamState{FirstSeq: first, LastSeq: last, Msgs: msgs}
	}
	for _, tc := range []struct {
		name  string
		state jetstream.StreamState
		msgs  []fakeMsg
		torn  bool
	}{
		{"whole", st(5, 7, 3), []fakeMsg{snap(5), created(6), step(7)}, false},
		{"the creation skipped", st(5, 7, 3), []fakeMsg{snap(5), step(7)}, true},
		{"the head skipped", st(5, 7, 3), []fakeMsg{created(6), step(7)}, true},
		{"no message where some were", st(8, 7, 0), nil, true},
		{"a new journal", st(0, 0, 0), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Journal{stream: &fakeJournalStream{state: tc.state, msgs: tc.msgs}, state: map[string]json.RawMessage{}}
			err := j.load(context.Background())
			if tc.torn {
				if !errors.Is(err, ErrJournalTorn) {
					t.Fatalf("load = %v, want ErrJournalTorn (state %v)", err, j.state)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.msgs) > 0 && (j.state["r/new"] == nil || string(j.state["b/new/b1"]) != `{"phase":"staged"}`) {
				t.Fatalf("state %v", j.state)
			}
		})
	}
}
