package osc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// client is one OSC peer: a UDP source address or a TCP connection.
type client struct {
	s             *Server
	network, addr string
	send          func([]byte) error

	mu     sync.Mutex
	from   *net.UDPAddr // a UDP client's last source address
	rport  int
	quiet  bool // /holo/alwaysReply 0
	subs   []subscription
	cancel context.CancelFunc // the running subscription's
	timer  clock.Timer
	// gen numbers the subscriptions (a timer of an ended one must not
	// end the next); deadline is when the running one expires unless
	// thumped.
	gen      uint64
	deadline time.Time
	// subHost is the host whose subscriber slot the running subscription
	// holds.
	subHost string
}

func (s *Server) newClient(_ context.Context, network, addr string, send func([]byte) error) *client {
	return &client{s: s, network: network, addr: addr, send: send}
}

// host is the client's host (its address without the port): the source
// whose limits it shares.
func (c *client) host() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostLocked()
}

func (c *client) hostLocked() string {
	if h, _, err := net.SplitHostPort(c.addr); err == nil {
		return h
	}
	return c.addr
}

func (c *client) setFrom(a *net.UDPAddr) {
	c.mu.Lock()
	c.from, c.addr = a, a.String()
	c.mu.Unlock()
}

// name is the client's address as last seen.
func (c *client) name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

func (c *client) lastFrom() *net.UDPAddr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.from
}

func (c *client) replyPort() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rport
}

func (c *client) setReplyPort(p int) {
	c.mu.Lock()
	c.rport = p
	c.mu.Unlock()
}

func (c *client) setAlwaysReply(on bool) {
	c.mu.Lock()
	c.quiet = !on
	c.mu.Unlock()
}

// reply answers a message unless the client turned replies off. A UDP
// reply is sent only within the budget of the packet it answers (ctx's,
// see withBudget) and the reply rate of the client's host; one that is
// not is dropped and counted.
func (c *client) reply(ctx context.Context, address, status string, data any) {
	c.mu.Lock()
	quiet := c.quiet
	c.mu.Unlock()
	if quiet {
		return
	}
	b := encodeReply(address, status, data)
	if b == nil {
		return
	}
	if c.network == "udp" {
		if why := c.s.allowReply(ctx, c.host(), len(b)); why != "" {
			c.s.m.replies.WithLabelValues(why).Inc()
			return
		}
	}
	if err := c.send(b); err != nil {
		c.s.log.Debug("osc: reply not sent", "client", c.name(), "err", err)
		return
	}
	c.s.m.replies.WithLabelValues("sent").Inc()
	c.s.m.replyBytes.Add(float64(len(b)))
}

// subscription is a parsed /holo/subscribe pattern: which boards
// (/holo/board/<p>, /holo/group/<p>, /holo/all) and, optionally, which of
// their feedback addresses (the parts after).
type subscription struct {
	pattern string
	scope   string
	name    string
	rest    string // "" for every feedback address
}

func parseSubscription(p string) (subscription, error) {
	if err := CheckPattern(p); err != nil {
		return subscription{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	parts := strings.Split(p, "/")
	sub := subscription{pattern: p}
	bad := fmt.Errorf("%w: subscribe to /holo/board/<id>, /holo/group/<g> or /holo/all (patterns allowed), optionally followed by feedback parts, or to /holo/cue or /holo/cuelist/<name>, not %q", ErrBadRequest, p)
	if len(parts) < 3 || parts[1] != "holo" {
		return sub, bad
	}
	sub.scope = parts[2]
	switch sub.scope {
	case "board", "group":
		if len(parts) < 4 || parts[3] == "" {
			return sub, bad
		}
		sub.name = parts[3]
		if len(parts) > 4 {
			sub.rest = "/" + strings.Join(parts[4:], "/")
		}
	case "all":
		if len(parts) > 3 {
			sub.rest = "/" + strings.Join(parts[3:], "/")
		}
	case "cue": // every cue list's state (cue.go)
		if len(parts) != 3 {
			return sub, bad
		}
	case "cuelist":
		if len(parts) != 4 || parts[3] == "" {
			return sub, bad
		}
		sub.name = parts[3]
	default:
		return sub, bad
	}
	return sub, nil
}

// covers reports whether the subscription takes feedback address suffix
// (like "/leds") of board b.
func (sub subscription) covers(b fleet.BoardView, suffix string) bool {
	switch sub.scope {
	case "cue", "cuelist":
		return false // cue lists' feedback (coversList), no board's
	case "board":
		if !MatchPart(sub.name, b.ID) {
			return false
		}
	case "group":
		in := false
		for _, g := range b.Groups {
			if MatchPart(sub.name, strconv.Itoa(g)) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return sub.rest == "" || Match(sub.rest, suffix)
}

// feedback is the OSC message of a fleet event, and its address's suffix
// after /holo/board/<id>.
func feedback(ev fleet.Event) (*Message, string) {
	var suffix string
	var args []any
	switch ev.Type {
	case fleet.EventState:
		suffix, args = "/"+ev.Kind, []any{string(ev.Data)}
	case fleet.EventHappening:
		suffix, args = "/event/"+ev.Kind, []any{string(ev.Data)}
	case fleet.EventOnline:
		suffix, args = "/online", []any{int32(1)}
	case fleet.EventOffline:
		suffix, args = "/online", []any{int32(0), ev.Reason}
	case fleet.EventRestarted:
		suffix = "/restarted"
	default:
		return nil, ""
	}
	if ev.Kind == "" && (ev.Type == fleet.EventState || ev.Type == fleet.EventHappening) {
		return nil, ""
	}
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = strings.ReplaceAll(s, "\x00", "")
		}
	}
	return &Message{Address: "/holo/board/" + ev.Board + suffix, Args: args}, suffix
}

// subscribe adds sub and starts the feedback when it is the first (if
// the limits of subscribers let it: else ErrTooMany).
func (c *client) subscribe(ctx context.Context, sub subscription) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, have := range c.subs {
		if have.pattern == sub.pattern {
			c.resetTimerLocked()
			return nil
		}
	}
	if c.cancel != nil {
		c.subs = append(c.subs, sub)
		c.resetTimerLocked()
		return nil
	}
	host := c.hostLocked()
	c.s.mu.Lock()
	ok := c.s.subs.take(host, c.s.o.MaxSubscribersPerHost, c.s.o.MaxSubscribers)
	c.s.mu.Unlock()
	if !ok {
		c.s.m.limited.WithLabelValues("subscribers").Inc()
		return fmt.Errorf("%w: at most %d from one host, %d in all", ErrTooMany, c.s.o.MaxSubscribersPerHost, c.s.o.MaxSubscribers)
	}
	c.subHost = host
	c.subs = append(c.subs, sub)
	ctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.gen++
	gen := c.gen
	c.deadline = c.s.clk.Now().Add(c.s.o.ThumpTimeout)
	c.timer = c.s.clk.AfterFunc(c.s.o.ThumpTimeout, func() { c.expire(gen) })
	c.s.m.subscribers.Inc()
	w := c.s.o.Fleet.Watch(ctx, fleet.Filter{}, fleet.Live)
	q := make(chan []byte, c.s.o.Queue)
	queued := new(atomic.Int64)
	go c.sender(ctx, q, queued)
	go c.feed(ctx, w, q, queued)
	if c.s.o.Cues != nil {
		ch := c.s.o.Cues.Watch(ctx)
		go c.feedCues(ctx, ch, q, func(pkt []byte) bool { return c.enqueue(pkt, q, queued) })
	}
	return nil
}

func (c *client) resetTimerLocked() {
	if c.timer != nil {
		c.deadline = c.s.clk.Now().Add(c.s.o.ThumpTimeout)
		c.timer.Reset(c.s.o.ThumpTimeout)
	}
}

// expire ends subscription gen when its deadline has passed. The timer's
// callback runs on its own goroutine: a thump (or a new subscription)
// that came between the timer firing and this call keeps it (the reset
// timer calls again later).
func (c *client) expire(gen uint64) {
	c.mu.Lock()
	if c.gen != gen || c.cancel == nil || c.s.clk.Now().Before(c.deadline) {
		c.mu.Unlock()
		return
	}
	cancel := c.endLocked()
	c.mu.Unlock()
	c.ended(cancel, "no /holo/thump for "+c.s.o.ThumpTimeout.String())
}

// thump keeps the subscription alive.
func (c *client) thump() {
	c.mu.Lock()
	c.resetTimerLocked()
	c.mu.Unlock()
}

// unsubscribe ends the feedback (why is logged).
func (c *client) unsubscribe(why string) {
	c.mu.Lock()
	cancel := c.endLocked()
	c.mu.Unlock()
	c.ended(cancel, why)
}

// endLocked forgets the running subscription and returns its cancel.
func (c *client) endLocked() context.CancelFunc {
	cancel := c.cancel
	c.cancel, c.subs = nil, nil
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	return cancel
}

// ended stops a subscription endLocked took.
func (c *client) ended(cancel context.CancelFunc, why string) {
	if cancel != nil {
		cancel()
		c.mu.Lock()
		host := c.subHost
		c.mu.Unlock()
		c.s.mu.Lock()
		c.s.subs.give(host)
		c.s.mu.Unlock()
		c.s.m.subscribers.Dec()
		c.s.log.Info("osc: subscription ended", "client", c.network+":"+c.name(), "why", why)
	}
}

func (c *client) stop() { c.unsubscribe("client gone") }

// feed turns the fleet's events into feedback on q; a client whose queue
// is full (Queue messages or MaxFeedbackBytes, counted in queued), or
// whose fleet watcher was cut off, is dropped.
func (c *client) feed(ctx context.Context, w *fleet.Watcher, q chan<- []byte, queued *atomic.Int64) {
	known := map[string]fleet.BoardView{}
	for {
		var ev fleet.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-w.C:
		}
		if !ok {
			if ctx.Err() == nil {
				c.drop("the fleet's event queue overflowed")
			}
			return
		}
		m, suffix := feedback(ev)
		if m == nil {
			continue
		}
		b, have := known[ev.Board]
		if !have || ev.Type == fleet.EventOnline || ev.Type == fleet.EventRestarted {
			bs := c.s.o.Fleet.Boards(fleet.Filter{IDs: []string{ev.Board}})
			if len(bs) == 0 {
				continue
			}
			b = bs[0]
			known[ev.Board] = b
		}
		c.mu.Lock()
		want := false
		for _, sub := range c.subs {
			if sub.covers(b, suffix) {
				want = true
				break
			}
		}
		c.mu.Unlock()
		if !want {
			continue
		}
		pkt, err := Encode(m)
		if err != nil {
			continue
		}
		if !c.enqueue(pkt, q, queued) {
			return
		}
	}
}

// enqueue puts a feedback packet on q; false means the client was
// dropped (its queue is full: Queue messages or MaxFeedbackBytes).
func (c *client) enqueue(pkt []byte, q chan<- []byte, queued *atomic.Int64) bool {
	if n := queued.Add(int64(len(pkt))); n > int64(c.s.o.MaxFeedbackBytes) {
		c.drop(fmt.Sprintf("more than %d bytes waiting", c.s.o.MaxFeedbackBytes))
		return false
	}
	select {
	case q <- pkt:
		c.s.m.feedback.Inc()
		return true
	default:
		c.drop(fmt.Sprintf("more than %d messages waiting", cap(q)))
		return false
	}
}

// sender writes q's feedback to the client, in order.
func (c *client) sender(ctx context.Context, q <-chan []byte, queued *atomic.Int64) {
	for {
		select {
		case <-ctx.Done():
			return
		case pkt := <-q:
			queued.Add(-int64(len(pkt)))
			if err := c.send(pkt); err != nil {
				c.s.log.Debug("osc: feedback not sent", "client", c.name(), "err", err)
			}
		}
	}
}

// drop ends a subscriber that cannot keep up.
func (c *client) drop(why string) {
	c.s.log.Warn("osc: subscriber dropped: it cannot keep up", "client", c.network+":"+c.name(), "why", why)
	c.s.m.dropped.Inc()
	c.unsubscribe("dropped: " + why)
}
