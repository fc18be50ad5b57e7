package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/gateway/action"
	"github.com/holofleet/holofleet/gateway/fault"
)

// Timed fire: an Action with At changes every selected board at that
// moment (docs/actions.md, "Timed fire").
//
//	how        boards                                  the gateway...
//	FireLine   reached by a group frame on a line      has the line end the frame (its last
//	                                                   byte) at At: the line starts it its wire
//	                                                   time early and keeps itself free before
//	                                                   (fleet.TimedLine); a line that cannot
//	                                                   time sends gets the frame at At
//	FireBoard  called one by one, with a clock         sends at once, with fire_at: At on the
//	           aligned to within FireUncertainty and   board's clock; the board answers 202 and
//	           the board's "fire" feature               changes at its moment
//	FireGateway called one by one, otherwise           waits for At and calls then
//
// A moment already past fires at once (late); one more than MaxFireLead
// ahead or MaxFirePast behind is ErrBadTime, and nothing is sent. "Now"
// (a zero At) takes none of these paths: Do runs as it always did.
const (
	FireLine    = "line"
	FireBoard   = "board"
	FireGateway = "gateway"
)

// Bounds of a fire time.
const (
	// MaxFireLead is how far ahead a fire may be timed: as far as a
	// board takes a scheduled change.
	MaxFireLead = boardapi.MaxFireLead
	// MaxFirePast is how far behind a fire time may be (then it fires
	// at once); further is a mistake (a clock, a time zone) and refused.
	MaxFirePast = 10 * time.Second
	// DefaultFireUncertainty is the largest clock uncertainty a board's
	// scheduled apply is trusted with; a board whose clock is known less
	// well is fired by the gateway at the moment.
	DefaultFireUncertainty = 2 * time.Millisecond
)

// ErrBadTime: a fire time more than MaxFireLead ahead or MaxFirePast
// behind; nothing was sent.
var ErrBadTime = fault.New(fault.Invalid, "fleet: bad fire time")

// FireReport is one timed fire as the gateway knows it, for metrics
// (ObserveFire): the requested moment and each board's change.
type FireReport struct {
	Kind string
	At   time.Time
	// Changes are the boards that changed (or were sent the change),
	// in the order of Do's results; boards that failed are left out.
	Changes []FireChange
}

// FireChange is when one board changed, by the way it was fired.
//
//	FireLine     when the frame's last byte left the wire (the line's
//	             measure: the write's start plus the frame's wire time)
//	FireBoard    At itself when the board scheduled it (its clock's
//	             uncertainty bounds the error); when the board made the
//	             change at once instead (it came late, or the board did not
//	             schedule), as FireGateway
//	FireGateway  midway between sending the call and its reply, which
//	             the change lies between
type FireChange struct {
	Board string
	How   string
	At    time.Time
}

// Lateness is how long after the requested moment the board changed
// (negative: before).
func (c FireChange) Lateness(at time.Time) time.Duration { return c.At.Sub(at) }

// Skew is the time between the first and the last change of a fire (0
// for fewer than two).
func (r FireReport) Skew() time.Duration {
	if len(r.Changes) < 2 {
		return 0
	}
	lo, hi := r.Changes[0].At, r.Changes[0].At
	for _, c := range r.Changes[1:] {
		if c.At.Before(lo) {
			lo = c.At
		}
		if c.At.After(hi) {
			hi = c.At
		}
	}
	return hi.Sub(lo)
}

// ObserveFire adds fn to the functions called after every timed fire,
// on Do's goroutine; fn must not block.
func (f *Fleet) ObserveFire(fn func(FireReport)) {
	f.obs.mu.Lock()
	defer f.obs.mu.Unlock()
	f.obs.fires = append(f.obs.fires[:len(f.obs.fires):len(f.obs.fires)], fn)
}

// FireTime resolves a's fire time at now: a lead becomes the moment it
// names (At, Lead zero), so that an action passed on (to another gateway)
// keeps its moment; a time out of bounds is ErrBadTime. A zero result
// fires now. A zero now checks the time's form only (At or Lead, a lead
// 0-MaxFireLead) and leaves a lead as it is.
func FireTime(a Action, now time.Time) (Action, error) {
	if a.Lead != 0 {
		if !a.At.IsZero() || a.Lead < 0 || a.Lead > MaxFireLead {
			return a, fmt.Errorf("%w: a lead of %v (0-%v, and not with a moment)", ErrBadTime, a.Lead, MaxFireLead)
		}
		if now.IsZero() {
			return a, nil
		}
		a.At, a.Lead = now.Add(a.Lead), 0
	}
	if !a.At.IsZero() && !now.IsZero() {
		if err := CheckFireTime(a.At, now); err != nil {
			return a, err
		}
	}
	return a, nil
}

// CheckFireTime checks a fire moment at against now: at most MaxFireLead
// ahead and MaxFirePast behind, else ErrBadTime.
func CheckFireTime(at, now time.Time) error {
	d := at.Sub(now)
	switch {
	case d > MaxFireLead:
		return fmt.Errorf("%w: %v ahead (at most %v)", ErrBadTime, d.Round(time.Millisecond), MaxFireLead)
	case d < -MaxFirePast:
		return fmt.Errorf("%w: %v in the past (at most %v; a moment passed fires at once)", ErrBadTime, -d.Round(time.Millisecond), MaxFirePast)
	}
	return nil
}

// fireUncertainty is the largest uncertainty a board's scheduled apply
// is trusted with.
func (f *Fleet) fireUncertainty() time.Duration {
	if f.o.FireUncertainty > 0 {
		return f.o.FireUncertainty
	}
	return DefaultFireUncertainty
}

// doAt is Do for an action with a fire time (see the table above).
func (f *Fleet) doAt(ctx context.Context, a Action, ab action.Body, sends []groupSend, single []string) []Result {
	req := ab.Request()
	native, hasNative := ab.Native()
	at := a.At
	results := map[string]Result{}
	changes := map[string]FireChange{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := func(r Result, how string, when time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if r.Error == "" && !when.IsZero() {
			r.Fire, r.FiredAt = how, when
			changes[r.Board] = FireChange{Board: r.Board, How: how, At: when}
		}
		results[r.Board] = r
	}

	clip := startsClip(ab)
	for _, ss := range perLine(sends) {
		wg.Go(func() {
			for _, s := range ss {
				req, native := req, native
				if clip {
					if hasNative {
						native = f.nativeClipStart(native, at, s.members)
					} else {
						req.Path = withQuery(req.Path, f.clipStart(at, s.members...))
					}
				}
				end, err := f.groupAt(ctx, s, hasNative, native, req, at)
				// A timed frame's command time runs from its moment (the
				// lead is no work of the line's).
				start := at
				if now := f.clk.Now(); now.Before(at) {
					start = now
				}
				f.observe(ViaGroup, a.Kind, start, err)
				for _, id := range s.members {
					r := Result{Board: id, Via: ViaGroup}
					if err != nil {
						r.Error = err.Error()
					}
					done(r, FireLine, end)
				}
			}
		})
	}
	sem := make(chan struct{}, f.o.Concurrency)
	for _, id := range single {
		wg.Go(func() {
			req := req
			if clip {
				req.Path = withQuery(req.Path, f.clipStart(at, id))
			}
			r, how, when := f.fireOne(ctx, sem, id, a.Kind, req, at)
			done(r, how, when)
		})
	}
	wg.Wait()
	out := make([]Result, 0, len(results))
	rep := FireReport{Kind: a.Kind, At: at}
	for _, id := range sortedKeys(results) {
		out = append(out, results[id])
		if c, ok := changes[id]; ok {
			rep.Changes = append(rep.Changes, c)
		}
	}
	f.reportFire(rep)
	return out
}

// groupAt sends one group frame (or JSON line) timed to end at at, and
// returns when its last byte left the wire.
func (f *Fleet) groupAt(ctx context.Context, s groupSend, hasNative bool, native frame.Request, req action.Request, at time.Time) (time.Time, error) {
	if tl, ok := s.line.(TimedLine); ok {
		if hasNative {
			return tl.GroupAt(ctx, s.group, native, at)
		}
		return tl.GroupCallAt(ctx, s.group, req.Method, req.Path, req.Body, at)
	}
	if err := clock.Until(ctx, f.clk, at); err != nil {
		return time.Time{}, err
	}
	var err error
	if hasNative {
		err = s.line.Group(ctx, s.group, native)
	} else {
		err = s.line.GroupCall(ctx, s.group, req.Method, req.Path, req.Body)
	}
	return f.clk.Now(), err
}

// fireOne fires one board called by itself: scheduled on the board when
// its clock is aligned and it has the feature, else by the gateway at
// the moment. It returns the result, how, and when the board changed
// (zero when unknown).
func (f *Fleet) fireOne(ctx context.Context, sem chan struct{}, id, kind string, req action.Request, at time.Time) (Result, string, time.Time) {
	f.mu.Lock()
	var bc *BoardClock
	canFire := false
	if b := f.boards[id]; b != nil {
		bc, canFire = b.clock(), b.fire
	}
	f.mu.Unlock()
	path, how := req.Path, FireGateway
	if bc != nil && canFire && time.Duration(bc.UncertaintyUS)*time.Microsecond <= f.fireUncertainty() {
		if us, ok := bc.BoardTime(at); ok {
			path = withQuery(path, boardapi.QueryFireAt+"="+strconv.FormatInt(us, 10))
			how = FireBoard
		}
	}
	if how == FireGateway {
		if err := clock.Until(ctx, f.clk, at); err != nil {
			return Result{Board: id, Error: err.Error()}, how, time.Time{}
		}
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return Result{Board: id, Error: ctx.Err().Error()}, how, time.Time{}
	}
	defer func() { <-sem }()
	start := f.clk.Now()
	rep, via, err := f.call(ctx, id, req.Method, path, req.Body)
	f.observe(via, kind, start, err)
	r := Result{Board: id, Via: via, Reply: rep}
	if err != nil {
		r.Error = err.Error()
		return r, how, time.Time{}
	}
	r.Error, r.Message = boardRefusal(rep)
	if how == FireBoard && scheduled(rep) {
		return r, how, at
	}
	// Made at once: between sending and the reply.
	return r, how, start.Add(f.clk.Since(start) / 2)
}

// withQuery adds the query parameter kv ("name=value") to path; an empty
// kv leaves it as it is.
func withQuery(path, kv string) string {
	if kv == "" {
		return path
	}
	if strings.Contains(path, "?") {
		return path + "&" + kv
	}
	return path + "?" + kv
}

// startsClip reports whether an action may start a clip: a show of a file
// (a clip, or an image, which ignores clip_start) or a scene applied (the
// gateway does not know the scenes saved on boards; a scene without a
// clip ignores clip_start).
func startsClip(ab action.Body) bool {
	switch b := ab.(type) {
	case action.ScreenShow:
		return b.Path != nil
	case action.SceneApply:
		return true
	}
	return false
}

// clipStart is the clip_start parameter (extension clip-sync) of a clip
// timed at at, for boards ids: the moment on the gateway's time they were
// told (PUT /time), from the first of them whose clock is measured, so
// that every board's clip starts its timeline then, however late each
// takes the request; "" when none is measured. Boards without the
// extension ignore the parameter, as any unknown one.
func (f *Fleet) clipStart(at time.Time, ids ...string) string {
	if us, ok := f.clipStartUS(at, ids, false); ok {
		return boardapi.QueryClipStart + "=" + strconv.FormatInt(us, 10)
	}
	return ""
}

// nativeClipStart is a line's native SCENE frame for boards ids with the
// clip start of a scene timed at at (the frame's appended field), when
// every one of them lists the clip-sync extension: a board of the
// specification alone might refuse the longer frame, so a group with one
// such board gets the one-byte frame, whose boards start the clip when
// they take it. Other native messages are returned as they are.
func (f *Fleet) nativeClipStart(native frame.Request, at time.Time, ids []string) frame.Request {
	sr, ok := native.(frame.SceneRequest)
	if !ok {
		return native
	}
	if us, ok := f.clipStartUS(at, ids, true); ok {
		sr.ClipStartUS = us
	}
	return sr
}

// clipStartUS is the moment at in the gateway's time as boards ids were
// told it (see clipStart); with all, only when every one of them lists
// the clip-sync extension.
func (f *Fleet) clipStartUS(at time.Time, ids []string, all bool) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	us, found := int64(0), false
	for _, id := range ids {
		b := f.boards[id]
		if all && (b == nil || !b.clipSync) {
			return 0, false
		}
		if b == nil || found {
			continue
		}
		if bc := b.clock(); bc != nil {
			us, found = bc.GatewayUS(at)
		}
	}
	return us, found
}

// scheduled reports whether a reply is a board's FireReply.
func scheduled(rep Reply) bool {
	if rep.Status != http.StatusAccepted {
		return false
	}
	var fr boardapi.FireReply
	return json.Unmarshal(rep.Body, &fr) == nil && fr.Scheduled
}

func (f *Fleet) reportFire(r FireReport) {
	f.obs.mu.Lock()
	fns := f.obs.fires
	f.obs.mu.Unlock()
	for _, fn := range fns {
		fn(r)
	}
}

// hasFire reports whether a board takes fire_at: /info lists the fire
// extension in extensions, or (boards from before that field) in features.
func hasFire(fields infoFields) bool {
	return boardapi.HasExtension(fields.Features, fields.Extensions, boardapi.ExtensionFire)
}

// hasClipSync reports whether a board's /info lists the clip-sync
// extension (its SCENE frame takes a clip start).
func hasClipSync(fields infoFields) bool {
	return boardapi.HasExtension(fields.Features, fields.Extensions, boardapi.ExtensionClipSync)
}
