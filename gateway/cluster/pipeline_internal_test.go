package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// happening is happening seq of board b, at t.
func happening(b string, seq uint16, t time.Time) fleet.Event {
	return fleet.Event{N: uint64(seq), Board: b, Type: fleet.EventHappening, Kind: "touch", Seq: seq, Time: t,
		Data: json.RawMessage(fmt.Sprintf(`{"seq":%d,"t_ms":%d}`, seq, seq))}
}

// windowInFlight returns the events of a gateway with happenings 1-4 of
// board "b" published and none answered, and the board's flight.
func windowInFlight() (*events, *flight) {
	c := &Cluster{name: "gw1", log: slog.New(slog.DiscardHandler)}
	ev := newEvents(c)
	c.ev = ev
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for i := range 4 {
		ev.appendLocked("b", happening("b", uint16(i+1), time.Now()))
	}
	f := ev.flightLocked("b")
	f.sent, f.inFlight = 4, 4 // as startLocked leaves them
	return ev, f
}

// TestWindowFailedInTheMiddle: when a publish of a board's window fails
// while those after it are acknowledged, nothing more of the board is
// sent until every publish of the window is answered; then the board's
// events go again from the first unacknowledged one (the engine drops
// the repeats by message id), and an event stored after a later one is
// counted.
func TestWindowFailedInTheMiddle(t *testing.T) {
	ev, f := windowInFlight()

	ev.acked(ackResult{board: "b", pos: 1, err: jetstream.ErrAsyncPublishTimeout})
	ev.acked(ackResult{board: "b", pos: 0})
	ev.acked(ackResult{board: "b", pos: 3})
	ev.mu.Lock()
	if !f.failed || f.sent != 3 || len(ev.queues["b"]) != 3 {
		t.Fatalf("while the window is answered: failed %v, sent %d, queued %d; want true, 3, 3", f.failed, f.sent, len(ev.queues["b"]))
	}
	ev.mu.Unlock()
	ev.acked(ackResult{board: "b", pos: 2})
	ev.mu.Lock()
	if f.failed || f.sent != 0 || f.base != 1 || len(ev.queues["b"]) != 3 || ev.queues["b"][0].Seq != 2 || f.retryAt.IsZero() {
		t.Fatalf("window answered: failed %v, sent %d, base %d, queued %d; want to send again from seq 2", f.failed, f.sent, f.base, len(ev.queues["b"]))
	}
	f.sent, f.inFlight = 3, 3 // sent again: 2, 3, 4
	ev.mu.Unlock()
	ev.acked(ackResult{board: "b", pos: 1})            // stored only now: after 3 and 4
	ev.acked(ackResult{board: "b", pos: 2, dup: true}) // stored before
	ev.acked(ackResult{board: "b", pos: 3, dup: true})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.queues["b"]) != 0 || ev.queued != 0 || ev.pub.Load() != 4 || ev.outOfOrder != 1 || ev.flights["b"] != nil {
		t.Fatalf("queued %d (%d), published %d, out of order %d; want 0, 4, 1", len(ev.queues["b"]), ev.queued, ev.pub.Load(), ev.outOfOrder)
	}
}

// TestStandDownFromLostBoard: a gateway whose board another gateway took
// over sends none of the board's queued events any more (the soak saw
// the old owner's backlog interleave with the new owner's catch-up); it
// keeps the happenings and restarts as a standby gateway does.
func TestStandDownFromLostBoard(t *testing.T) {
	c := &Cluster{name: "gw1", boot: "run1", log: slog.New(slog.DiscardHandler), loaded: true, standby: map[string]bool{},
		records: map[string]*record{"lan-1": {View: fleet.BoardView{ID: "lan-1", Gateway: "gw2"}, Boot: "run9"}}}
	ev := newEvents(c)
	c.ev = ev
	now := time.Now()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.appendLocked("lan-1", happening("lan-1", 1, now), fleet.Event{Board: "lan-1", Type: fleet.EventState, Kind: "leds"},
		happening("lan-1", 2, now))
	var total int
	var wg sync.WaitGroup
	ev.startLocked(context.Background(), now, &total, make(chan ackResult, 1), &wg) // c.js is nil: a publish panics
	if total != 0 || len(ev.queues["lan-1"]) != 0 || ev.queued != 0 {
		t.Fatalf("in flight %d, queued %d (%d); want none", total, len(ev.queues["lan-1"]), ev.queued)
	}
	if k := ev.standby["lan-1"]; len(k) != 2 || k[0].Seq != 1 || k[1].Seq != 2 {
		t.Fatalf("kept %+v, want happenings 1 and 2", k)
	}
	// A board's next event that comes before the send loop stood down
	// is kept after what was queued.
	ev.appendLocked("lan-1", happening("lan-1", 3, now))
	ev.mu.Unlock()
	ev.queue(context.Background(), happening("lan-1", 4, now))
	ev.mu.Lock()
	if k := ev.standby["lan-1"]; len(k) != 4 || k[2].Seq != 3 || k[3].Seq != 4 || len(ev.queues["lan-1"]) != 0 {
		t.Fatalf("kept %+v, queued %d; want happenings 1 to 4, none queued", k, len(ev.queues["lan-1"]))
	}
}

// ownedPublisher is a publisher on its own embedded engine that owns
// board "b", with window events of a board in flight at most.
func ownedPublisher(ctx context.Context, t testing.TB, window int) *events {
	t.Helper()
	eng, err := OpenEngine(ctx, EngineOptions{Name: "gw1", URL: Embedded, Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	c := &Cluster{o: Options{EventsMaxAge: time.Hour, EventsMaxBytes: 1 << 28}, eng: eng, name: "gw1", boot: "run1",
		log: slog.New(slog.DiscardHandler), nc: eng.Conn(), js: eng.JetStream(), loaded: true, standby: map[string]bool{},
		records: map[string]*record{"b": {View: fleet.BoardView{ID: "b", Gateway: "gw1"}, Boot: "run1"}}}
	c.ev = newEvents(c)
	c.ev.window = window
	if err := c.ev.setup(ctx); err != nil {
		t.Fatal(err)
	}
	return c.ev
}

// publishAll queues n happenings of board "b" and waits until ev's send
// loop published them all.
func publishAll(ctx context.Context, t testing.TB, ev *events, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); ev.send(ctx) }()
	defer func() { cancel(); <-done }()
	start := ev.pub.Load()
	now := time.Now()
	ev.mu.Lock()
	for i := range n {
		ev.appendLocked("b", happening("b", uint16(i%65535+1), now.Add(time.Duration(i))))
	}
	ev.mu.Unlock()
	ev.kickSend()
	for ev.pub.Load() < start+uint64(n) {
		select {
		case <-ctx.Done():
			t.Fatalf("published %d of %d", ev.pub.Load()-start, n)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestWindowKeepsOrder: a board's events published many at a time are
// stored once each, in their order.
func TestWindowKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev := ownedPublisher(ctx, t, boardWindow)
	const n = 200
	publishAll(ctx, t, ev, n)
	cons, err := ev.streamOf().OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
		var e fleet.Event
		if err := json.Unmarshal(m.Data(), &e); err != nil || e.Seq != uint16(i+1) {
			t.Fatalf("stream's event %d is seq %d (%v)", i+1, e.Seq, err)
		}
	}
	if in, err := ev.streamOf().Info(ctx); err != nil || in.State.Msgs != n {
		t.Fatalf("stream holds %v events (%v), want %d", in.State.Msgs, err, n)
	}
}

// BenchmarkPublishWindow: events a second one board's events reach the
// stream, one in flight at a time against boardWindow.
func BenchmarkPublishWindow(b *testing.B) {
	for _, w := range []int{1, boardWindow} {
		b.Run(fmt.Sprintf("inflight=%d", w), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ev := ownedPublisher(ctx, b, w)
			b.ResetTimer()
			publishAll(ctx, b, ev, b.N)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestConnectionChangeSendsWindowAgain: when the engine connection drops
// or comes back, a board's publishes still in flight are given up at once
// and its events go again from the first unacknowledged one, before any
// later event; answers to the old publishes are ignored. Before, the old
// publishes waited 10 s for their acknowledgement while the board's next
// events were stored on the new connection, and then went again after
// them (the soak's reorders at an engine node's kill).
func TestConnectionChangeSendsWindowAgain(t *testing.T) {
	ev, f := windowInFlight()
	ev.acked(ackResult{board: "b", pos: 0}) // seq 1 stored; 2-4 not answered
	ev.mu.Lock()
	ev.resendLocked() // the connection dropped
	if f.sent != 0 || f.inFlight != 0 || f.failed || len(ev.queues["b"]) != 3 || ev.queues["b"][0].Seq != 2 {
		t.Fatalf("after the connection changed: sent %d, in flight %d, failed %v, queued %d; want the window again from seq 2",
			f.sent, f.inFlight, f.failed, len(ev.queues["b"]))
	}
	f.sent, f.inFlight = 3, 3 // sent again: 2, 3, 4
	ev.mu.Unlock()
	// The old connection's answers come late: ignored.
	ev.acked(ackResult{board: "b", pos: 1, err: jetstream.ErrAsyncPublishTimeout})
	ev.acked(ackResult{board: "b", pos: 3})
	ev.mu.Lock()
	if f.failed || f.inFlight != 3 || len(ev.queues["b"]) != 3 {
		t.Fatalf("an old answer counted: failed %v, in flight %d, queued %d", f.failed, f.inFlight, len(ev.queues["b"]))
	}
	ev.mu.Unlock()
	ev.acked(ackResult{board: "b", gen: 1, pos: 1})
	ev.acked(ackResult{board: "b", gen: 1, pos: 2, dup: true})
	ev.acked(ackResult{board: "b", gen: 1, pos: 3})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.queues["b"]) != 0 || ev.outOfOrder != 0 {
		t.Fatalf("queued %d, out of order %d; want everything published in order", len(ev.queues["b"]), ev.outOfOrder)
	}
}
