package events

import (
	"context"
	"sync"
)

// Message is one event as a consumer receives it.
type Message struct {
	Kind string
	// Data is the event's JSON object on one line, shared with other
	// consumers: read it, never modify it.
	Data []byte
	// ID is the seq of a happening, 0 for a state.
	ID uint16
	// Happening is true for a happening, false for a state.
	Happening bool
}

// Subscription is an in-process consumer of a hub's events (the SSE
// handler, the host link, tests). Its methods are safe for concurrent use,
// but one goroutine should call Next.
type Subscription struct {
	hub    *Hub
	filter Filter
	limit  int
	lost   int
	notify chan struct{} // a token after each change; capacity 1

	mu     sync.Mutex
	queue  []entry
	head   int
	nHap   int               // happenings in queue[head:]
	states map[string][]byte // latest pending state per kind
	err    error             // set once closed
}

// entry is one place in a subscription's queue: a happening, or the place
// of a kind's pending state.
type entry struct {
	h    *Happening
	kind string
}

// Subscribe returns a subscription to the kinds filter selects. When after
// is not nil, the kept happenings after that seq are queued first (see
// Since for how seqs compare) and Lost says how many were no longer kept;
// then live events follow. On a closed hub the subscription is closed.
func (h *Hub) Subscribe(filter Filter, after *uint16) *Subscription {
	s := &Subscription{
		hub:    h,
		filter: filter,
		limit:  h.opts.QueueLimit,
		notify: make(chan struct{}, 1),
		states: make(map[string][]byte),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.err = ErrClosed
		return s
	}
	if after != nil {
		lost, list := h.keptAfter(h.resolve(*after), filter)
		s.lost = lost
		for _, hp := range list {
			s.pushHappening(hp)
		}
	}
	h.subs[s] = struct{}{}
	return s
}

// Lost returns how many happenings after the subscription's after were no
// longer kept when it began.
func (s *Subscription) Lost() int { return s.lost }

// Filter returns the kinds the subscription selects.
func (s *Subscription) Filter() Filter { return s.filter }

// Next returns the next event, waiting for one. It returns ErrClosed once
// the subscription or the hub is closed, ErrOverflow once the subscriber
// fell too far behind, or the context's error.
func (s *Subscription) Next(ctx context.Context) (Message, error) {
	for {
		m, ok, err := s.poll()
		if ok || err != nil {
			return m, err
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// Ready returns a channel that receives a token when events may be waiting
// or the subscription closed; a consumer drains with TryNext after each.
func (s *Subscription) Ready() <-chan struct{} { return s.notify }

// TryNext returns the next event without waiting; ok is false when none is
// queued. err is set as for Next once the subscription is closed.
func (s *Subscription) TryNext() (m Message, ok bool, err error) { return s.poll() }

func (s *Subscription) poll() (Message, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return Message{}, false, s.err
	}
	if s.head == len(s.queue) {
		return Message{}, false, nil
	}
	e := s.queue[s.head]
	s.queue[s.head] = entry{}
	s.head++
	if s.head == len(s.queue) {
		s.head, s.queue = 0, s.queue[:0]
	}
	if e.h != nil {
		s.nHap--
		return Message{Kind: e.h.Kind, Data: e.h.Data, ID: e.h.Seq, Happening: true}, true, nil
	}
	data := s.states[e.kind]
	delete(s.states, e.kind)
	return Message{Kind: e.kind, Data: data}, true, nil
}

// Close ends the subscription; Next then returns ErrClosed.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
	s.fail(ErrClosed)
}

// fail closes the subscription with err unless already closed.
func (s *Subscription) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(err)
}

func (s *Subscription) failLocked(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	s.queue, s.head, s.nHap = nil, 0, 0
	clear(s.states)
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// pushHappening queues hp; it returns false when that overflowed the queue
// and closed the subscription. Caller holds hub.mu.
func (s *Subscription) pushHappening(hp *Happening) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return true // closed already; whoever closed it removes it
	}
	if s.nHap >= s.limit {
		s.failLocked(ErrOverflow)
		return false
	}
	s.enqueue(entry{h: hp})
	s.nHap++
	s.signal()
	return true
}

// pushState makes data the pending state of kind, keeping the place of an
// earlier pending one. Caller holds hub.mu.
func (s *Subscription) pushState(kind string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if _, ok := s.states[kind]; !ok {
		s.enqueue(entry{kind: kind})
	}
	s.states[kind] = data
	s.signal()
}

// enqueue appends e, first moving the live entries to the front when the
// array is full, so a consumer that never quite catches up does not grow it
// without bound. s.mu held.
func (s *Subscription) enqueue(e entry) {
	if s.head > 0 && len(s.queue) == cap(s.queue) {
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	s.queue = append(s.queue, e)
}
