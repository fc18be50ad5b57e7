package cluster

// The installation's events: every gateway publishes the events of the
// boards it owns to the HOLO_EVENTS stream (subject holo.ev.<gw>.<board>),
// and Watch on any gateway reads the stream. An event's N is its stream
// sequence, so numbers are the same on every gateway and a client resumes
// with after = the last N it got (SSE Last-Event-ID) on any gateway, also
// across restarts, as far back as the stream keeps events.
//
// Publishing keeps each board's order: up to boardWindow events of a
// board are in flight at once, on one connection in their order; after
// a failed publish the board's unacknowledged events go again from the
// first (send).
// Events wait in memory while the engine cannot be reached (up to
// Options.QueueMax; older ones are dropped then, counted) and leave when it is
// back, each with a message id the engine uses to drop a repeat.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
)

const (
	// maxInFlight bounds the events published and not yet acknowledged.
	maxInFlight = 1024
	// boardWindow bounds one board's events published and not yet
	// acknowledged: one at a time kept up with about 10 a second per
	// board on a loaded machine (make bench: BenchmarkPublishWindow).
	boardWindow = 32
	// watchQueue is how many events may wait for one watcher before it
	// is cut off (as fleet.DefaultWatcherQueue).
	watchQueue = fleet.DefaultWatcherQueue
	// retryAfter is how long a board's event waits after a failed
	// publish before it is tried again.
	retryAfter = 250 * time.Millisecond
)

// events publishes this gateway's events and serves Watch.
type events struct {
	c      *Cluster
	stream jetstream.Stream

	mu      sync.Mutex
	queues  map[string][]fleet.Event // per board, oldest first
	standby map[string][]fleet.Event // per board another gateway owns (catchup.go)
	// told holds the boards whose story this gateway has taken up as
	// their owner in this run (catchup.go): a takeover, or the first
	// happening or restart it publishes.
	told map[string]bool
	// catching holds, per board whose catch-up is under way, the events
	// that came meanwhile (queued after what the catch-up finds).
	catching map[string][]fleet.Event
	catchWG  sync.WaitGroup
	// lastOf is, per board, the message id of the last happening or
	// restart this gateway's fleet core reported of it (restartID), and
	// restartIDs the message ids of restarts by their local number.
	lastOf     map[string]string
	restartIDs map[uint64]string
	// flights holds the publishing state of the boards' queues (send).
	flights map[string]*flight
	// window is how many events of a board may be in flight at once.
	window int
	// gen counts the engine connection's changes: answers to publishes
	// of an earlier connection are ignored (resendLocked).
	gen        uint64
	outOfOrder uint64
	queued     int
	lost       uint64
	kick       chan struct{}
	pub        atomic.Uint64
	pending    atomic.Uint64
	// restarts counts the stream consumers of watchers started again
	// after a failure or a silence.
	restarts atomic.Uint64
}

func newEvents(c *Cluster) *events {
	return &events{c: c, queues: map[string][]fleet.Event{}, standby: map[string][]fleet.Event{}, told: map[string]bool{},
		catching: map[string][]fleet.Event{}, flights: map[string]*flight{}, window: boardWindow, lastOf: map[string]string{}, restartIDs: map[uint64]string{},
		kick: make(chan struct{}, 1)}
}

// setup creates or binds the events stream.
func (ev *events) setup(ctx context.Context) error {
	c := ev.c
	cfg := jetstream.StreamConfig{Name: StreamEvents, Description: "holo board events of every gateway",
		Subjects: []string{subjectEvents + ".>"}, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		MaxAge: c.o.EventsMaxAge, MaxBytes: c.o.EventsMaxBytes, Duplicates: 2 * time.Minute,
		Replicas: c.eng.Replicas(), Storage: jetstream.FileStorage}
	return retry(ctx, c.log, "stream "+StreamEvents, func(ctx context.Context) error {
		st, err := c.js.CreateOrUpdateStream(ctx, cfg)
		if err == nil {
			c.mu.Lock()
			ev.stream = st
			c.mu.Unlock()
		}
		return err
	})
}

// counts returns the events published and those waiting.
func (ev *events) counts() (published, pending uint64) {
	return ev.pub.Load(), ev.pending.Load()
}

// publishLoop follows the local fleet's events and publishes those of
// the boards this gateway owns, until ctx ends.
func (ev *events) publishLoop(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { ev.follow(ctx) })
	wg.Go(func() { ev.send(ctx) })
	wg.Wait()
	ev.catchWG.Wait()
}

// follow queues the local fleet's events, watching again from the last
// one received when the watch is cut.
func (ev *events) follow(ctx context.Context) {
	var last uint64
	for ctx.Err() == nil {
		w := ev.c.o.Local.Watch(ctx, fleet.Filter{}, last)
		for e := range w.C {
			last = e.N
			ev.queue(ctx, e)
		}
		if ctx.Err() == nil {
			ev.c.log.Warn("cluster: fell behind the local events; resuming", "after", last)
		}
	}
}

// queue adds a local event for publishing unless another gateway owns
// its board; then it keeps it, for when this gateway takes the board
// over (catchup.go).
func (ev *events) queue(ctx context.Context, e fleet.Event) {
	ev.mu.Lock()
	ev.noteLocked(e)
	if pend, ok := ev.catching[e.Board]; ok {
		// Its catch-up is under way: after what that finds.
		ev.catching[e.Board] = append(pend, e)
		ev.mu.Unlock()
		return
	}
	if !ev.c.ownsLocal(e.Board) {
		ev.standDownLocked(e.Board) // what it queued comes before e
		ev.keepLocked(e)
		ev.mu.Unlock()
		return
	}
	kept, taken := ev.standby[e.Board]
	story := e.Type == fleet.EventHappening || e.Type == fleet.EventRestarted
	switch {
	case taken:
		// Just taken over: first what the stream lacks of what was kept.
		delete(ev.standby, e.Board)
		ev.told[e.Board] = true
		ev.catching[e.Board] = []fleet.Event{e}
		ev.catchUpLater(ctx, e.Board, kept, true)
		ev.mu.Unlock()
		return
	case story && !ev.told[e.Board]:
		// The board's first happening or restart this gateway publishes
		// in this run, not after a standby: it goes on from the stream's
		// story of the board like a takeover's, so that a restart this
		// run did not see (the board restarted while this gateway was
		// down, and its line master's replay of the new boot's
		// happenings came after its record was rewritten) is said before
		// the new boot's happenings, and a happening the stream holds
		// already is not sent again.
		ev.told[e.Board] = true
		ev.catching[e.Board] = []fleet.Event{}
		ev.catchUpLater(ctx, e.Board, []fleet.Event{e}, false)
		ev.mu.Unlock()
		return
	}
	ev.appendLocked(e.Board, e)
	ev.mu.Unlock()
	ev.kickSend()
}

// catchUpLater reads the stream's story of board id and queues what of
// kept it lacks, then the events that came meanwhile (ev.catching), on a
// goroutine of its own: reading the story takes a while (seconds under
// load, up to catchUpTimeout a try), and follow, which calls queue, must
// not stop meanwhile (its watch of the local events was cut off, and
// resumed from a buffer that may no longer hold them: lost happenings).
// Called with ev.mu held.
func (ev *events) catchUpLater(ctx context.Context, id string, kept []fleet.Event, takeover bool) {
	ev.catchWG.Go(func() {
		late := ev.catchUp(ctx, id, kept)
		ev.mu.Lock()
		if takeover && len(late) > 0 {
			ev.c.log.Info("cluster: publishing a board's events its last owner did not", "board", id, "events", len(late))
		}
		ev.appendLocked(id, late...)
		ev.appendLocked(id, ev.catching[id]...)
		delete(ev.catching, id)
		ev.mu.Unlock()
		ev.kickSend()
	})
}

// appendLocked queues events of board id for publishing. Called with
// ev.mu held.
func (ev *events) appendLocked(id string, es ...fleet.Event) {
	if len(es) == 0 {
		return
	}
	ev.queues[id] = append(ev.queues[id], es...)
	ev.queued += len(es)
	// Options as New leaves them hold QueueMax; a zero one (a Cluster
	// made without New) is the default, never "keep nothing".
	for ev.queued > defaults.Positive(ev.c.o.QueueMax, DefaultQueueMax) {
		ev.dropOldestLocked()
	}
	ev.pending.Store(uint64(ev.queued))
}

// kickSend wakes the send loop.
func (ev *events) kickSend() {
	select {
	case ev.kick <- struct{}{}:
	default:
	}
}

// dropOldestLocked drops the oldest queued event of the longest queue.
func (ev *events) dropOldestLocked() {
	var worst string
	for b, q := range ev.queues {
		if worst == "" || len(q) > len(ev.queues[worst]) {
			worst = b
		}
	}
	ev.popLocked(worst)
	ev.lost++
}

// popLocked takes the head of board id's queue off it (acknowledged, or
// dropped). Called with ev.mu held.
func (ev *events) popLocked(id string) {
	q := ev.queues[id]
	if q[0].Type == fleet.EventRestarted {
		delete(ev.restartIDs, q[0].N)
	}
	if len(q) == 1 {
		delete(ev.queues, id)
	} else {
		ev.queues[id] = q[1:]
	}
	ev.queued--
	if f := ev.flights[id]; f != nil {
		delete(f.acked, f.base)
		f.base++
		if f.sent > 0 {
			f.sent--
		}
	}
}

// flight is the publishing state of one board's queue. Positions count
// the board's queued events from the first this run (the head of the
// queue is at base), so an acknowledgement still finds its event after
// events before it left the queue.
type flight struct {
	base uint64 // position of the head of the queue
	// sent is how many events from the head are published: in flight,
	// or acknowledged while one before them is not yet.
	sent     int
	inFlight int
	acked    map[uint64]bool
	// failed: a publish of the window failed; nothing more is sent
	// until every one in flight is answered, then the window is sent
	// again from the head (the engine drops the repeats by message id).
	failed  bool
	retryAt time.Time
	// ahead is the furthest position acknowledged before the last
	// failure: a later acknowledgement of an event before it that is
	// not a repeat was stored out of order.
	ahead uint64
}

// flightLocked returns board id's publishing state. Called with ev.mu held.
func (ev *events) flightLocked(id string) *flight {
	f := ev.flights[id]
	if f == nil {
		f = &flight{acked: map[uint64]bool{}}
		ev.flights[id] = f
	}
	return f
}

// ackResult is the outcome of one publish.
type ackResult struct {
	board string
	gen   uint64 // ev.gen when it was sent
	pos   uint64
	dup   bool
	err   error
}

// send publishes the queued events, up to ev.window of a board in
// flight at once. They leave on one connection in their order and the
// engine stores them in that order; a publish that fails stops the
// board's window: once every publish in flight is answered, the board's
// unacknowledged events are sent again from the first, and those the
// engine stored already (their acknowledgement lost, or a later one of
// the window) it drops by message id. Before a board's events leave,
// the board must still be this gateway's: when it is no longer (another
// gateway took it over), its queue is kept as a standby gateway's is
// (catchup.go) and no longer sent, so that two gateways never send a
// board's backlog at once.
func (ev *events) send(ctx context.Context) {
	c := ev.c
	total := 0
	results := make(chan ackResult, maxInFlight)
	var waiters sync.WaitGroup
	defer waiters.Wait()
	tick := time.NewTicker(retryAfter)
	defer tick.Stop()
	wasUp, seen := true, c.eng.reconnects.Load()
	for {
		ok, changed := c.eng.Connected()
		if n := c.eng.reconnects.Load(); (wasUp && !ok) || n != seen {
			ev.mu.Lock()
			ev.resendLocked()
			ev.mu.Unlock()
			seen = n
		}
		wasUp = ok
		if ok {
			now := time.Now()
			ev.mu.Lock()
			ev.startLocked(ctx, now, &total, results, &waiters)
			ev.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ev.kick:
		case <-tick.C:
		case r := <-results:
			total--
			ev.acked(r)
		}
	}
}

// resendLocked gives up on every publish in flight when the engine
// connection drops or comes back: each board's events go again from the
// first unacknowledged one, in order, before any later one. Before, the
// publishes sent on the lost connection waited for their acknowledgement
// (publishAckWait, 10 s) while the board's next events, sent on the new
// connection, were stored; the lost ones then went again after them (a
// happening stored after the next: the soak's reorders at an engine
// node's kill). The engine drops those it stored already by message id.
// The old publishes' answers are ignored (their generation). Called with
// ev.mu held.
func (ev *events) resendLocked() {
	ev.gen++
	n := 0
	for b, f := range ev.flights {
		if f.inFlight == 0 && f.sent == 0 {
			continue
		}
		n += f.inFlight
		ev.restartLocked(f)
		if len(ev.queues[b]) == 0 {
			delete(ev.flights, b)
		}
	}
	if n > 0 {
		ev.c.log.Info("cluster: engine connection changed: publishing the boards' unacknowledged events again, in order", "in_flight", n)
	}
}

// restartLocked sends board f's window again from the head of its queue
// once retryAfter has passed. Called with ev.mu held.
func (ev *events) restartLocked(f *flight) {
	for p := range f.acked {
		f.ahead = max(f.ahead, p+1)
	}
	clear(f.acked)
	f.sent, f.inFlight = 0, 0
	f.failed = false
	f.retryAt = time.Now().Add(retryAfter)
}

// startLocked publishes what the boards' windows let out, and stands
// down from the boards this gateway no longer owns. total counts the
// publishes in flight; each one's outcome goes to results. Called with
// ev.mu held.
func (ev *events) startLocked(ctx context.Context, now time.Time, total *int, results chan<- ackResult, waiters *sync.WaitGroup) {
	for b := range ev.queues {
		if *total >= maxInFlight {
			return
		}
		if !ev.c.ownsLocal(b) {
			ev.standDownLocked(b)
			continue
		}
		f := ev.flightLocked(b)
		if f.failed || now.Before(f.retryAt) {
			continue
		}
		q := ev.queues[b]
		for f.sent < len(q) && f.inFlight < ev.window && *total < maxInFlight {
			fut, err := ev.publish(q[f.sent])
			if err != nil {
				f.retryAt = now.Add(retryAfter)
				break
			}
			pos, gen := f.base+uint64(f.sent), ev.gen
			f.sent++
			f.inFlight++
			*total++
			waiters.Go(func() {
				r := ackResult{board: b, gen: gen, pos: pos}
				select {
				case a := <-fut.Ok():
					r.dup = a.Duplicate
				case err := <-fut.Err():
					r.err = err
				case <-ctx.Done():
					r.err = ctx.Err()
				}
				results <- r
			})
		}
	}
}

// acked takes in the outcome of one publish.
func (ev *events) acked(r ackResult) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if r.gen != ev.gen {
		return // sent before the connection changed: sent again since (resendLocked)
	}
	f := ev.flightLocked(r.board)
	f.inFlight--
	switch {
	case r.pos < f.base:
		// Its event left the queue meanwhile (dropped, or kept when the
		// board was taken over).
	case r.err != nil:
		f.failed = true
		ev.c.log.Debug("cluster: event not published yet", "board", r.board, "err", r.err)
	default:
		if !r.dup && r.pos < f.ahead {
			ev.outOfOrder++
			ev.c.log.Warn("cluster: a board's event stored after a later one (its first publish failed)", "board", r.board)
		}
		f.acked[r.pos] = true
		for f.acked[f.base] && len(ev.queues[r.board]) > 0 {
			ev.popLocked(r.board)
			ev.pub.Add(1)
		}
	}
	if f.failed && f.inFlight == 0 {
		ev.restartLocked(f)
	}
	if f.inFlight == 0 && len(ev.queues[r.board]) == 0 {
		delete(ev.flights, r.board)
	}
	ev.pending.Store(uint64(ev.queued))
	ev.kickSend()
}

// standDownLocked stops publishing board id, which this gateway no
// longer owns: its queued happenings and restarts are kept as a standby
// gateway keeps them (for a takeover back), the rest dropped; those in
// flight are answered and forgotten. Called with ev.mu held.
func (ev *events) standDownLocked(id string) {
	q := ev.queues[id]
	if len(q) == 0 {
		return
	}
	ev.c.log.Info("cluster: a board's queued events kept, not sent: another gateway owns it", "board", id, "events", len(q))
	delete(ev.queues, id)
	ev.queued -= len(q)
	if f := ev.flights[id]; f != nil {
		f.base += uint64(len(q))
		f.sent = 0
		clear(f.acked)
		if f.inFlight == 0 {
			delete(ev.flights, id)
		}
	}
	for _, e := range q {
		ev.keepLocked(e)
	}
	ev.pending.Store(uint64(ev.queued))
}

// publish sends one event with its message id (msgID), which lets the
// engine drop a repeat.
func (ev *events) publish(e fleet.Event) (jetstream.PubAckFuture, error) {
	c := ev.c
	data, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(subjectEvents + "." + c.name + "." + key(e.Board))
	m.Data = data
	id := msgID(c.name, c.boot, e)
	if rid, ok := ev.restartIDs[e.N]; ok && e.Type == fleet.EventRestarted {
		id = rid
	}
	m.Header.Set(jetstream.MsgIDHeader, id)
	return c.js.PublishMsgAsync(m)
}

// maxRestartIDs bounds the restart ids kept for restarts not published
// (kept for a board another gateway owned, then not needed).
const maxRestartIDs = 4096

// noteLocked follows the local fleet's story of e's board for the
// message id of its restarts (restartID). Called with ev.mu held.
func (ev *events) noteLocked(e fleet.Event) {
	switch e.Type {
	case fleet.EventHappening:
		ev.lastOf[e.Board] = msgID("", "", e)
	case fleet.EventRestarted:
		prev, ok := ev.lastOf[e.Board]
		if !ok {
			// Nothing of the board seen before: an id of this gateway's
			// own (msgID).
			ev.lastOf[e.Board] = msgID(ev.c.name, ev.c.boot, e)
			return
		}
		if len(ev.restartIDs) >= maxRestartIDs {
			for n := range ev.restartIDs {
				if n+maxRestartIDs < e.N {
					delete(ev.restartIDs, n)
				}
			}
		}
		id := restartID(e.Board, prev)
		ev.restartIDs[e.N] = id
		ev.lastOf[e.Board] = id
	}
}

// restartID is the message id of a restart of board that came after the
// happening or restart of message id prev. Every gateway that saw the
// board's story up to the restart gives it the same id, so the restart
// is stored once however many publish it: the board's owner and a
// gateway taking it over that read the stream before the owner's copy
// got there (each gateway's own id stored it twice). A gateway that saw
// nothing of the board before publishes the restart under an id of its
// own (msgID).
func restartID(board, prev string) string {
	h := sha256.Sum256([]byte(prev))
	return "r/" + board + "/" + hex.EncodeToString(h[:12])
}

// msgID is the message id an event is published with; the engine drops
// a message whose id it stored in the last two minutes (the stream's
// Duplicates window) and acknowledges it as a duplicate.
//
// A happening's id is the board's own: the board, its seq, its kind and
// its t_ms (the board's uptime, so two boots never share one; data
// without t_ms: a digest of the kind and data). Every gateway that publishes a happening publishes
// it under the same id, so it is stored once whoever sends it and
// however often: two gateways that both take themselves for the board's
// owner for a moment (one has not yet read the record that took the
// board from it), or a gateway taking a board over that publishes what
// it kept of the board without having read to the end of what the
// stream holds. Each gateway sends a board's events in their order on one
// connection, and after a failed publish sends the unacknowledged ones
// again from the first (send), so the board's happenings still enter the
// stream in their order.
//
// Other events (states, online, offline) are this gateway's own:
// gateway, boot and local number, which drops a repeat sent after a lost
// acknowledgement; so are restarts of a board this gateway saw nothing
// of before (others: restartID).
func msgID(gateway, boot string, e fleet.Event) string {
	if e.Type == fleet.EventHappening {
		// The board's uptime at the happening tells its boots apart;
		// the data's bytes may differ by the transport that brought it
		// (a line board on the LAN too).
		var up struct {
			TMs *int64 `json:"t_ms"`
		}
		if json.Unmarshal(e.Data, &up) == nil && up.TMs != nil {
			return "h/" + e.Board + "/" + strconv.FormatUint(uint64(e.Seq), 10) + "/" + e.Kind + "/" + strconv.FormatInt(*up.TMs, 10)
		}
		h := sha256.New()
		h.Write([]byte(e.Kind))
		h.Write([]byte{0})
		var buf bytes.Buffer
		if json.Compact(&buf, e.Data) == nil {
			h.Write(buf.Bytes())
		} else {
			h.Write(e.Data)
		}
		return "h/" + e.Board + "/" + strconv.FormatUint(uint64(e.Seq), 10) + "/" + hex.EncodeToString(h.Sum(nil)[:12])
	}
	return gateway + "/" + boot + "/" + strconv.FormatUint(e.N, 10)
}

// Watch implements fleet.Service: the installation's events matching f
// from the stream numbered after after (0: from the first the stream
// holds; fleet.Live: from now on). The watch never goes silent while the
// stream goes on: a consumer that fails or stops handing out events (an
// engine node died) is replaced by one starting after the last event
// handed out. A watcher that lets watchQueue events pile up is cut off (C
// closes; Dropped counts one). Events a replay asks for that the stream
// no longer holds count in Dropped without closing C.
func (c *Cluster) Watch(ctx context.Context, f fleet.Filter, after uint64) *fleet.Watcher {
	ch := make(chan fleet.Event, watchQueue)
	var dropped atomic.Uint64
	go func() {
		defer close(ch)
		c.ev.watch(ctx, f, after, ch, &dropped)
	}()
	return &fleet.Watcher{C: ch, Dropped: dropped.Load}
}

// watch feeds ch from the stream until ctx ends or ch is full. While
// this gateway is cut off from the engine (beatLapsed), its own boards'
// events are also handed out at once, as a preview numbered with the
// last stream number handed out; each comes again with its own number
// once it reaches the stream. A client that resumes by number takes the
// numbered ones: previews carry a number it has, and leaving out the
// numbered copies (as this once did) lost and reordered happenings for
// it.
func (ev *events) watch(ctx context.Context, f fleet.Filter, after uint64, ch chan<- fleet.Event, dropped *atomic.Uint64) {
	c := ev.c
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fromStream := make(chan streamEvent, 64)
	go ev.readStream(ctx, f, after, fromStream, dropped)
	local := c.o.Local.Watch(ctx, f, fleet.Live)
	last := after
	if after == fleet.Live {
		last = 0
	}
	send := func(e fleet.Event) bool {
		select {
		case ch <- e:
			return true
		default:
			dropped.Add(1)
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case se, ok := <-fromStream:
			if !ok {
				return
			}
			last = se.e.N
			if !c.passes(f, se.e.Board) {
				continue
			}
			if !send(se.e) {
				return
			}
		case e, ok := <-local.C:
			if !ok {
				local = c.o.Local.Watch(ctx, f, fleet.Live) // fell behind: what matters is the stream
				continue
			}
			if !c.beatLapsed() || !c.ownsLocal(e.Board) {
				continue
			}
			e.N = last
			if !send(e) {
				return
			}
		}
	}
}

// streamEvent is an event read from the stream and its message id.
type streamEvent struct {
	e  fleet.Event
	id string
}

// stallCheck is how long a stream reader waits without a message before
// it asks the engine whether the stream went on without it; a reader of
// one board's events (a filtered consumer) waits stallCheckFiltered.
const (
	stallCheck         = 2 * time.Second
	stallCheckFiltered = 10 * time.Second
)

// readStream reads the stream's events numbered after after (fleet.Live:
// from now) into out, until ctx ends; it closes out when it stops. It
// never goes silent: when its consumer fails, or the stream holds events
// it has not been given (an engine node died under the consumer, which
// then may hand out nothing more without failing), it starts a new
// consumer after the last event it handed out.
func (ev *events) readStream(ctx context.Context, f fleet.Filter, after uint64, out chan<- streamEvent, dropped *atomic.Uint64) {
	defer close(out)
	c := ev.c
	// Wait until the stream is there (a gateway still joining).
	for ev.streamOf() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	st := ev.streamOf()
	info := func() (*jetstream.StreamInfo, error) {
		// Short: a request lost while the connection moves to another
		// engine node would hold the watch for the whole of CallTimeout
		// (30 s), silent.
		ictx, cancel := context.WithTimeout(ctx, setupAttempt)
		defer cancel()
		return st.Info(ictx)
	}
	// next is the number of the next event to hand out.
	var next uint64
	if after == fleet.Live {
		if err := retry(ctx, c.log, "events stream info", func(context.Context) error {
			in, err := info()
			if err == nil {
				next = in.State.LastSeq + 1
			}
			return err
		}); err != nil {
			return
		}
	} else {
		next = after + 1
		if in, err := info(); err == nil && in.State.FirstSeq > next && in.State.LastSeq >= next {
			dropped.Add(in.State.FirstSeq - next)
		}
	}
	var filter []string
	quiet := stallCheck
	if len(f.IDs) == 1 {
		filter = []string{subjectEvents + ".*." + key(f.IDs[0])}
		quiet = stallCheckFiltered
	}
	for ctx.Err() == nil {
		// A consumer that cannot be reset at once fails to this loop,
		// which starts another after the last event handed out (the
		// library would retry for as long as the engine is away, silent).
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: next,
			FilterSubjects: filter, MaxResetAttempts: 2}
		var cons jetstream.Consumer
		if err := retry(ctx, c.log, "events consumer", func(actx context.Context) error {
			var err error
			cons, err = st.OrderedConsumer(actx, cfg)
			return err
		}); err != nil {
			return
		}
		it, err := cons.Messages()
		if err != nil {
			c.log.Debug("cluster: events consumer", "err", err)
			pause(ctx, retryAfter)
			continue
		}
		next = ev.readConsumer(ctx, it, next, quiet, info, out)
		it.Stop()
		ev.restarts.Add(1)
	}
}

// readConsumer hands out what it reads until ctx ends, the consumer
// fails, or it has been silent for quiet while the stream holds event
// next or later; it returns the number of the next event to hand out.
func (ev *events) readConsumer(ctx context.Context, it jetstream.MessagesContext, next uint64, quiet time.Duration,
	info func() (*jetstream.StreamInfo, error), out chan<- streamEvent) uint64 {
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next(jetstream.NextMaxWait(quiet))
		switch {
		case ctx.Err() != nil:
			return next
		case errors.Is(err, nats.ErrTimeout):
			if in, err := info(); err == nil && in.State.LastSeq >= next {
				ev.c.log.Debug("cluster: the events consumer fell silent; starting another", "next", next, "last", in.State.LastSeq)
				return next
			}
			continue
		case err != nil:
			ev.c.log.Debug("cluster: events consumer failed; starting another", "next", next, "err", err)
			pause(ctx, retryAfter)
			return next
		}
		md, err := m.Metadata()
		if err != nil || md.Sequence.Stream < next {
			continue
		}
		next = md.Sequence.Stream + 1
		var e fleet.Event
		if json.Unmarshal(m.Data(), &e) != nil {
			continue
		}
		e.N = md.Sequence.Stream
		select {
		case out <- streamEvent{e: e, id: m.Headers().Get(jetstream.MsgIDHeader)}:
		case <-ctx.Done():
			return next
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// beatLapsed reports whether the engine has not acknowledged this
// gateway's heartbeat for DeadAfter: it is cut off for longer than a
// reconnection to another engine node takes. Only then are its boards'
// events handed out before they have their number in the stream: a
// watch that did so at every reconnection handed out events numbered
// with the last number its client had, which a client that resumes by
// number takes for repeats (the soak lost happenings so).
func (c *Cluster) beatLapsed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lastBeat.IsZero() && c.clk.Since(c.lastBeat) > c.o.DeadAfter
}

// ownsLocal reports whether this gateway owns board id, for publishing
// its events: the board's record names it, written in this run. Until
// then it keeps them (a new board's until its first record is written:
// two gateways reaching a new board both published its first events). Until the records are read it owns none: what its
// boards did meanwhile is kept and caught up with once it knows.
func (c *Cluster) ownsLocal(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded || c.standby[id] {
		return false
	}
	r := c.records[id]
	// A record this gateway wrote in an earlier run is its own again
	// once rewritten with this run's boot: meanwhile another gateway may
	// have claimed the board (it took this one for dead), and two
	// gateways published the board's events twice.
	return r != nil && !r.gone && r.View.Gateway == c.name && r.Boot == c.boot
}

func (ev *events) streamOf() jetstream.Stream {
	ev.c.mu.Lock()
	defer ev.c.mu.Unlock()
	return ev.stream
}

// passes reports whether board id passes f as the board is now.
func (c *Cluster) passes(f fleet.Filter, id string) bool {
	if f.Group == 0 && f.Firmware == "" && f.Online == nil && len(f.Labels) == 0 {
		if len(f.IDs) == 0 {
			return true
		}
		return fleet.Filter{IDs: f.IDs}.Matches(fleet.BoardView{ID: id})
	}
	v, err := c.Board(id)
	if err != nil {
		return false
	}
	return f.Matches(v)
}

// lostEvents is how many events were dropped while waiting for the engine.
func (ev *events) lostEvents() uint64 {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.lost
}
