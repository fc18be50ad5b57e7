package cue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
)

// Bucket is the store bucket holding the cue lists, by name.
const Bucket = "cuelists"

// Defaults of Options.
const (
	// DefaultLead is how far ahead of now GO puts its moment: enough for
	// a polled line to finish its exchange and keep itself free before
	// the timed frame (docs/fire.md), little enough that a GO feels
	// instant.
	DefaultLead = 150 * time.Millisecond
	// DefaultFreewheel is how many frames the chase runs on when
	// timecode stops.
	DefaultFreewheel = 10
	// watchQueue is how many events wait for one watcher before it is
	// cut off.
	watchQueue = 256
)

// Fleet is what the engine needs of the fleet core.
type Fleet interface {
	Do(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error)
}

// Options configure an Engine.
type Options struct {
	// DB keeps the lists; nil keeps them in memory only.
	DB    *store.DB
	Fleet Fleet
	Clock clock.Clock
	Log   *slog.Logger
	// Lead is how far ahead of now GO puts the cue's moment (default
	// DefaultLead); ASAP makes every GO fire now (no timed fire).
	Lead time.Duration
	ASAP bool
	// Freewheel is how many frames the chase runs on when timecode
	// stops (default DefaultFreewheel; negative: none).
	Freewheel int
	// Registerer, when set, takes the engine's metrics (fires and failed
	// fires per list).
	Registerer prometheus.Registerer
}

// Event types.
const (
	EventGo       = "go"       // a GO, a jump or a follow started a cue
	EventFired    = "fired"    // a cue's actions were fired
	EventStopped  = "stopped"  // STOP cancelled waits and follows
	EventStandby  = "standby"  // the standby cue moved (BACK, set)
	EventEdited   = "edited"   // the list was saved
	EventDeleted  = "deleted"  // the list was deleted
	EventTimecode = "timecode" // the chase locked, jumped, freewheeled or stopped
)

// Event is one change of a list's state.
type Event struct {
	N     uint64    `json:"n"`
	List  string    `json:"list"`
	Type  string    `json:"type"`
	Cue   Number    `json:"cue,omitempty"`
	State State     `json:"state"`
	Time  time.Time `json:"time"`
}

// State is a list's live state.
type State struct {
	List string `json:"list"`
	// Standby is the cue GO fires; "" past the last cue.
	Standby      Number    `json:"standby"`
	StandbyName  string    `json:"standby_name,omitempty"`
	StandbyNotes string    `json:"standby_notes,omitempty"`
	Running      []Running `json:"running"`
	Last         *Fired    `json:"last,omitempty"`
	Timecode     *Chase    `json:"timecode,omitempty"`
}

// Running is a cue waiting for its moment (or being fired).
type Running struct {
	Cue  Number `json:"cue"`
	Name string `json:"name,omitempty"`
	// Phase is "follow" (waiting for the cue before it), "pre_wait" or
	// "firing" (handed to the fleet).
	Phase string `json:"phase"`
	// FiresAt is the cue's moment; RemainingMS the time to it.
	FiresAt     time.Time `json:"fires_at"`
	RemainingMS int64     `json:"remaining_ms"`
}

// Phases of a running cue.
const (
	PhaseFollow  = "follow"
	PhasePreWait = "pre_wait"
	PhaseFiring  = "firing"
)

// Fired is the last cue fired and how it went.
type Fired struct {
	Cue  Number `json:"cue"`
	Name string `json:"name,omitempty"`
	// At is the moment it fired for (zero: at once).
	At time.Time `json:"at,omitzero"`
	// Boards is how many board results came back, Failed how many of them
	// failed; Errors are the failures of whole actions.
	Boards int      `json:"boards"`
	Failed int      `json:"failed"`
	Errors []string `json:"errors,omitempty"`
}

// run is one cue waiting for its moment.
type run struct {
	id    uint64
	cue   Cue
	start time.Time // when its pre-wait starts (a follow waits until then)
	at    time.Time // its moment
	now   bool      // fire with no moment (ASAP)
	// followed: started by the cue before it (a follow), not a GO.
	followed bool
	timer    clock.Timer
	firing   bool
}

// list is a cue list and its live state.
type list struct {
	l       List
	standby int // index of the standby cue; len(l.Cues) is the end
	runs    []*run
	last    *Fired
	lastRun *run // the run last is of: a run that ends later but is older does not replace it
	chase   chase
}

// Engine runs the cue lists. Make it with New; Close stops it.
type Engine struct {
	o   Options
	clk clock.Clock
	log *slog.Logger
	ctx context.Context
	m   *metrics

	cancel context.CancelFunc
	work   sync.WaitGroup

	// edit orders saves and deletes, so that the store is written
	// outside mu (a GO never waits for a disk) in the order memory
	// changes.
	edit sync.Mutex

	mu      sync.Mutex
	lists   map[string]*list
	current string // the list /holo/cue/go and holoctl without a name run
	nextRun uint64
	// firedNow: a run due at once went to its goroutine under this
	// hold of mu (the holder yields to it after unlocking: yieldToFire).
	firedNow bool
	n        uint64
	watchers map[*watcher]struct{}
	closed   bool
	// dirty are the lists whose standby persist must save; wake tells it.
	dirty     map[string]bool
	wake      chan struct{}
	persisted chan struct{} // closed when persist returned
}

type watcher struct {
	ch chan Event
}

// New opens the engine with the lists saved in o.DB.
func New(o Options) (*Engine, error) {
	if o.Fleet == nil {
		return nil, errors.New("cue: Options.Fleet is required")
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.Lead = defaults.Positive(o.Lead, DefaultLead)
	if o.Lead > fleet.MaxFireLead {
		return nil, fmt.Errorf("cue: a lead of %v (at most %v)", o.Lead, fleet.MaxFireLead)
	}
	if o.Freewheel == 0 {
		o.Freewheel = DefaultFreewheel
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{o: o, clk: o.Clock, log: o.Log, ctx: ctx, cancel: cancel, m: newMetrics(o.Registerer),
		lists: map[string]*list{}, watchers: map[*watcher]struct{}{},
		dirty: map[string]bool{}, wake: make(chan struct{}, 1), persisted: make(chan struct{})}
	if o.DB != nil {
		err := store.Each(o.DB.Bucket(Bucket), func(name string, l List) error {
			if err := l.Check(); err != nil {
				// A list saved by an older gateway that this one refuses
				// stays in the store, untouched, and is reported.
				e.log.Error("cue: a saved cue list does not check; left out", "list", name, "err", err)
				return nil
			}
			e.lists[l.Name] = &list{l: l}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("cue: reading lists: %w", err)
		}
		e.restore()
		go func() { defer close(e.persisted); e.persist(ctx) }()
	} else {
		close(e.persisted)
	}
	return e, nil
}

// Close cancels every wait and follow and waits for fires in flight.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	for _, ls := range e.lists {
		e.stopRuns(ls)
		ls.chase.stop()
	}
	for w := range e.watchers {
		close(w.ch)
		delete(e.watchers, w)
	}
	e.mu.Unlock()
	e.cancel()
	e.work.Wait()
	<-e.persisted
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Run waits for ctx to end, then closes the engine (a gateway
// component's run).
func (e *Engine) Run(ctx context.Context) error {
	<-ctx.Done()
	e.Close()
	return nil
}

// Lists returns every list, by name.
func (e *Engine) Lists() []List {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]List, 0, len(e.lists))
	for _, ls := range e.lists {
		out = append(out, ls.l.Clone())
	}
	slices.SortFunc(out, func(a, b List) int { return cmpString(a.Name, b.Name) })
	return out
}

// Get returns the list named name.
func (e *Engine) Get(name string) (List, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ls, err := e.list(name)
	if err != nil {
		return List{}, err
	}
	return ls.l.Clone(), nil
}

// Put checks and saves l, replacing a list of its name. The standby
// stays on its cue when the cue is still there, else moves to the next
// one; cues already waiting keep the cue as it was when they started.
func (e *Engine) Put(l List) (List, error) {
	l = l.Clone()
	if err := l.Check(); err != nil {
		return List{}, err
	}
	e.edit.Lock()
	defer e.edit.Unlock()
	if e.isClosed() {
		return List{}, ErrClosed
	}
	if e.o.DB != nil {
		if err := e.o.DB.Bucket(Bucket).Put(l.Name, l); err != nil {
			return List{}, fmt.Errorf("cue: saving %q: %w", l.Name, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ls := e.lists[l.Name]
	if ls == nil {
		ls = &list{}
		e.lists[l.Name] = ls
	} else {
		ls.standby = reposition(ls.l, l, ls.standby)
	}
	ls.l = l
	e.touch(l.Name)
	e.publish(ls, EventEdited, "")
	return l.Clone(), nil
}

// reposition is where the standby at index i of old is in new: the same
// number, else the first cue numbered after it.
func reposition(old, new List, i int) int {
	if i >= len(old.Cues) {
		return len(new.Cues)
	}
	n := old.Cues[i].Number
	for j, c := range new.Cues {
		if c.Number.Compare(n) >= 0 {
			return j
		}
	}
	return len(new.Cues)
}

// Delete removes the list named name, cancelling its waits.
func (e *Engine) Delete(name string) error {
	e.edit.Lock()
	defer e.edit.Unlock()
	l, err := e.Get(name) // "" is the current list
	if err != nil {
		return err
	}
	name = l.Name
	if e.o.DB != nil {
		if err := e.o.DB.Bucket(Bucket).Delete(name); err != nil {
			return fmt.Errorf("cue: deleting %q: %w", name, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ls, err := e.list(name)
	if err != nil {
		return err
	}
	e.stopRuns(ls)
	ls.chase.stop()
	delete(e.lists, name)
	e.touch(name)
	if e.current == name {
		e.current = ""
	}
	e.publish(ls, EventDeleted, "")
	return nil
}

// Current is the list an operation without a name runs: the one last
// run, else the only or first list by name; "" when there is none.
func (e *Engine) Current() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.currentLocked()
}

func (e *Engine) currentLocked() string {
	if _, ok := e.lists[e.current]; ok {
		return e.current
	}
	first := ""
	for name := range e.lists {
		if first == "" || name < first {
			first = name
		}
	}
	return first
}

// list finds a list; "" is the current one. e.mu is held.
func (e *Engine) list(name string) (*list, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if name == "" {
		name = e.currentLocked()
	}
	ls := e.lists[name]
	if ls == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoList, name)
	}
	return ls, nil
}

// State returns the live state of the list named name ("" the current).
func (e *Engine) State(name string) (State, error) {
	return e.operate(name, func(*list) error { return nil })
}

// operate is every operation on one list: it finds the list named name
// ("" the current) under e.mu, runs op on it and returns the list's
// state after op. When op fails, the state is the list's as op left it
// (unchanged: an operation checks before it changes anything).
func (e *Engine) operate(name string, op func(ls *list) error) (State, error) {
	e.mu.Lock()
	ls, err := e.list(name)
	if err != nil {
		e.mu.Unlock()
		return State{}, err
	}
	err = op(ls)
	st := e.state(ls)
	e.yieldToFire()
	return st, err
}

// yieldToFire unlocks e.mu and, when a run due at once went to its
// goroutine meanwhile (a GO asap, a timecode frame passing a cue), yields
// the processor to it: it runs now on this one, on its way to the wire,
// rather than after the caller's reply or on another processor woken for
// it, an OS thread's wake-up which, after the show has been quiet, is
// the slow part of a first GO on a busy host. e.mu is held.
func (e *Engine) yieldToFire() {
	now := e.firedNow
	e.firedNow = false
	e.mu.Unlock()
	if now {
		runtime.Gosched()
	}
}

// state is ls's State now. e.mu is held.
func (e *Engine) state(ls *list) State {
	now := e.clk.Now()
	s := State{List: ls.l.Name, Running: []Running{}}
	if ls.standby < len(ls.l.Cues) {
		c := ls.l.Cues[ls.standby]
		s.Standby, s.StandbyName, s.StandbyNotes = c.Number, c.Name, c.Notes
	}
	for _, r := range ls.runs {
		ph := PhasePreWait
		switch {
		case r.firing:
			ph = PhaseFiring
		case r.followed && now.Before(r.start):
			ph = PhaseFollow
		}
		s.Running = append(s.Running, Running{Cue: r.cue.Number, Name: r.cue.Name, Phase: ph,
			FiresAt: r.at, RemainingMS: max(0, r.at.Sub(now).Milliseconds())})
	}
	if ls.last != nil {
		f := *ls.last
		s.Last = &f
	}
	s.Timecode = ls.chase.view()
	return s
}

// Go fires the standby cue of the list named name ("" the current) at
// the next moment every board can make (now plus the lead; now with
// asap or Options.ASAP), and moves the standby past it and the cues it
// follows into. It returns the state after the GO.
func (e *Engine) Go(name string, asap bool) (State, error) {
	return e.operate(name, func(ls *list) error {
		if ls.standby >= len(ls.l.Cues) {
			return fmt.Errorf("%w: %q", ErrEnd, ls.l.Name)
		}
		e.start(ls, ls.standby, asap)
		return nil
	})
}

// Start fires the cue numbered n of the list (a jump: the standby moves
// past it and its follows), as Go does.
func (e *Engine) Start(name string, n Number, asap bool) (State, error) {
	return e.operate(name, func(ls *list) error {
		i, err := cueIndex(ls, n)
		if err != nil {
			return err
		}
		e.start(ls, i, asap)
		return nil
	})
}

func cueIndex(ls *list, n Number) (int, error) {
	cn, err := ParseNumber(string(n))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoCue, err)
	}
	i := ls.l.index(cn)
	if i < 0 {
		return 0, fmt.Errorf("%w: %s in %q", ErrNoCue, cn, ls.l.Name)
	}
	return i, nil
}

// start schedules cue i and its chain of follows. e.mu is held.
func (e *Engine) start(ls *list, i int, asap bool) {
	asap = asap || e.o.ASAP
	now := e.clk.Now()
	base := now
	if !asap {
		base = now.Add(e.o.Lead)
	}
	e.current = ls.l.Name
	first := ls.l.Cues[i].Number
	for {
		c := ls.l.Cues[i]
		r := e.schedule(ls, c, base, base.Add(c.PreWait()), asap)
		r.followed = c.Number != first
		d, follows := c.followDelay()
		if !follows || i+1 >= len(ls.l.Cues) {
			break
		}
		base = base.Add(c.PreWait()).Add(d)
		i++
	}
	ls.standby = i + 1
	e.touch(ls.l.Name)
	e.publish(ls, EventGo, first)
}

// schedule adds a run of c firing at at, handed to the fleet the lead
// before (at at with asap). e.mu is held.
func (e *Engine) schedule(ls *list, c Cue, start, at time.Time, asap bool) *run {
	e.nextRun++
	r := &run{id: e.nextRun, cue: c, start: start, at: at, now: asap}
	send := at
	if !asap {
		send = at.Add(-e.o.Lead)
	}
	ls.runs = append(ls.runs, r)
	name := ls.l.Name
	e.work.Add(1)
	if d := send.Sub(e.clk.Now()); d > 0 {
		r.timer = e.clk.AfterFunc(d, func() {
			defer e.work.Done()
			e.fire(name, r)
		})
		return r
	}
	// Due now (a GO asap, a cue whose moment has come): it is firing
	// from here on (a STOP keeps it), and its goroutine goes straight to
	// the fleet, without waiting for the engine's lock that the caller
	// holds while it publishes the GO.
	r.firing = true
	e.firedNow = true
	go func() {
		defer e.work.Done()
		e.fired(name, r)
	}()
	return r
}

// fire hands run r's actions to the fleet, all for its moment, and
// records the outcome, unless r was stopped.
func (e *Engine) fire(name string, r *run) {
	e.mu.Lock()
	ls := e.lists[name]
	if e.closed || ls == nil || !slices.Contains(ls.runs, r) {
		e.mu.Unlock()
		return // stopped
	}
	r.firing = true
	e.mu.Unlock()
	e.fired(name, r)
}

// fired hands run r, marked firing, to the fleet and records the outcome.
func (e *Engine) fired(name string, r *run) {
	f := e.do(r.cue, r.at, r.now)
	e.m.count(name, f)

	e.mu.Lock()
	defer e.mu.Unlock()
	ls := e.lists[name]
	if ls == nil {
		return
	}
	ls.runs = slices.DeleteFunc(ls.runs, func(x *run) bool { return x == r })
	// Fires run side by side and may end out of order (one board slow to
	// answer): the last fired is the one of the latest moment, not the
	// one whose answers came in last.
	if p := ls.lastRun; ls.last == nil || p == nil || r.at.After(p.at) || (r.at.Equal(p.at) && r.id > p.id) {
		ls.last, ls.lastRun = &f, r
	}
	e.publish(ls, EventFired, r.cue.Number)
}

// do fires a cue's actions for the moment at (now when asap) and
// summarises the results. Each action is its own fleet.Do, all at once
// and all for the same moment.
func (e *Engine) do(c Cue, at time.Time, asap bool) Fired {
	f := Fired{Cue: c.Number, Name: c.Name}
	if !asap {
		f.At = at
	}
	type out struct {
		res []fleet.Result
		err error
	}
	outs := make([]out, len(c.Actions))
	var wg sync.WaitGroup
	for i, a := range c.Actions {
		act := func() {
			res, err := e.o.Fleet.Do(e.ctx, a.Selector, fleet.Action{Kind: a.Kind, Body: a.Body, At: f.At})
			outs[i] = out{res, err}
		}
		if i == len(c.Actions)-1 {
			act() // the last in this goroutine: one hop fewer on the GO's path
		} else {
			wg.Go(act)
		}
	}
	wg.Wait()
	for i, o := range outs {
		if o.err != nil {
			f.Errors = append(f.Errors, fmt.Sprintf("action %d (%s): %v", i+1, c.Actions[i].Kind, o.err))
			e.log.Warn("cue: an action failed", "cue", c.Number, "action", i+1, "err", o.err)
		}
		for _, r := range o.res {
			f.Boards++
			if r.Error != "" {
				f.Failed++
			}
		}
	}
	return f
}

// Stop cancels every wait and follow of the list ("" the current).
// Fires already handed to the fleet complete.
func (e *Engine) Stop(name string) (State, error) {
	return e.operate(name, func(ls *list) error {
		e.stopRuns(ls)
		e.publish(ls, EventStopped, "")
		return nil
	})
}

// StopAll stops every list.
func (e *Engine) StopAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ls := range e.lists {
		if len(ls.runs) > 0 {
			e.stopRuns(ls)
			e.publish(ls, EventStopped, "")
		}
	}
}

// stopRuns cancels ls's runs that are not firing. e.mu is held.
func (e *Engine) stopRuns(ls *list) {
	kept := ls.runs[:0]
	for _, r := range ls.runs {
		if r.firing {
			kept = append(kept, r)
			continue
		}
		// A run without a timer is on its way to fire: gone from runs,
		// it finds itself stopped.
		if r.timer != nil && r.timer.Stop() {
			e.work.Done() // its func will never run
		}
	}
	ls.runs = kept
}

// Back moves the standby one cue back (it stays on the first).
func (e *Engine) Back(name string) (State, error) {
	return e.operate(name, func(ls *list) error {
		e.moveStandby(ls, max(0, ls.standby-1))
		return nil
	})
}

// SetStandby puts the standby on the cue numbered n without firing it.
func (e *Engine) SetStandby(name string, n Number) (State, error) {
	return e.operate(name, func(ls *list) error {
		i, err := cueIndex(ls, n)
		if err != nil {
			return err
		}
		e.moveStandby(ls, i)
		return nil
	})
}

// moveStandby puts ls's standby on cue i (BACK, set standby): ls becomes
// the current list. e.mu is held.
func (e *Engine) moveStandby(ls *list, i int) {
	ls.standby = i
	e.touch(ls.l.Name)
	e.current = ls.l.Name
	e.publish(ls, EventStandby, e.standbyNumber(ls))
}

func (e *Engine) standbyNumber(ls *list) Number {
	if ls.standby < len(ls.l.Cues) {
		return ls.l.Cues[ls.standby].Number
	}
	return ""
}

// Watch streams every list's events from now until ctx ends. A watcher
// that falls watchQueue events behind is cut off (its channel closes).
func (e *Engine) Watch(ctx context.Context) <-chan Event {
	w := &watcher{ch: make(chan Event, watchQueue)}
	e.mu.Lock()
	if e.closed {
		close(w.ch)
		e.mu.Unlock()
		return w.ch
	}
	e.watchers[w] = struct{}{}
	e.mu.Unlock()
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, ok := e.watchers[w]; ok {
			delete(e.watchers, w)
			close(w.ch)
		}
	})
	return w.ch
}

// publish sends an event of ls to every watcher. e.mu is held.
func (e *Engine) publish(ls *list, typ string, n Number) {
	e.n++
	ev := Event{N: e.n, List: ls.l.Name, Type: typ, Cue: n, State: e.state(ls), Time: e.clk.Now()}
	for w := range e.watchers {
		select {
		case w.ch <- ev:
		default:
			e.log.Warn("cue: a watcher fell behind; cut off")
			delete(e.watchers, w)
			close(w.ch)
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
