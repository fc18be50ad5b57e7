package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// Errors of the package, compared with errors.Is.
var (
	// ErrClosed: the hub or the subscription was closed.
	ErrClosed = errors.New("events: closed")
	// ErrOverflow: a subscriber fell more than its queue limit of
	// happenings behind and was closed; reconnect with the last seq seen.
	ErrOverflow = errors.New("events: subscriber fell behind")
	// ErrBadFilter: a kinds value that is not a comma list of kind names.
	ErrBadFilter = errors.New("events: bad kinds")
	// ErrBadAfter: an after value or Last-Event-ID that is not 0-65535.
	ErrBadAfter = errors.New("events: bad after")
)

// Defaults and limits from the specification's Limits table.
const (
	DefaultKeep         = 32                     // happenings kept for replay
	DefaultMaxStreams   = 3                      // SSE streams at once
	DefaultReserved     = 1                      // of them kept for trusted clients (see Options.Trusted)
	DefaultQueueLimit   = 256                    // happenings a subscriber may have pending
	DefaultHeartbeat    = 15 * time.Second       // keep-alive comment period on a stream
	DefaultWriteTimeout = 10 * time.Second       // deadline of one write to a stream (real time)
	HoloThrottle        = 250 * time.Millisecond // holo position at most 4 per second
	SystemPeriod        = 15 * time.Second       // system state period, for Every
	PlayingPeriod       = 5 * time.Second        // screen and scene period while a clip plays or a scene runs, for Every
	RetryMillis         = 3000                   // the stream's retry: line
	MaxSeq              = 65535                  // seq wraps from MaxSeq to 1
)

// Kinds the board uses. Others may be added (link, ...); the hub accepts any
// kind name of 1-32 characters of a-z, 0-9 and _.
const (
	KindScreen   = "screen"
	KindLEDs     = "leds"
	KindHolo     = "holo"
	KindScene    = "scene"
	KindScenes   = "scenes"
	KindSettings = "settings"
	KindNetwork  = "network"
	KindOTA      = "ota"
	KindSystem   = "system"

	KindClipStarted  = "clip_started"
	KindClipEnded    = "clip_ended"
	KindSceneStarted = "scene_started"
	KindSceneEnded   = "scene_ended"
	KindTouch        = "touch"
)

// Options tune a Hub. Zero values take the defaults.
type Options struct {
	// Keep is how many happenings are kept for replay (DefaultKeep).
	Keep int
	// MaxStreams is how many SSE streams may be open at once
	// (DefaultMaxStreams).
	MaxStreams int
	// Trusted says whether a stream's request comes from a trusted
	// client (the board: no password is set, or the request presented
	// it). Untrusted clients together may hold at most MaxStreams minus
	// Reserved streams, so strangers cannot take every slot and blind
	// the gateway; trusted clients may take any free slot. nil trusts
	// every client: no slot is held back.
	Trusted func(r *http.Request) bool
	// Reserved is how many slots are kept for trusted clients
	// (DefaultReserved); at most MaxStreams-1, so a stranger can always
	// have one. A negative value keeps none.
	Reserved int
	// Throttle is the least time between two sends of a kind's state. nil
	// means {"holo": HoloThrottle}; a kind not in the map is sent at once.
	Throttle map[string]time.Duration
	// Uptime returns the board's uptime for t_ms; by default the time since
	// New by the hub's clock. It is called with the hub locked, so it must
	// not call the hub.
	Uptime func() time.Duration
	// QueueLimit is how many happenings a subscriber may have pending before
	// it is closed with ErrOverflow (DefaultQueueLimit; never less than Keep).
	QueueLimit int
	// Heartbeat is the period of keep-alive comments on a stream
	// (DefaultHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a stream, in real time
	// (DefaultWriteTimeout).
	WriteTimeout time.Duration
}

// Happening is one numbered event. Data is its JSON object, shared by every
// consumer: read it, never modify it.
type Happening struct {
	Seq  uint16
	Kind string
	TMs  int64
	Data json.RawMessage

	n uint64 // monotonic count, 1 for the first happening
}

// Hub fans a board's events out to its subscribers. One per board; its
// methods are safe for concurrent use.
type Hub struct {
	clk    clock.Clock
	log    *slog.Logger
	opts   Options
	uptime func() time.Duration

	mu        sync.Mutex
	closed    bool
	count     uint64       // happenings so far; the newest has this count
	ring      []*Happening // the kept ones, at index count % Keep
	subs      map[*Subscription]struct{}
	streams   int // open SSE streams
	untrusted int // of them, opened by untrusted clients
	throttles map[string]*throttle

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// throttle holds one kind's rate limit: leading edge at once, trailing edge
// with the latest state when the interval ends.
type throttle struct {
	interval time.Duration
	sent     bool
	last     time.Time // when a state of this kind last went out
	pending  []byte    // latest held state, nil when none
	timer    clock.Timer
}

// New returns a hub using clk for time and log for what goes wrong (nil
// discards).
func New(clk clock.Clock, log *slog.Logger, opts Options) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	switch {
	case opts.Reserved == 0:
		opts.Reserved = DefaultReserved
	case opts.Reserved < 0:
		opts.Reserved = 0
	}
	opts.Reserved = min(opts.Reserved, opts.MaxStreams-1)
	if opts.Throttle == nil {
		opts.Throttle = map[string]time.Duration{KindHolo: HoloThrottle}
	}
	if opts.QueueLimit <= 0 {
		opts.QueueLimit = DefaultQueueLimit
	}
	if opts.QueueLimit < opts.Keep {
		opts.QueueLimit = opts.Keep
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	h := &Hub{
		clk:       clk,
		log:       log,
		opts:      opts,
		uptime:    opts.Uptime,
		ring:      make([]*Happening, opts.Keep),
		subs:      make(map[*Subscription]struct{}),
		throttles: make(map[string]*throttle),
		done:      make(chan struct{}),
	}
	for k, d := range opts.Throttle {
		if d > 0 {
			h.throttles[k] = &throttle{interval: d}
		}
	}
	if h.uptime == nil {
		start := clk.Now()
		h.uptime = func() time.Duration { return clk.Since(start) }
	}
	return h
}

// Close ends every subscription and stream with ErrClosed, stops the
// throttle timers and waits for the goroutines started by Every. Later
// SetState and Emit calls do nothing. Close is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	for s := range h.subs {
		s.fail(ErrClosed)
	}
	clear(h.subs)
	for _, t := range h.throttles {
		if t.timer != nil {
			t.timer.Stop()
			t.timer = nil
		}
		t.pending = nil
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// SetState reports that the resource kind changed; state is what its GET
// returns now and is marshalled at once. Subscribers selecting kind receive
// {"event": kind, "state": state}, coalesced and throttled as the package
// doc says. A bad kind name or a state that does not marshal is logged and
// dropped.
func (h *Hub) SetState(kind string, state any) {
	if !validKind(kind) {
		h.log.Error("events: state with a bad kind name dropped", "kind", kind)
		return
	}
	data, err := json.Marshal(stateObject{Event: kind, State: state})
	if err != nil {
		h.log.Error("events: state does not marshal; dropped", "kind", kind, "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	t := h.throttles[kind]
	if t == nil {
		h.broadcastState(kind, data)
		return
	}
	now := h.clk.Now()
	if t.timer == nil && (!t.sent || now.Sub(t.last) >= t.interval) {
		t.sent, t.last = true, now
		h.broadcastState(kind, data)
		return
	}
	t.pending = data
	if t.timer == nil {
		t.timer = h.clk.AfterFunc(t.interval-now.Sub(t.last), func() { h.flushThrottle(kind, t) })
	}
}

type stateObject struct {
	Event string `json:"event"`
	State any    `json:"state"`
}

// flushThrottle sends the state held back by t when its interval ends.
func (h *Hub) flushThrottle(kind string, t *throttle) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.timer = nil
	if h.closed || t.pending == nil {
		return
	}
	t.sent, t.last = true, h.clk.Now() // before anyone can see the send
	h.broadcastState(kind, t.pending)
	t.pending = nil
}

// broadcastState queues data for every subscriber selecting kind. h.mu held.
func (h *Hub) broadcastState(kind string, data []byte) {
	for s := range h.subs {
		if s.filter.Match(kind) {
			s.pushState(kind, data)
		}
	}
}

// Emit records a happening of the given kind and sends it to the
// subscribers selecting it. fields is a struct or map marshalled to a JSON
// object whose members follow event, seq and t_ms in the data object (nil
// for none; fields that do not marshal to an object are logged and left
// out). It returns the happening, or the zero Happening when the kind name
// is bad or the hub is closed.
func (h *Hub) Emit(kind string, fields any) Happening {
	if !validKind(kind) {
		h.log.Error("events: happening with a bad kind name dropped", "kind", kind)
		return Happening{}
	}
	members := h.members(kind, fields)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return Happening{}
	}
	h.count++
	hp := &Happening{Seq: seqOf(h.count), Kind: kind, TMs: h.uptime().Milliseconds(), n: h.count}
	b := make([]byte, 0, len(`{"event":"","seq":65535,"t_ms":}`)+len(kind)+20+1+len(members))
	b = append(b, `{"event":"`...)
	b = append(b, kind...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, uint64(hp.Seq), 10)
	b = append(b, `,"t_ms":`...)
	b = strconv.AppendInt(b, hp.TMs, 10)
	if len(members) > 0 {
		b = append(b, ',')
		b = append(b, members...)
	}
	hp.Data = append(b, '}')
	h.ring[h.count%uint64(len(h.ring))] = hp
	for s := range h.subs {
		if s.filter.Match(kind) && !s.pushHappening(hp) {
			h.log.Warn("events: subscriber fell behind; closed", "pending", h.opts.QueueLimit)
			delete(h.subs, s)
		}
	}
	return *hp
}

// members marshals fields and returns the inside of the JSON object, without
// its braces; nil when there is nothing to add.
func (h *Hub) members(kind string, fields any) []byte {
	if fields == nil {
		return nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		h.log.Error("events: happening fields do not marshal; left out", "kind", kind, "err", err)
		return nil
	}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		h.log.Error("events: happening fields are not a JSON object; left out", "kind", kind)
		return nil
	}
	return b[1 : len(b)-1]
}

// seqOf maps the monotonic count n >= 1 to its seq: 1..MaxSeq, then 1 again.
func seqOf(n uint64) uint16 {
	if n == 0 {
		return 0
	}
	return uint16((n-1)%MaxSeq + 1)
}

// Latest returns the seq of the newest happening, 0 before the first.
func (h *Hub) Latest() uint16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return seqOf(h.count)
}

// Since returns the kept happenings after the one numbered after that kinds
// selects, oldest first, with the newest seq (0 before the first) and lost,
// the count of happenings after after that are no longer kept.
//
// after is compared across the wrap by mapping it to the most recent
// happening that had that seq (within the last MaxSeq happenings the mapping
// is exact). A seq not issued since the hub started counts as 0. lost counts
// happenings of every kind: the kinds of forgotten happenings are not kept.
func (h *Hub) Since(after uint16, kinds Filter) (seq uint16, lost int, events []Happening) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lost, list := h.keptAfter(h.resolve(after), kinds)
	events = make([]Happening, len(list))
	for i, hp := range list {
		events[i] = *hp
	}
	return seqOf(h.count), lost, events
}

// resolve maps a seq to the count of the most recent happening with that
// seq; 0 for 0 and for a seq not issued yet. h.mu held.
func (h *Hub) resolve(after uint16) uint64 {
	if after == 0 || h.count == 0 {
		return 0
	}
	back := (uint64(seqOf(h.count)) + MaxSeq - uint64(after)) % MaxSeq
	if back >= h.count {
		return 0
	}
	return h.count - back
}

// oldestKept is the count of the oldest kept happening (count+1 when none).
// h.mu held.
func (h *Hub) oldestKept() uint64 {
	if h.count < uint64(len(h.ring)) {
		return 1
	}
	return h.count - uint64(len(h.ring)) + 1
}

// keptAfter returns the lost count and the kept happenings with a count
// above afterN that kinds selects. h.mu held.
func (h *Hub) keptAfter(afterN uint64, kinds Filter) (int, []*Happening) {
	oldest := h.oldestKept()
	lost := 0
	from := afterN + 1
	if from < oldest {
		lost = int(oldest - from)
		from = oldest
	}
	var out []*Happening
	for n := from; n <= h.count; n++ {
		if hp := h.ring[n%uint64(len(h.ring))]; kinds.Match(hp.Kind) {
			out = append(out, hp)
		}
	}
	return lost, out
}

// Every sends kind's state every interval while the hub is open: on each
// tick it calls state and sends what it returns when its bool is true (the
// board sends system every SystemPeriod, and screen and scene every
// PlayingPeriod while a clip plays or a scene runs). The goroutine is owned
// by the hub and ends on Close or when the returned stop is called; stop
// waits for it, so it must not be called from state.
func (h *Hub) Every(kind string, interval time.Duration, state func() (any, bool)) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	h.mu.Lock()
	if h.closed || interval <= 0 || state == nil {
		h.mu.Unlock()
		if interval <= 0 {
			h.log.Error("events: Every with a non-positive interval ignored", "kind", kind)
		}
		return func() {}
	}
	h.wg.Add(1)
	h.mu.Unlock()
	tick := h.clk.NewTicker(interval)
	go func() {
		defer h.wg.Done()
		defer close(finished)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-h.done:
				return
			case <-tick.C():
				if v, ok := state(); ok {
					h.SetState(kind, v)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-finished
	}
}

// acquireStream takes a stream slot for a trusted client or not. It fails
// with a message when every slot it may take is taken or the hub is
// closed. release gives the slot back.
func (h *Hub) acquireStream(trusted bool) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("the event hub is closed: %w", ErrClosed)
	}
	if h.streams >= h.opts.MaxStreams {
		return nil, fmt.Errorf("all %d event streams are taken", h.opts.MaxStreams)
	}
	if open := h.opts.MaxStreams - h.opts.Reserved; !trusted && h.untrusted >= open {
		return nil, fmt.Errorf("the %d event streams open to clients without the password are taken; %d kept for clients that send it",
			open, h.opts.Reserved)
	}
	h.streams++
	if !trusted {
		h.untrusted++
	}
	return func() {
		h.mu.Lock()
		h.streams--
		if !trusted {
			h.untrusted--
		}
		h.mu.Unlock()
	}, nil
}

// Streams returns how many SSE streams are open.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams
}
