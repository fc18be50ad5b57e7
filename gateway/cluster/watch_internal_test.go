package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

type fakeEntry struct {
	jetstream.KeyValueEntry
	key string
	val []byte
	rev uint64
}

func (e fakeEntry) Key() string                     { return e.key }
func (e fakeEntry) Value() []byte                   { return e.val }
func (e fakeEntry) Revision() uint64                { return e.rev }
func (e fakeEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

type fakeWatcher struct{ ch chan jetstream.KeyValueEntry }

func (w fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w fakeWatcher) Stop() error                             { return nil }

// fakeKV hands out, at each WatchAll, the entries it holds then the
// end-of-initial marker, and nothing more: a watcher that went silent.
type fakeKV struct {
	jetstream.KeyValue
	mu      sync.Mutex
	entries []fakeEntry
	watches int
}

func (kv *fakeKV) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.watches++
	ch := make(chan jetstream.KeyValueEntry, len(kv.entries)+1)
	for _, e := range kv.entries {
		ch <- e
	}
	ch <- nil
	return fakeWatcher{ch}, nil
}

// TestBoardsWatchStuck: a records watcher that stops handing out updates
// without ending is watched again once it lags behind a record this
// gateway wrote for stuckAfter, and the records it missed arrive. It was
// never watched again: after an engine node died, a board taken over by
// another gateway stayed offline here, as its old record said.
func TestBoardsWatchStuck(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec, _ := json.Marshal(record{View: fleet.BoardView{ID: "b1", Gateway: "gw2", Online: true}})
	kv := &fakeKV{}
	c := &Cluster{o: Options{Heartbeat: time.Millisecond}, clk: clk, log: slog.New(slog.DiscardHandler), kvBoards: kv,
		records: map[string]*record{}, wake: make(chan struct{}, 1), ownChanged: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.watchBoards(ctx) }()

	// The first watcher has read the (empty) bucket and fell silent.
	for {
		c.mu.Lock()
		loaded := c.loaded
		c.mu.Unlock()
		if loaded {
			break
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	// This gateway wrote revision 7; the watcher has shown nothing of it.
	c.mu.Lock()
	c.boardsWritten, c.boardsWrittenAt = 7, clk.Now()
	c.mu.Unlock()
	kv.mu.Lock()
	kv.entries = []fakeEntry{{key: "b1", val: rec, rev: 7}}
	watches := kv.watches
	kv.mu.Unlock()
	if c.boardsWatchBehind() {
		t.Fatal("behind before stuckAfter passed")
	}
	clk.Advance(c.stuckAfter() + time.Millisecond)
	for {
		c.mu.Lock()
		r := c.records["b1"]
		c.mu.Unlock()
		if r != nil && r.View.Gateway == "gw2" {
			break
		}
		select {
		case <-time.After(5 * time.Second):
			t.Fatalf("the stuck watcher was not replaced (watches %d, from %d)", kv.watches, watches)
		case <-time.After(time.Millisecond): // polling a condition
		}
	}
	if c.boardsWatchBehind() {
		t.Error("still behind after the new watcher showed revision 7")
	}
	cancel()
	<-done
}
