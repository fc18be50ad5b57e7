// Package fire is the board's scheduled apply: a changing request that
// names a moment is checked at once, answered 202, and its change made at
// that moment, so that boards a gateway told ahead change together.
//
// # The request
//
// A route with api.Route.Prepare (PATCH /leds, POST /screen/show, DELETE
// /screen, POST /holo/motion, POST /scenes/apply, POST /scenes/end) takes
// one of two query parameters (bus/boardapi: QueryFireAt, QueryAtMS):
//
//	fire_at=N  the moment on the board's clock, microseconds since the
//	           board started: the clock GET /time reports (t2, t3), which a
//	           gateway aligns with its own
//	at_ms=N    a lead in milliseconds from the moment the board took the
//	           request, 0-60000, for clients without an aligned clock
//
// Without either the route runs as it always did (its Handler, untouched:
// "now" costs nothing more). With one:
//
//	both, or a value that is not an integer     400 bad_request
//	more than MaxFireLead (60 s) ahead           400 bad_request
//	fire_at more than MaxFireLate (10 s) past    400 bad_request (a moment of
//	                                             an earlier boot, most likely)
//	at or before now (fire_at up to 10 s past)   made at once, answered as
//	                                             without a time
//	the request refused by Prepare               that error, as without a time
//	MaxFirePending (64) changes already waiting  409 busy
//	otherwise                                    202 boardapi.FireReply, and
//	                                             the change is made then
//
// # Making the change
//
// One goroutine per boot makes the scheduled changes in order of their
// moments (requests for the same moment in the order they came), waiting
// with clock.Until: on the real clock it wakes within microseconds of the
// moment, not whenever the operating system's timer does. A change that
// fails then (a scene deleted in between, not_running for a scene end
// whose scene never started) is logged and counted (Stats), as nobody
// waits for its reply any more. A restart drops the changes not made yet:
// the board's clock starts over, and so does what it was told.
package fire

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/timesync"
)

// Limits, from the shared vocabulary (docs/spec-decisions.md).
const (
	MaxLead    = boardapi.MaxFireLead
	MaxLate    = boardapi.MaxFireLate
	MaxPending = boardapi.MaxFirePending
	// MaxAtMS is the largest at_ms.
	MaxAtMS = int64(MaxLead / time.Millisecond)
)

// Params are the query parameters a schedulable route gains, for
// openapi.json.
var Params = []api.Param{
	{Name: boardapi.QueryFireAt, Type: "integer",
		Description: "make the change at this moment of the board's clock (µs since it started, as GET /time), at most 60 s ahead: the reply is 202 at once"},
	{Name: boardapi.QueryAtMS, Type: "integer",
		Description: "make the change this many milliseconds (0-60000) after the request arrives: the reply is 202 at once"},
}

// Options configure a Scheduler.
type Options struct {
	// Clock runs the timers; Board is the board's µs clock on it (the
	// boot's timesync.Clock).
	Clock clock.Clock
	Board timesync.Clock
	Log   *slog.Logger
}

// Stats are a scheduler's counters.
type Stats struct {
	Scheduled, Applied, Failed, Dropped uint64
	// Pending is how many changes wait now.
	Pending int
	// LateMax is the latest a change was made after its moment.
	LateMax time.Duration
}

// Scheduler holds one boot's scheduled changes. Make it with New and run
// it with Run (the boot's goroutine); Wrap installs it on routes.
type Scheduler struct {
	o    Options
	wake chan struct{}

	mu      sync.Mutex
	pending []*pending // by moment, then arrival
	n       uint64
	st      Stats
	stopped bool
}

type pending struct {
	at     time.Time // on Options.Clock
	n      uint64
	what   string
	change api.Change
}

// New makes a scheduler.
func New(o Options) *Scheduler {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{o: o, wake: make(chan struct{}, 1)}
}

// Wrap returns r serving scheduled requests too, when it has Prepare;
// other routes come back as they are.
func (s *Scheduler) Wrap(r api.Route) api.Route {
	if r.Prepare == nil {
		return r
	}
	now := r.Handler
	if now == nil {
		now = api.Prepared(r.Prepare)
	}
	prepare, what := r.Prepare, r.Method+" "+r.Path
	r.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		if !q.Has(boardapi.QueryFireAt) && !q.Has(boardapi.QueryAtMS) {
			now.ServeHTTP(w, req)
			return
		}
		s.serve(w, req, what, prepare, now)
	})
	r.Query = append(slices.Clip(r.Query), Params...)
	r.Accepted = boardapi.FireReply{}
	return r
}

// When reads a request's moment: how far from now (negative: past) and
// the board time it stands for. ok is false when the request names none.
func (s *Scheduler) When(q url.Values) (lead time.Duration, at int64, ok bool, err error) {
	hasAt, hasMS := q.Has(boardapi.QueryFireAt), q.Has(boardapi.QueryAtMS)
	if !hasAt && !hasMS {
		return 0, 0, false, nil
	}
	if hasAt && hasMS {
		return 0, 0, true, api.Errorf(api.ErrBadRequest, "give fire_at or at_ms, not both")
	}
	nowUS := s.o.Board.Micros()
	if hasMS {
		ms, err := strconv.ParseInt(q.Get(boardapi.QueryAtMS), 10, 64)
		if err != nil || ms < 0 || ms > MaxAtMS {
			return 0, 0, true, api.Errorf(api.ErrBadRequest, "at_ms must be an integer 0-%d, not %q", MaxAtMS, q.Get(boardapi.QueryAtMS))
		}
		return time.Duration(ms) * time.Millisecond, nowUS + ms*1000, true, nil
	}
	at, err = strconv.ParseInt(q.Get(boardapi.QueryFireAt), 10, 64)
	if err != nil {
		return 0, 0, true, api.Errorf(api.ErrBadRequest, "fire_at must be an integer (µs on the board's clock, as GET /time), not %q", q.Get(boardapi.QueryFireAt))
	}
	d := at - nowUS // nowUS is positive: only a very negative at wraps
	if at < 0 && d > 0 {
		d = -1 << 62
	}
	switch {
	case d > MaxLead.Microseconds():
		return 0, at, true, api.Errorf(api.ErrBadRequest, "fire_at %d is %d ms ahead of the board's clock (%d); at most %d ms",
			at, d/1000, nowUS, MaxLead.Milliseconds())
	case d < -MaxLate.Microseconds():
		return 0, at, true, api.Errorf(api.ErrBadRequest, "fire_at %d is %d ms behind the board's clock (%d); at most %d ms (the board restarted?)",
			at, -d/1000, nowUS, MaxLate.Milliseconds())
	}
	return time.Duration(d) * time.Microsecond, at, true, nil
}

// serve answers a request that names a moment.
func (s *Scheduler) serve(w http.ResponseWriter, r *http.Request, what string, prepare func(*http.Request) (api.Change, error), now http.Handler) {
	lead, at, _, err := s.When(r.URL.Query())
	if err != nil {
		api.WriteError(w, err)
		return
	}
	if lead <= 0 {
		now.ServeHTTP(w, r)
		return
	}
	moment := s.o.Board.Time(at)
	c, err := prepare(r)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	s.mu.Lock()
	if s.stopped || len(s.pending) >= MaxPending {
		stopped := s.stopped
		s.mu.Unlock()
		c.Drop()
		if stopped {
			api.WriteError(w, api.Errorf(api.ErrBusy, "the board is restarting"))
			return
		}
		api.WriteError(w, api.Errorf(api.ErrBusy, "%d changes are scheduled already (at most %d)", MaxPending, MaxPending))
		return
	}
	s.n++
	p := &pending{at: moment, n: s.n, what: what, change: c}
	i, _ := slices.BinarySearchFunc(s.pending, p, func(a, b *pending) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return int(a.n) - int(b.n)
	})
	s.pending = slices.Insert(s.pending, i, p)
	s.st.Scheduled++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	api.WriteJSON(w, http.StatusAccepted, boardapi.FireReply{Scheduled: true, FireAt: at, InUS: lead.Microseconds()})
}

// Run makes the scheduled changes at their moments until ctx ends; then
// it drops the changes still waiting and refuses new ones.
func (s *Scheduler) Run(ctx context.Context) {
	defer s.stop()
	for ctx.Err() == nil {
		s.mu.Lock()
		var next *pending
		if len(s.pending) > 0 {
			next = s.pending[0]
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-ctx.Done():
			case <-s.wake:
			}
			continue
		}
		// Sleep on a timer until the last stretch, where a change that
		// comes in for an earlier moment can still wake it; clock.Until
		// then waits out the moment exactly.
		if d := next.at.Sub(s.o.Clock.Now()); d > clock.SpinWindow {
			t := s.o.Clock.NewTimer(d - clock.SpinWindow)
			select {
			case <-ctx.Done():
			case <-s.wake:
			case <-t.C():
			}
			t.Stop()
			continue
		}
		if clock.Until(ctx, s.o.Clock, next.at) != nil {
			continue
		}
		s.due()
	}
}

// due makes every change whose moment has come, in order.
func (s *Scheduler) due() {
	now := s.o.Clock.Now()
	s.mu.Lock()
	i := 0
	for i < len(s.pending) && !s.pending[i].at.After(now) {
		i++
	}
	list := slices.Clone(s.pending[:i])
	s.pending = slices.Delete(s.pending, 0, i)
	s.mu.Unlock()
	for _, p := range list {
		late := s.o.Clock.Since(p.at)
		status, _, err := p.change.Apply()
		s.mu.Lock()
		s.st.LateMax = max(s.st.LateMax, late)
		if err != nil {
			s.st.Failed++
		} else {
			s.st.Applied++
		}
		s.mu.Unlock()
		if err != nil {
			s.o.Log.Warn("fire: a scheduled change failed", "request", p.what, "err", err)
		} else {
			s.o.Log.Debug("fire: scheduled change made", "request", p.what, "status", status, "late", late)
		}
	}
}

// stop drops what waits and refuses what comes.
func (s *Scheduler) stop() {
	s.mu.Lock()
	list := s.pending
	s.pending, s.stopped = nil, true
	s.st.Dropped += uint64(len(list))
	s.mu.Unlock()
	for _, p := range list {
		p.change.Drop()
	}
	if len(list) > 0 {
		s.o.Log.Info("fire: scheduled changes dropped at the end of the boot", "count", len(list))
	}
}

// Stats returns the counters.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Pending = len(s.pending)
	return st
}
