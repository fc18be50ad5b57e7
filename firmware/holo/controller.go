package holo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Timing of the controller.
const (
	// ServoFrame is how often a running motion updates the pulses (a
	// servo's own frame is 20 ms).
	ServoFrame = 20 * time.Millisecond
	// PublishInterval is the least time between two published positions
	// while the holo moves.
	PublishInterval = 250 * time.Millisecond
)

// Kind is the event kind of the holo's state.
const Kind = "holo"

// State is the holo's now-state, as GET /holo returns it.
type State struct {
	Motion string  `json:"motion"` // hold, move, twitch, wag, nod, scan, circle, off
	X      float64 `json:"x"`      // -1 (left) .. 1 (right), where the pan horn is
	Y      float64 `json:"y"`      // -1 (down) .. 1 (up), where the tilt horn is
	Moving bool    `json:"moving"` // a horn is travelling
	Ready  bool    `json:"ready"`
	Reason string  `json:"reason,omitempty"` // why not ready
}

// StatusCode is the state as the native status block's holo byte: 0 hold
// (also off), 1 move, 2 twitch, 3 wag, 4 nod, 5 scan, 6 circle, 0xFF when
// the holo cannot move.
func (s State) StatusCode() byte {
	if !s.Ready {
		return 0xFF
	}
	switch s.Motion {
	case boardapi.MotionMove:
		return 1
	case boardapi.MotionTwitch:
		return 2
	case boardapi.MotionWag:
		return 3
	case boardapi.MotionNod:
		return 4
	case boardapi.MotionScan:
		return 5
	case boardapi.MotionCircle:
		return 6
	}
	return 0
}

// Publisher receives state changes; the board's event hub implements it.
type Publisher interface{ SetState(kind string, state any) }

// Store keeps the servos' calibration and policy (the board passes a
// bbolt-backed store). Get reports whether the key was there.
type Store interface {
	Get(key string, v any) (bool, error)
	Put(key string, v any) error
}

// Options configure a Controller.
type Options struct {
	Clock     clock.Clock // required
	Pan, Tilt hal.Servo   // required
	Store     Store       // required
	Publisher Publisher   // may be nil
	Logger    *slog.Logger
	// Seed varies the twitch pattern between boards; any value.
	Seed uint64
}

// Controller owns the two servos. Its methods are safe for concurrent use;
// Run moves them in time and must be running for motions to progress.
type Controller struct {
	clk   clock.Clock
	store Store
	pub   Publisher
	log   *slog.Logger
	seed  uint64

	mu       sync.Mutex
	axes     [2]*axis // pan, tilt
	motion   string   // state motion
	beh      *behaviour
	goal     point // where the last center, move or nudge goes
	start    time.Time
	runs     uint64 // behaviours started, varies the twitch seed
	ticker   clock.Ticker
	active   bool
	rendered time.Time
	notify   chan struct{}
	lastPub  time.Time
	pubState State
}

// New loads the servos' calibration and policy from the store and returns
// a controller holding still with both servos limp.
func New(o Options) (*Controller, error) {
	if o.Clock == nil || o.Pan == nil || o.Tilt == nil || o.Store == nil {
		return nil, fmt.Errorf("%w: clock, pan, tilt and store are required", ErrConfig)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Controller{clk: o.Clock, store: o.Store, pub: o.Publisher, log: log, seed: o.Seed,
		motion: StateOff, notify: make(chan struct{})}
	for i, a := range []*axis{{id: Pan, hw: o.Pan}, {id: Tilt, hw: o.Tilt}} {
		a.policy = DefaultPolicy
		var sv saved
		ok, err := o.Store.Get(storeKey(a.id), &sv)
		if err != nil {
			return nil, fmt.Errorf("holo: loading %s: %w", a.id, err)
		}
		if ok {
			if sv.Calibration != nil && sv.Calibration.Validate() == nil {
				a.cal = sv.Calibration
			}
			a.policy = sv.Policy
		}
		c.axes[i] = a
	}
	c.ticker = o.Clock.NewTicker(ServoFrame)
	c.ticker.Stop()
	c.pubState = c.stateLocked()
	return c, nil
}

// Run moves the servos until ctx ends. Call it once, in its own goroutine.
func (c *Controller) Run(ctx context.Context) error {
	defer c.ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ticker.C():
			c.mu.Lock()
			if c.active {
				c.stepLocked(false)
			}
			c.mu.Unlock()
		}
	}
}

// State returns the holo's state now.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateLocked()
}

func (c *Controller) readyLocked() (bool, string) {
	var missing []string
	for _, a := range c.axes {
		if a.cal == nil {
			missing = append(missing, a.id)
		}
	}
	if len(missing) == 0 {
		return true, ""
	}
	what := "servo " + missing[0] + " is"
	if len(missing) > 1 {
		what = "servos " + strings.Join(missing, " and ") + " are"
	}
	return false, fmt.Sprintf("%s not calibrated (PUT /servos/calibration?id=%s)", what, missing[0])
}

func (c *Controller) stateLocked() State {
	ready, reason := c.readyLocked()
	st := State{Motion: c.motion, Ready: ready, Reason: reason}
	for i, a := range c.axes {
		r := a.record()
		v := math.Round(a.toPos(r.PositionUS)*1000) / 1000
		if i == 0 {
			st.X = v
		} else {
			st.Y = v
		}
		st.Moving = st.Moving || r.Moving
	}
	return st
}

func (c *Controller) posLocked() point {
	var p [2]float64
	for i, a := range c.axes {
		us, _ := a.hw.Position()
		p[i] = max(-1, min(1, a.toPos(us)))
	}
	return point{p[0], p[1]}
}

// Motion starts (or for stop and off, completes) a motion. It validates
// the request first; on error nothing changes. Errors are *api.Error:
// bad_request (boardapi.ErrMotion) or not_ready (ErrNotReady).
func (c *Controller) Motion(m boardapi.MotionRequest) (State, error) {
	p, err := m.Validate()
	if err != nil {
		return State{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m.Motion {
	case boardapi.MotionStop:
		c.holdLocked()
		return c.finishLocked()
	case boardapi.MotionOff:
		c.beh = nil
		err := c.releaseLocked(c.axes[:]...)
		c.motion = StateOff
		st, err2 := c.finishLocked()
		return st, errors.Join(err, err2)
	}
	if ok, reason := c.readyLocked(); !ok {
		return State{}, &apiError{api.Errorf(api.ErrNotReady, "holo cannot move: %s", reason), ErrNotReady}
	}
	now := c.clk.Now()
	home := c.posLocked()
	c.runs++
	b := &behaviour{name: m.Motion, req: m, p: p, home: home, target: home,
		seed: c.seed ^ c.runs*0x2545F4914F6CDD1D}
	b.tw.pos = home
	switch m.Motion {
	case boardapi.MotionCenter:
		b.target = point{}
	case boardapi.MotionMove:
		if m.X != nil {
			b.target.x = *m.X
		}
		if m.Y != nil {
			b.target.y = *m.Y
		}
	case boardapi.MotionNudge:
		if m.X != nil {
			b.target.x += *m.X
		}
		if m.Y != nil {
			b.target.y += *m.Y
		}
		b.target = b.target.clamp()
	}
	c.beh, c.start, c.goal = b, now, b.target
	c.motion = m.Motion
	if m.Motion == boardapi.MotionCenter || m.Motion == boardapi.MotionNudge {
		c.motion = boardapi.MotionMove
	}
	st, err := c.finishLocked()
	return st, err
}

// holdLocked ends a behaviour and holds the horns where they are now.
func (c *Controller) holdLocked() {
	c.beh = nil
	if c.motion == StateOff {
		return
	}
	c.motion = StateHold
	for _, a := range c.axes {
		if us, driven := a.hw.Position(); driven {
			_ = a.drive(us)
		}
	}
}

func (c *Controller) releaseLocked(axes ...*axis) error {
	var errs []error
	for _, a := range axes {
		errs = append(errs, a.release())
	}
	return errors.Join(errs...)
}

// finishLocked publishes and arms the ticker after a change made outside a
// step, and returns the new state.
func (c *Controller) finishLocked() (State, error) {
	err := c.stepLocked(true)
	if c.active {
		c.ticker.Reset(ServoFrame)
	}
	return c.stateLocked(), err
}

// stepLocked advances the running motion to now, applies the drive
// policies of settled servos, publishes what changed and decides whether
// the ticker keeps running. force publishes a change of position at once.
func (c *Controller) stepLocked(force bool) error {
	now := c.clk.Now()
	var errs []error
	if b := c.beh; b != nil {
		p, done := b.at(now.Sub(c.start))
		for i, v := range []float64{p.x, p.y} {
			a := c.axes[i]
			us := a.toUS(v)
			if _, driven := a.hw.Position(); us != a.sent || !driven {
				errs = append(errs, a.drive(us))
			}
		}
		if done {
			c.beh = nil
			if c.motion != boardapi.MotionMove {
				c.motion = StateHold
			}
		}
	}
	waiting := false
	if c.beh == nil { // drive policies apply once the holo holds still
		for _, a := range c.axes {
			w, err := a.settled()
			waiting = waiting || w
			errs = append(errs, err)
		}
	}
	if c.beh == nil && c.motion == boardapi.MotionMove && !waiting {
		c.motion = StateHold
	}
	st := c.stateLocked()
	pending := false
	if st != c.pubState {
		same := st.Motion == c.pubState.Motion && st.Ready == c.pubState.Ready && st.Reason == c.pubState.Reason
		if !same || force || now.Sub(c.lastPub) >= PublishInterval {
			c.publishLocked(st, now)
		} else {
			pending = true
		}
	}
	wasActive := c.active
	c.active = c.beh != nil || waiting || pending
	if wasActive && !c.active {
		c.ticker.Stop()
	}
	c.rendered = now
	close(c.notify)
	c.notify = make(chan struct{})
	err := errors.Join(errs...)
	if err != nil {
		c.log.Warn("holo: servo error", "err", err)
	}
	return err
}

func (c *Controller) publishLocked(st State, now time.Time) {
	c.pubState, c.lastPub = st, now
	if c.pub != nil {
		c.pub.SetState(Kind, st)
	}
}

// Off ends any behaviour and releases both servos.
func (c *Controller) Off() State {
	st, _ := c.Motion(boardapi.MotionRequest{Motion: boardapi.MotionOff})
	return st
}

// Snapshot returns a request that brings the holo back to what it does
// now: the running behaviour again, a move to where it is (or is going),
// off when limp, or stop when it cannot move.
func (c *Controller) Snapshot() boardapi.MotionRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok, _ := c.readyLocked(); !ok {
		return boardapi.MotionRequest{Motion: boardapi.MotionStop}
	}
	if c.beh != nil && c.motion != boardapi.MotionMove {
		return c.beh.req
	}
	if c.motion == StateOff {
		return boardapi.MotionRequest{Motion: boardapi.MotionOff}
	}
	p := c.posLocked()
	if c.motion == boardapi.MotionMove {
		p = c.goal
	}
	x, y := math.Round(p.x*1000)/1000, math.Round(p.y*1000)/1000
	return boardapi.MotionRequest{Motion: boardapi.MotionMove, X: &x, Y: &y}
}

// Restore applies a Snapshot.
func (c *Controller) Restore(m boardapi.MotionRequest) error {
	_, err := c.Motion(m)
	return err
}

func (c *Controller) axisLocked(id string) (*axis, error) {
	for _, a := range c.axes {
		if a.id == id {
			return a, nil
		}
	}
	return nil, &apiError{api.Errorf(api.ErrNotFound, "no servo %q: want pan or tilt", id), ErrUnknownServo}
}

// Servos returns both servo records.
func (c *Controller) Servos() Servos {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servosLocked()
}

func (c *Controller) servosLocked() Servos {
	return Servos{Servos: []ServoRecord{c.axes[0].record(), c.axes[1].record()}}
}

// Move drives one servo to a pulse, ending any behaviour. An uncalibrated
// servo takes 500-2500 µs; a calibrated one only pulses within its
// calibration.
func (c *Controller) Move(id string, us int) (Servos, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := c.axisLocked(id)
	if err != nil {
		return Servos{}, err
	}
	lo, hi := MinPulseUS, MaxPulseUS
	if a.cal != nil {
		lo, hi = min(a.cal.MinUS, a.cal.MaxUS), max(a.cal.MinUS, a.cal.MaxUS)
	}
	if us < lo || us > hi {
		return Servos{}, calError("%s: pulse %d µs outside %s", id, us, formatRange(lo, hi))
	}
	c.beh = nil
	err = a.drive(us)
	c.motion = StateHold
	_, err2 := c.finishLocked()
	return c.servosLocked(), errors.Join(err, err2)
}

// Release stops driving one servo or all; it ends any behaviour.
func (c *Controller) Release(id string) (Servos, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	axes := c.axes[:]
	if id != All {
		a, err := c.axisLocked(id)
		if err != nil {
			return Servos{}, &apiError{api.Errorf(api.ErrNotFound, "no servo %q: want pan, tilt or all", id), ErrUnknownServo}
		}
		axes = []*axis{a}
	}
	c.beh = nil
	err := c.releaseLocked(axes...)
	c.motion = StateHold
	if _, d0 := c.axes[0].hw.Position(); !d0 {
		if _, d1 := c.axes[1].hw.Position(); !d1 {
			c.motion = StateOff
		}
	}
	_, err2 := c.finishLocked()
	return c.servosLocked(), errors.Join(err, err2)
}

func (c *Controller) saveLocked(a *axis) error {
	if err := c.store.Put(storeKey(a.id), saved{Calibration: a.cal, Policy: a.policy}); err != nil {
		return fmt.Errorf("holo: saving %s: %w", a.id, err)
	}
	return nil
}

// SetCalibration validates and saves a servo's calibration. A running
// behaviour ends (the holo holds where it is).
func (c *Controller) SetCalibration(id string, cal Calibration) (Servos, error) {
	if err := cal.Validate(); err != nil {
		return Servos{}, err
	}
	return c.changeCalibration(id, &cal)
}

// ClearCalibration returns a servo to the uncalibrated default; the holo
// is then not ready.
func (c *Controller) ClearCalibration(id string) (Servos, error) {
	return c.changeCalibration(id, nil)
}

func (c *Controller) changeCalibration(id string, cal *Calibration) (Servos, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := c.axisLocked(id)
	if err != nil {
		return Servos{}, err
	}
	old := a.cal
	a.cal = cal
	if err := c.saveLocked(a); err != nil {
		a.cal = old
		return Servos{}, err
	}
	if c.beh != nil {
		c.holdLocked()
	}
	_, err = c.finishLocked()
	return c.servosLocked(), err
}

// SetPolicy saves a servo's drive policy; it applies from the servo's next
// settling.
func (c *Controller) SetPolicy(id string, p Policy) (Servos, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, err := c.axisLocked(id)
	if err != nil {
		return Servos{}, err
	}
	old := a.policy
	a.policy = p
	if err := c.saveLocked(a); err != nil {
		a.policy = old
		return Servos{}, err
	}
	return c.servosLocked(), nil
}

// motionStatus is the HTTP status of a motion's reply.
func motionStatus(m string) int {
	if m == boardapi.MotionStop || m == boardapi.MotionOff {
		return http.StatusOK
	}
	return http.StatusAccepted
}
