package osc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Defaults of Options.
const (
	DefaultThumpTimeout = 30 * time.Second
	DefaultQueue        = 1024
	// MaxClients bounds the UDP clients whose settings are kept.
	MaxClients = 1024
	// DefaultMaxTimedPerSource and DefaultMaxTimed bound the timed
	// bundles waiting for their moment: from one source host, and in all.
	DefaultMaxTimedPerSource = 16
	DefaultMaxTimed          = 256
	// DefaultReplyRate is how many replies a UDP source host gets per
	// second (a burst of as many), whatever it sends.
	DefaultReplyRate = 100
	// DefaultReplyAllowance is how many bytes the replies to one UDP
	// packet may weigh beyond the packet's own size.
	DefaultReplyAllowance = 1024
	// Defaults of the connection and subscriber limits: TCP connections
	// per source host and in all, subscribers (UDP and TCP) per source
	// host and in all, the feedback bytes waiting for one subscriber, and
	// how long a TCP connection may send nothing before it is closed.
	DefaultMaxConnsPerHost       = 16
	DefaultMaxConns              = 256
	DefaultMaxSubscribersPerHost = 16
	DefaultMaxSubscribers        = 256
	DefaultMaxFeedbackBytes      = 1 << 20
	DefaultIdleTimeout           = 5 * time.Minute
)

// Errors of timed bundles (their replies carry them).
var (
	// ErrTooFar: a bundle timed further ahead than fleet.MaxFireLead, the
	// fire horizon of every action (an action's fire_at is refused alike).
	ErrTooFar = fault.New(fault.Invalid, "osc: bundle timed too far ahead")
	// ErrBusy: too many timed bundles wait already (from this host or in
	// all).
	ErrBusy = fault.New(fault.Busy, "osc: too many timed bundles waiting")
	// ErrTooMany: a limit of subscribers (from this host or in all) is
	// reached.
	ErrTooMany = fault.New(fault.Busy, "osc: too many subscribers")
)

// Reply statuses: an error's is its class's (package fault's table,
// which every surface reads; outcome).
const (
	StatusOK     = fault.StatusOK
	StatusError  = fault.StatusError
	StatusDenied = fault.StatusDenied
)

// outcome is the reply status and the audit code (the gRPC code's name,
// as every surface records it) of an error, by its class.
func outcome(err error) (status, code string) {
	c := fault.Of(err)
	return c.OSC(), c.GRPC().String()
}

// Fleet is what the server needs of the fleet core.
type Fleet interface {
	Boards(f fleet.Filter) []fleet.BoardView
	Do(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error)
	Watch(ctx context.Context, f fleet.Filter, after uint64) *fleet.Watcher
}

// Options configure a Server.
type Options struct {
	// Addr is where UDP and TCP listen (host:port; port 0 picks one free
	// for both).
	Addr  string
	Fleet Fleet
	// Cues runs the cue addresses (cue.go); nil answers them error.
	Cues Cues
	// Guard decides and records; its Authorize is asked with an identity
	// "osc:<client address>" of Role.
	Guard *auth.Guard
	// Role is every OSC client's role (OSC has no authentication):
	// RoleNone denies everything, RoleViewer lets in subscriptions and
	// feedback, RoleOperator show actions too.
	Role  auth.Role
	Clock clock.Clock
	Log   *slog.Logger
	// Registerer takes the metrics; nil registers none.
	Registerer prometheus.Registerer
	// ThumpTimeout ends a subscription whose client sent no /holo/thump
	// (nor subscribed again) for that long (default 30 s).
	ThumpTimeout time.Duration
	// Queue is how many messages may wait for one client before a
	// subscriber is dropped (default 1024).
	Queue int
	// MaxTimedPerSource and MaxTimed bound the timed bundles waiting for
	// their moment, from one source host and in all (defaults
	// DefaultMaxTimedPerSource, DefaultMaxTimed); a bundle beyond them is
	// refused (ErrBusy).
	MaxTimedPerSource, MaxTimed int
	// ReplyRate bounds the replies to one UDP source host per second
	// (default DefaultReplyRate); see reply budgets in docs/osc.md.
	ReplyRate int
	// ReplyAllowance is how many bytes the replies to one UDP packet may
	// weigh beyond the packet's size (default DefaultReplyAllowance).
	ReplyAllowance int
	// MaxConnsPerHost and MaxConns bound the TCP connections from one
	// source host and in all (defaults DefaultMaxConnsPerHost,
	// DefaultMaxConns); a connection beyond is closed at once.
	MaxConnsPerHost, MaxConns int
	// MaxSubscribersPerHost and MaxSubscribers bound the clients
	// subscribed to feedback from one source host and in all (defaults
	// DefaultMaxSubscribersPerHost, DefaultMaxSubscribers); a
	// subscription beyond is answered error (ErrTooMany).
	MaxSubscribersPerHost, MaxSubscribers int
	// MaxFeedbackBytes bounds the feedback waiting for one subscriber
	// (besides Queue messages); a subscriber beyond is dropped (default
	// DefaultMaxFeedbackBytes).
	MaxFeedbackBytes int
	// IdleTimeout closes a TCP connection that sent nothing for that long
	// on Clock (default DefaultIdleTimeout; a subscriber thumps well
	// within it).
	IdleTimeout time.Duration
}

// Server is the OSC front door. Make it with Listen, run it with Run.
type Server struct {
	o   Options
	clk clock.Clock
	log *slog.Logger
	udp *net.UDPConn
	tcp *net.TCPListener
	m   *metrics

	mu      sync.Mutex
	clients map[string]*client // by "udp:addr" / "tcp:addr"
	ctx     context.Context
	work    sync.WaitGroup // timed show actions waiting for their fire
	// timedBy and timedAll count the timed bundles waiting, by source
	// host and in all.
	timedBy  map[string]int
	timedAll int
	// rates are the UDP reply rates by source host.
	rates map[string]*rate
	// conns and subs count TCP connections and subscribers by host.
	conns, subs *slots
}

// slots counts holders by host, against a limit per host and in all.
type slots struct {
	by  map[string]int
	all int
}

func newSlots() *slots { return &slots{by: map[string]int{}} }

// take takes a slot for host (s.mu held); false when a limit is reached.
func (l *slots) take(host string, perHost, all int) bool {
	if l.by[host] >= perHost || l.all >= all {
		return false
	}
	l.by[host]++
	l.all++
	return true
}

// give gives host's slot back (s.mu held).
func (l *slots) give(host string) {
	if l.by[host]--; l.by[host] <= 0 {
		delete(l.by, host)
	}
	l.all--
}

// Listen binds UDP and TCP on the same port.
func Listen(o Options) (*Server, error) {
	if o.Fleet == nil || o.Guard == nil {
		return nil, errors.New("osc: Fleet and Guard are required")
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.ThumpTimeout = defaults.Positive(o.ThumpTimeout, DefaultThumpTimeout)
	o.IdleTimeout = defaults.Positive(o.IdleTimeout, DefaultIdleTimeout)
	defaults.Positives(map[*int]int{&o.Queue: DefaultQueue, &o.MaxTimedPerSource: DefaultMaxTimedPerSource, &o.MaxTimed: DefaultMaxTimed,
		&o.ReplyRate: DefaultReplyRate, &o.ReplyAllowance: DefaultReplyAllowance,
		&o.MaxConnsPerHost: DefaultMaxConnsPerHost, &o.MaxConns: DefaultMaxConns,
		&o.MaxSubscribersPerHost: DefaultMaxSubscribersPerHost, &o.MaxSubscribers: DefaultMaxSubscribers,
		&o.MaxFeedbackBytes: DefaultMaxFeedbackBytes})
	s := &Server{o: o, clk: o.Clock, log: o.Log, clients: map[string]*client{}, ctx: context.Background(),
		timedBy: map[string]int{}, rates: map[string]*rate{}, conns: newSlots(), subs: newSlots()}
	var err error
	for range 20 { // port 0: TCP picks one, UDP must get the same
		var ln net.Listener
		if ln, err = net.Listen("tcp", o.Addr); err != nil {
			return nil, fmt.Errorf("osc: %w", err)
		}
		tl := ln.(*net.TCPListener)
		port := tl.Addr().(*net.TCPAddr).Port
		host, _, _ := net.SplitHostPort(o.Addr)
		var ua *net.UDPAddr
		if ua, err = net.ResolveUDPAddr("udp", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			tl.Close()
			return nil, fmt.Errorf("osc: %w", err)
		}
		if s.udp, err = net.ListenUDP("udp", ua); err == nil {
			s.tcp = tl
			break
		}
		tl.Close()
		if _, p, _ := net.SplitHostPort(o.Addr); p != "0" {
			return nil, fmt.Errorf("osc: udp: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("osc: udp: %w", err)
	}
	s.m = newMetrics(o.Registerer)
	return s, nil
}

// Addr is the address UDP and TCP listen on.
func (s *Server) Addr() string { return s.tcp.Addr().String() }

// Run serves until ctx ends, then closes the sockets.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		s.udp.Close()
		s.tcp.Close()
	})
	wg.Go(func() { s.serveUDP(ctx) })
	for {
		conn, err := s.tcp.AcceptTCP()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("osc: accept", "err", err)
				cancel()
			}
			break
		}
		host := conn.RemoteAddr().(*net.TCPAddr).IP.String()
		s.mu.Lock()
		ok := s.conns.take(host, s.o.MaxConnsPerHost, s.o.MaxConns)
		s.mu.Unlock()
		if !ok {
			s.m.limited.WithLabelValues("connections").Inc()
			s.log.Debug("osc: tcp connection refused: too many", "client", conn.RemoteAddr().String())
			conn.Close()
			continue
		}
		s.m.conns.Inc()
		wg.Go(func() {
			defer func() {
				s.mu.Lock()
				s.conns.give(host)
				s.mu.Unlock()
				s.m.conns.Dec()
			}()
			s.serveTCP(ctx, conn)
		})
	}
	wg.Wait()
	s.work.Wait()
	s.mu.Lock()
	var cs []*client
	for _, c := range s.clients {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.stop()
	}
	return nil
}

func (s *Server) serveUDP(ctx context.Context) {
	buf := make([]byte, MaxPacket)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("osc: udp read", "err", err)
			}
			return
		}
		c := s.udpClient(ctx, net.UDPAddrFromAddrPort(from))
		s.packet(s.withBudget(ctx, n), c, buf[:n])
	}
}

func (s *Server) serveTCP(ctx context.Context, conn *net.TCPConn) {
	addr := conn.RemoteAddr().(*net.TCPAddr)
	c := s.newClient(ctx, "tcp", addr.String(), nil)
	r := NewStreamReader(conn)
	var wmu sync.Mutex
	c.send = func(pkt []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err := conn.Write(AppendFrame(nil, r.Framing(), pkt))
		return err
	}
	key := "tcp:" + addr.String()
	s.mu.Lock()
	s.clients[key] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.clients, key)
		s.mu.Unlock()
		c.stop()
		conn.Close()
	}()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	idle := s.clk.AfterFunc(s.o.IdleTimeout, func() {
		s.m.limited.WithLabelValues("idle").Inc()
		s.log.Debug("osc: idle tcp connection closed", "client", addr.String(), "after", s.o.IdleTimeout)
		conn.Close()
	})
	defer idle.Stop()
	for {
		pkt, err := r.Next()
		idle.Reset(s.o.IdleTimeout)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				s.log.Debug("osc: tcp client gone", "client", addr.String(), "err", err)
			}
			return
		}
		s.packet(ctx, c, pkt)
	}
}

// udpClient is the kept state of a UDP sender (or a fresh one when too
// many are kept).
func (s *Server) udpClient(ctx context.Context, from *net.UDPAddr) *client {
	// Settings are kept per source host, not per port: tools like oscsend
	// send each message from a fresh port.
	key := "udp:" + from.IP.String()
	s.mu.Lock()
	c := s.clients[key]
	s.mu.Unlock()
	if c != nil {
		c.setFrom(from)
		return c
	}
	c = s.newClient(ctx, "udp", from.String(), nil)
	c.send = func(pkt []byte) error {
		to := c.lastFrom()
		if p := c.replyPort(); p > 0 {
			to = &net.UDPAddr{IP: to.IP, Port: p, Zone: to.Zone}
		}
		_, err := s.udp.WriteToUDP(pkt, to)
		return err
	}
	s.mu.Lock()
	if len(s.clients) < MaxClients {
		if old := s.clients[key]; old != nil {
			c = old
		} else {
			s.clients[key] = c
		}
	}
	s.mu.Unlock()
	c.setFrom(from)
	return c
}

// packet decodes and dispatches one packet.
func (s *Server) packet(ctx context.Context, c *client, b []byte) {
	p, err := Decode(b)
	if err != nil {
		s.m.count(ClassMalformed, StatusError)
		s.log.Debug("osc: malformed packet", "client", c.name(), "err", err)
		return
	}
	s.dispatch(ctx, c, p)
}

// dispatch runs a packet: a message now, a bundle's elements in order, at
// once for Immediately or a time tag not in the future, else at that time
// (timed).
//
// Nothing is scheduled before it is decided: under role none every
// bundle runs at once (each message is refused), a bundle reaching
// further ahead than fleet.MaxFireLead is refused (ErrTooFar), and one
// beyond the caps of waiting bundles too (ErrBusy).
func (s *Server) dispatch(ctx context.Context, c *client, p Packet) {
	switch v := p.(type) {
	case *Message:
		s.message(ctx, c, v, time.Time{})
	case *Bundle:
		now := s.clk.Now()
		if v.Time == Immediately || !v.Time.Time().After(now) || s.o.Role == auth.RoleNone {
			for _, e := range v.Elements {
				s.dispatch(ctx, c, e)
			}
			return
		}
		at := v.Time.Time()
		if last := latest(v.Elements, at); last.Sub(now) > fleet.MaxFireLead {
			s.refuseBundle(ctx, c, v, "horizon", fmt.Errorf("%w: %s is more than %s ahead (the fire horizon)",
				ErrTooFar, last.UTC().Format(time.RFC3339), fleet.MaxFireLead))
			return
		}
		release, err := s.holdTimed(c)
		if err != nil {
			s.refuseBundle(ctx, c, v, "capacity", err)
			return
		}
		run := &timedRun{release: release}
		run.add()
		s.timed(ctx, c, v.Elements, at, run)
		run.done()
	}
}

// latest is the latest moment a bundle's elements run at, for a bundle
// timed at.
func latest(elems []Packet, at time.Time) time.Time {
	last := at
	for _, e := range elems {
		if b, ok := e.(*Bundle); ok {
			inner := at
			if b.Time != Immediately && b.Time.Time().After(at) {
				inner = b.Time.Time()
			}
			if l := latest(b.Elements, inner); l.After(last) {
				last = l
			}
		}
	}
	return last
}

// holdTimed takes a slot for a timed bundle of c's host; release gives it
// back.
func (s *Server) holdTimed(c *client) (release func(), err error) {
	host := c.host()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.timedBy[host] >= s.o.MaxTimedPerSource:
		return nil, fmt.Errorf("%w: %d from %s", ErrBusy, s.o.MaxTimedPerSource, host)
	case s.timedAll >= s.o.MaxTimed:
		return nil, fmt.Errorf("%w: %d in all", ErrBusy, s.o.MaxTimed)
	}
	s.timedBy[host]++
	s.timedAll++
	s.m.timed.Inc()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.timedBy[host]--; s.timedBy[host] <= 0 {
			delete(s.timedBy, host)
		}
		s.timedAll--
		s.m.timed.Dec()
	}, nil
}

// refuseBundle answers each message of a refused timed bundle with err,
// counts the refusal (holo_osc_bundles_refused_total) and records it in
// the audit log (one record for the bundle).
func (s *Server) refuseBundle(ctx context.Context, c *client, b *Bundle, reason string, err error) {
	status, code := outcome(err)
	s.m.refused.WithLabelValues(reason).Inc()
	s.log.Debug("osc: timed bundle refused", "client", c.name(), "err", err)
	s.o.Guard.Record(auth.Attributes{Who: s.identity(c), Surface: auth.SurfaceOSC, Verb: auth.VerbAct,
		Resource: auth.ResActions, Operation: "#bundle", Client: c.name(), Agent: c.network},
		false, code, err.Error())
	var each func(elems []Packet)
	each = func(elems []Packet) {
		for _, e := range elems {
			switch v := e.(type) {
			case *Message:
				s.m.count(classOf(v), status)
				c.reply(ctx, v.Address, status, errData(err))
			case *Bundle:
				each(v.Elements)
			}
		}
	}
	each(b.Elements)
}

// classOf is a message's address class.
func classOf(m *Message) string {
	switch {
	case slices.Contains(sessionAddresses, m.Address):
		return ClassSession
	case m.Address == "/holo/subscribe":
		return ClassSubscribe
	}
	if cls := cueClass(m); cls != "" {
		return cls
	}
	if sa, ok, _ := parseShow(m); ok {
		return sa.Class
	}
	return ClassUnknown
}

// timedRun counts the parts of a timed bundle still to run; the last
// one done releases the bundle's slot.
type timedRun struct {
	n       atomic.Int64
	release func()
}

func (r *timedRun) add() { r.n.Add(1) }

func (r *timedRun) done() {
	if r.n.Add(-1) == 0 {
		r.release()
	}
}

// MaxBundleLead is how far ahead a bundle's show actions go to the fleet
// as one timed fire; a bundle timed further ahead waits on the gateway's
// clock until it is that close.
const MaxBundleLead = fleet.MaxFireLead / 2

// timed runs the elements of a bundle timed for at: its show actions go
// to the fleet at once as a timed fire for at (fleet.Action.At: every
// board changes at that moment, the lines timing their group frames, the
// boards with aligned clocks told ahead), each answered once it fired;
// its other messages (session, subscriptions) run at at on the gateway's
// clock; a nested bundle runs at its own time tag, or at at when that is
// earlier. Every part is counted in run until it ran.
func (s *Server) timed(ctx context.Context, c *client, elems []Packet, at time.Time, run *timedRun) {
	if d := at.Sub(s.clk.Now()); d > MaxBundleLead {
		run.add()
		s.after(ctx, d-MaxBundleLead, func() { s.timed(ctx, c, elems, at, run) }, run.done)
		return
	}
	for _, e := range elems {
		switch v := e.(type) {
		case *Message:
			if _, show, _ := parseShow(v); show {
				run.add()
				s.work.Go(func() {
					defer run.done()
					s.message(ctx, c, v, at)
				})
				continue
			}
			run.add()
			s.after(ctx, at.Sub(s.clk.Now()), func() { s.message(ctx, c, v, time.Time{}) }, run.done)
		case *Bundle:
			inner := at
			if v.Time != Immediately && v.Time.Time().After(at) {
				inner = v.Time.Time()
			}
			s.timed(ctx, c, v.Elements, inner, run)
		}
	}
}

// after runs f after d on the gateway's clock unless ctx ended, then
// done.
func (s *Server) after(ctx context.Context, d time.Duration, f, done func()) {
	s.clk.AfterFunc(max(d, 0), func() {
		defer done()
		if ctx.Err() == nil {
			f()
		}
	})
}

func (s *Server) identity(c *client) auth.Identity {
	return auth.Identity{Name: "osc:" + c.name(), Role: s.o.Role}
}

func (s *Server) attrs(c *client, m *Message) auth.Attributes {
	return auth.Attributes{Who: s.identity(c), Surface: auth.SurfaceOSC, Operation: m.Address, Client: c.name(), Agent: c.network}
}

// message runs one message and answers it; a show action with at fires
// at that moment.
func (s *Server) message(ctx context.Context, c *client, m *Message, at time.Time) {
	class, status, data := s.handle(ctx, c, m, at)
	s.m.count(class, status)
	if class == ClassTimecode && status == StatusOK {
		return // a frame taken is not answered (cue.go)
	}
	c.reply(ctx, m.Address, status, data)
}

func errData(err error) map[string]string { return map[string]string{"error": err.Error()} }

// sessionAddresses are the addresses of class session.
var sessionAddresses = []string{"/holo/replyPort", "/holo/alwaysReply", "/holo/thump", "/holo/unsubscribe"}

// refuseAll answers a client of role none: every request, session ones,
// malformed and unknown ones included, is decided (and so recorded) as a
// refusal and answered denied (docs/osc.md). It reports false if the
// policy let the request in after all.
func (s *Server) refuseAll(c *client, m *Message) (class string, data any, refused bool) {
	a := s.attrs(c, m)
	a.Verb, a.Resource = auth.VerbWatch, auth.ResEvents
	switch {
	case slices.Contains(sessionAddresses, m.Address):
		class = ClassSession
	case m.Address == "/holo/subscribe":
		class = ClassSubscribe
	default:
		class = ClassUnknown
		if cls := cueClass(m); cls != "" {
			class = cls
			a.Verb, a.Resource = auth.VerbAct, auth.ResCues
		} else if sa, ok, _ := parseShow(m); ok {
			class = sa.Class
			a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResActions, sa.Action.Kind
		}
	}
	if _, err := s.o.Guard.Check(a); err != nil {
		return class, errData(err), true
	}
	return class, nil, false
}

func (s *Server) handle(ctx context.Context, c *client, m *Message, at time.Time) (string, string, any) {
	if s.o.Role == auth.RoleNone {
		if class, data, refused := s.refuseAll(c, m); refused {
			return class, StatusDenied, data
		}
	}
	switch m.Address {
	case "/holo/replyPort":
		if len(m.Args) != 1 {
			return ClassSession, StatusError, errData(fmt.Errorf("%w: replyPort takes one int (0: the source port)", ErrBadRequest))
		}
		p, ok := m.Args[0].(int32)
		if !ok || p < 0 || p > 65535 {
			return ClassSession, StatusError, errData(fmt.Errorf("%w: replyPort takes a port 0-65535 (i)", ErrBadRequest))
		}
		c.setReplyPort(int(p))
		return ClassSession, StatusOK, map[string]int32{"replyPort": p}
	case "/holo/alwaysReply":
		if len(m.Args) != 1 {
			return ClassSession, StatusError, errData(fmt.Errorf("%w: alwaysReply takes one int: 1 or 0", ErrBadRequest))
		}
		v, ok := m.Args[0].(int32)
		if !ok {
			return ClassSession, StatusError, errData(fmt.Errorf("%w: alwaysReply takes an int (i)", ErrBadRequest))
		}
		c.setAlwaysReply(v != 0)
		return ClassSession, StatusOK, map[string]bool{"alwaysReply": v != 0}
	case "/holo/thump":
		c.thump()
		return ClassSession, StatusOK, "thump"
	case "/holo/unsubscribe":
		c.unsubscribe("unsubscribed")
		return ClassSession, StatusOK, nil
	case "/holo/subscribe":
		st, data := s.subscribe(ctx, c, m)
		return ClassSubscribe, st, data
	}
	if class, status, data, ok := s.cueMessage(c, m); ok {
		return class, status, data
	}
	sa, ok, err := parseShow(m)
	if !ok {
		return ClassUnknown, StatusError, errData(fmt.Errorf("%w: no such address %q (docs/osc.md)", ErrBadRequest, m.Address))
	}
	a := s.attrs(c, m)
	a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResActions, sa.Action.Kind
	if err != nil {
		status, code := outcome(err)
		s.o.Guard.Record(a, false, code, err.Error())
		return sa.Class, status, errData(err)
	}
	sel, err := selector(sa.Target, s.o.Fleet.Boards(fleet.Filter{}))
	if err != nil {
		status, code := outcome(err)
		s.o.Guard.Record(a, false, code, err.Error())
		return sa.Class, status, errData(err)
	}
	a.Boards = sel.Boards
	if len(sel.Groups) > 0 || sel.All {
		a.Selector = selectorText(sel)
	}
	p, err := s.o.Guard.Check(a)
	if err != nil {
		status, _ := outcome(err)
		return sa.Class, status, errData(err)
	}
	act := sa.Action
	act.At = at
	// The fleet service prepares the action first (fleet.Prepare, the
	// one preparation every surface reaches): the address and arguments
	// only build its body.
	res, err := s.o.Fleet.Do(ctx, sel, act)
	if err != nil {
		status, code := outcome(err)
		p.Done(code)
		return sa.Class, status, errData(err)
	}
	p.Done(auth.CodeOK)
	for _, r := range res {
		if r.Error != "" {
			return sa.Class, StatusError, map[string]any{"results": res}
		}
	}
	return sa.Class, StatusOK, map[string]any{"results": res}
}

func selectorText(sel fleet.Selector) string {
	if sel.All {
		return "all"
	}
	var g []string
	for _, n := range sel.Groups {
		g = append(g, strconv.Itoa(n))
	}
	return "groups=" + strings.Join(g, ",")
}

// subscribe adds a pattern to the client's subscription.
func (s *Server) subscribe(ctx context.Context, c *client, m *Message) (string, any) {
	a := s.attrs(c, m)
	a.Verb, a.Resource = auth.VerbWatch, auth.ResEvents
	if len(m.Args) != 1 {
		return StatusError, errData(fmt.Errorf("%w: subscribe takes one string: an address pattern", ErrBadRequest))
	}
	pat, ok := m.Args[0].(string)
	if !ok {
		return StatusError, errData(fmt.Errorf("%w: subscribe takes a string (s)", ErrBadRequest))
	}
	sub, err := parseSubscription(pat)
	if err != nil {
		return StatusError, errData(err)
	}
	if _, err := s.o.Guard.Check(a); err != nil {
		return StatusDenied, errData(err)
	}
	if err := c.subscribe(ctx, sub); err != nil {
		return StatusError, errData(err)
	}
	return StatusOK, map[string]string{"pattern": pat}
}

// reply is the JSON argument of a /reply message.
type reply struct {
	Address string `json:"address"`
	Status  string `json:"status"`
	Data    any    `json:"data,omitempty"`
}

func encodeReply(address, status string, data any) []byte {
	j, err := json.Marshal(reply{Address: address, Status: status, Data: data})
	if err != nil {
		j, _ = json.Marshal(reply{Address: address, Status: StatusError})
	}
	b, err := Encode(&Message{Address: "/reply" + address, Args: []any{string(j)}})
	if err != nil { // an address holding NUL cannot come from Decode
		return nil
	}
	return b
}
