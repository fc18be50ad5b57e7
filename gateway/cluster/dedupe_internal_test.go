package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// publisher is one gateway's events publisher on a shared engine.
func publisher(ctx context.Context, t *testing.T, e *Engine, name, boot string) *events {
	t.Helper()
	c := &Cluster{o: Options{EventsMaxAge: time.Hour, EventsMaxBytes: 1 << 24}, eng: e, name: name, boot: boot,
		log: slog.New(slog.DiscardHandler), nc: e.Conn(), js: e.JetStream()}
	c.ev = newEvents(c)
	if err := c.ev.setup(ctx); err != nil {
		t.Fatal(err)
	}
	return c.ev
}

// publishAcked publishes e as the send loop does and waits for the
// engine's acknowledgement (stored, or dropped as a repeat).
func publishAcked(t *testing.T, ev *events, e fleet.Event) {
	t.Helper()
	fut, err := ev.publish(e)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fut.Ok():
	case err := <-fut.Err():
		t.Fatalf("%s's publish of %+v: %v", ev.c.name, e, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s's publish of %+v: no acknowledgement", ev.c.name, e)
	}
}

// readBack reads back the whole events stream as "gateway:type seq".
func readBack(ctx context.Context, t *testing.T, ev *events) []string {
	t.Helper()
	st := ev.streamOf()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for n := info.State.FirstSeq; n <= info.State.LastSeq && n > 0; n++ {
		m, err := st.GetMsg(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		var e fleet.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		gw := m.Subject[len(subjectEvents)+1:]
		gw = gw[:len(gw)-len(key(e.Board))-1]
		if e.Type == fleet.EventHappening {
			out = append(out, fmt.Sprintf("%s:%d", gw, e.Seq))
		} else {
			out = append(out, gw+":"+e.Type)
		}
	}
	return out
}

// TestHappeningPublishedOnce: two gateways that both take themselves for
// a board's owner for a moment (the old owner has not read the record
// that took the board from it yet, and the new one publishes what it
// kept of the board that the stream lacked when it read it) publish the
// board's happenings under the board's own message ids: the stream holds
// each once, in the board's order, whoever sent it first. Before, each
// gateway's ids were its own, and the stream held happenings 2 and 3
// twice (the soak's reorders around a change of owner). A later boot's
// happening of the same seq is another happening. A restart both saw
// after the same happening is stored once too (each gateway's own id
// stored it twice); states stay each gateway's own.
func TestHappeningPublishedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng, err := OpenEngine(ctx, EngineOptions{Name: "gw1", URL: Embedded, Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	old := publisher(ctx, t, eng, "gw1", "run1")
	taker := publisher(ctx, t, eng, "gw2", "run1")
	h := func(n uint64, seq uint16, uptime int) fleet.Event {
		// Each gateway numbers the board's events its own way (N).
		return fleet.Event{N: n, Board: "lan-1", Type: fleet.EventHappening, Kind: "scene_started", Seq: seq,
			Data: json.RawMessage(fmt.Sprintf(`{"event":"scene_started","seq":%d,"t_ms":%d,"name":"x"}`, seq, uptime))}
	}
	restarted := func(n uint64) fleet.Event { return fleet.Event{N: n, Board: "lan-1", Type: fleet.EventRestarted} }
	// Both fleet cores see every happening and the restart, each
	// numbering them its own way (queue notes them).
	see := func(ev *events, es ...fleet.Event) {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for _, e := range es {
			ev.noteLocked(e)
		}
	}
	see(old, h(10, 1, 1000), h(11, 2, 1100), h(12, 3, 1200), h(13, 4, 1300), h(17, 5, 1400), restarted(14))
	see(taker, h(69, 1, 1000), h(70, 2, 1100), h(71, 3, 1200), h(72, 4, 1300), h(73, 5, 1400), restarted(74))

	publishAcked(t, old, h(10, 1, 1000))
	publishAcked(t, old, h(11, 2, 1100))
	// gw2 read the stream when it held happening 1 only: it publishes 2
	// and 3 as missing, while gw1 still sends 3 and 4.
	publishAcked(t, taker, h(70, 2, 1100))
	publishAcked(t, taker, h(71, 3, 1200))
	publishAcked(t, old, h(12, 3, 1200))
	publishAcked(t, old, h(13, 4, 1300))
	publishAcked(t, taker, h(72, 4, 1300))
	publishAcked(t, taker, h(73, 5, 1400))
	// The board restarts; both gateways saw it after happening 5: the
	// restart is stored once, and the new boot's happening 1 is not the
	// old one's.
	publishAcked(t, old, restarted(14))
	publishAcked(t, taker, restarted(74))
	publishAcked(t, taker, h(75, 1, 40))
	publishAcked(t, old, h(15, 1, 40))
	// The same happening's data as another transport or gateway encodes
	// it (spacing, order of fields) is the same happening.
	e := h(76, 2, 90)
	publishAcked(t, taker, e)
	e.N, e.Data = 16, json.RawMessage(`{"t_ms": 90, "event": "scene_started", "name": "x", "seq": 2}`)
	publishAcked(t, old, e)

	got := fmt.Sprint(readBack(ctx, t, old))
	want := fmt.Sprint([]string{"gw1:1", "gw1:2", "gw2:3", "gw1:4", "gw2:5", "gw1:restarted", "gw2:1", "gw2:2"})
	if got != want {
		t.Errorf("stream holds\n %s\nwant\n %s", got, want)
	}
	// A repeat after a lost acknowledgement is dropped for a state too.
	st := fleet.Event{N: 20, Board: "lan-1", Type: fleet.EventState, Kind: "leds", Data: json.RawMessage(`{"event":"leds"}`)}
	publishAcked(t, old, st)
	publishAcked(t, old, st)
	in, err := old.streamOf().Info(ctx, jetstream.WithSubjectFilter(subjectEvents+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Msgs != 9 {
		t.Errorf("stream holds %d events after a state sent twice, want 9", in.State.Msgs)
	}
}

// owner is a gateway's events publisher whose records say it owns board
// lan-1 in this run, as after its restart once its record is rewritten.
func owner(ctx context.Context, t *testing.T, e *Engine, name, boot string) *events {
	t.Helper()
	ev := publisher(ctx, t, e, name, boot)
	ev.c.clk = clock.Real
	ev.c.loaded = true
	ev.c.records = map[string]*record{"lan-1": {View: fleet.BoardView{ID: "lan-1", Gateway: name}, Boot: boot}}
	ev.c.standby = map[string]bool{}
	return ev
}

// queued describes what ev queued for publishing.
func queued(ev *events) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.queues["lan-1"] {
		if e.Type == fleet.EventHappening {
			out = append(out, fmt.Sprint(e.Seq))
		} else {
			out = append(out, e.Type)
		}
	}
	return out
}

// TestFirstHappeningOfARun: the first happening a gateway publishes for
// a board in a run goes on from the stream's story of the board, as a
// takeover's catch-up does. A board that restarted while its gateway was
// down (its line master's replay of the new boot came after the record
// was rewritten, so nothing was kept to catch up with) gets the restart
// no one published before its new boot's happenings (before: seq 1 after
// 500 in the stream, a reorder); a happening the stream holds is not
// queued again; a board that did not restart goes on as it is.
func TestFirstHappeningOfARun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eng, err := OpenEngine(ctx, EngineOptions{Name: "gw1", URL: Embedded, Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	h := func(n uint64, seq uint16, uptime int) fleet.Event {
		return fleet.Event{N: n, Board: "lan-1", Type: fleet.EventHappening, Kind: "scene_started", Seq: seq, Time: time.Now(),
			Data: json.RawMessage(fmt.Sprintf(`{"event":"scene_started","seq":%d,"t_ms":%d}`, seq, uptime))}
	}
	run1 := publisher(ctx, t, eng, "gw1", "run1")
	for seq := uint16(498); seq <= 500; seq++ {
		publishAcked(t, run1, h(uint64(seq), seq, 90000+int(seq)))
	}
	for _, tc := range []struct {
		name string
		e    fleet.Event
		want []string
	}{
		{"the board restarted meanwhile", h(3, 1, 1500), []string{"restarted", "1"}},
		{"a replay of what the stream holds", h(4, 500, 90500), nil},
		{"the board going on", h(5, 501, 90501), []string{"501"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run2 := owner(ctx, t, eng, "gw1", "run2-"+tc.name)
			run2.queue(ctx, tc.e)
			// A later event waits for the catch-up, whose goroutine
			// does not hold follow up.
			run2.queue(ctx, h(6, 7, 1))
			run2.catchWG.Wait()
			if got, want := queued(run2), append(slices.Clone(tc.want), "7"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("queued %v, want %v", got, want)
			}
			// Later events of the run are queued as they come.
			run2.queue(ctx, h(7, 8, 2))
			if got := queued(run2); len(got) != len(tc.want)+2 || got[len(got)-1] != "8" {
				t.Errorf("then queued %v, want %v, 7 and 8", got, tc.want)
			}
		})
	}
}

// TestPublishAckBounded: an asynchronous publish whose acknowledgement
// never comes (here a subscriber that swallows it: the gateway may
// subscribe to its own requests only; in the soak, one
// lost while an engine node died) fails after publishAckWait, so that
// the board's event is sent again instead of holding every later event
// of the board (one in flight per board) for good.
func TestPublishAckBounded(t *testing.T) {
	defer func(d time.Duration) { publishAckWait = d }(publishAckWait)
	publishAckWait = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	eng, err := OpenEngine(ctx, EngineOptions{Name: "gw1", URL: Embedded, Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sub, err := eng.Conn().Subscribe(gwSubject("gw1"), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	fut, err := eng.JetStream().PublishMsgAsync(&nats.Msg{Subject: gwSubject("gw1"), Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fut.Ok():
		t.Fatal("acknowledged by no one")
	case err := <-fut.Err():
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			t.Fatalf("err %v, want ErrAsyncPublishTimeout", err)
		}
	case <-time.After(30 * time.Second): // a generous bound: it never resolved
		t.Fatal("a publish never acknowledged never failed")
	}
}

// slowStream is an events stream whose Info waits for release (a story
// read that takes its time under load), then fails.
type slowStream struct {
	jetstream.Stream
	release chan struct{}
}

func (s *slowStream) Info(ctx context.Context, _ ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return nil, errors.New("engine away")
}

// TestCatchUpDoesNotHoldFollow: a catch-up reads the stream on a
// goroutine of its own; follow, which queues the local events, goes on
// meanwhile (before, it waited for the read: under load its watch of the
// local events was cut off and resumed from a buffer that may no longer
// hold them). The board's events that come meanwhile are queued after
// what the catch-up finds.
func TestCatchUpDoesNotHoldFollow(t *testing.T) {
	st := &slowStream{release: make(chan struct{})}
	c := &Cluster{name: "gw1", boot: "run1", clk: clock.Real, log: slog.New(slog.DiscardHandler), loaded: true,
		standby: map[string]bool{}, records: map[string]*record{
			"lan-1": {View: fleet.BoardView{ID: "lan-1", Gateway: "gw1"}, Boot: "run1"},
			"lan-2": {View: fleet.BoardView{ID: "lan-2", Gateway: "gw1"}, Boot: "run1"}}}
	c.ev = newEvents(c)
	c.ev.stream = st
	ev := c.ev
	ctx := context.Background()
	h := func(board string, seq uint16) fleet.Event {
		return fleet.Event{Board: board, Type: fleet.EventHappening, Kind: "touch", Seq: seq, Time: time.Now(),
			Data: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ev.queue(ctx, h("lan-1", 5)) // its first happening: a catch-up
		ev.queue(ctx, h("lan-1", 6))
		ev.queue(ctx, fleet.Event{Board: "lan-2", Type: fleet.EventState, Kind: "leds"})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a generous bound: queue waited for the read
		close(st.release)
		t.Fatal("queue waited for the catch-up's read of the stream")
	}
	if got := queued(ev); len(got) != 0 {
		t.Fatalf("lan-1 queued %v before its catch-up", got)
	}
	ev.mu.Lock()
	n2 := len(ev.queues["lan-2"])
	ev.mu.Unlock()
	if n2 != 1 {
		t.Fatalf("lan-2's event not queued during lan-1's catch-up")
	}
	close(st.release)
	ev.catchWG.Wait()
	// The read failed: what was kept is published (a repeat is better
	// than a loss; its message id drops it), then what came meanwhile.
	if got := queued(ev); fmt.Sprint(got) != "[5 6]" {
		t.Fatalf("lan-1 queued %v, want [5 6]", got)
	}
}
