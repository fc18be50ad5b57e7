package scenes

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/holo"
	"github.com/holofleet/holofleet/firmware/leds"
	"github.com/holofleet/holofleet/firmware/screen"
)

// Errors of the package.
var (
	// ErrConfig means New was given unusable options.
	ErrConfig = errors.New("scenes: bad configuration")
	// ErrClosed means the manager was closed.
	ErrClosed = errors.New("scenes: closed")
)

// Screen is what scenes need of the screen (a *screen.Controller).
type Screen interface {
	Prepare(r boardapi.ShowRequest, onceByDefault bool) (*screen.Prepared, error)
	Present(p *screen.Prepared) (screen.State, uint64, error)
	Snapshot() screen.Snapshot
	Restore(s screen.Snapshot) error
	Off() screen.State
	SetWatcher(w screen.Watcher)
}

// LEDs is what scenes need of the strip (a *leds.Controller).
type LEDs interface {
	Patch(p boardapi.LEDPatch) (leds.State, error)
	Off() leds.State
	Snapshot() leds.State
	Restore(s leds.State) error
}

// Holo is what scenes need of the holo (a *holo.Controller).
type Holo interface {
	State() holo.State
	Motion(m boardapi.MotionRequest) (holo.State, error)
	Off() holo.State
	Snapshot() boardapi.MotionRequest
	Restore(m boardapi.MotionRequest) error
}

// Store keeps the saved scenes, one key per name (a store.Bucket).
type Store interface {
	Get(key string, v any) (bool, error)
	Put(key string, v any) error
	Delete(key string) error
	Keys() ([]string, error)
}

// Publisher receives state changes and happenings (the event hub).
type Publisher interface {
	SetState(kind string, state any)
	Emit(kind string, fields any) events.Happening
}

// Options configure a Manager.
type Options struct {
	Clock  clock.Clock // required
	Store  Store       // required
	Screen Screen      // required
	LEDs   LEDs        // required
	Holo   Holo        // required
	// Publisher may be nil.
	Publisher Publisher
	Logger    *slog.Logger
	// OnDelete is told the name of a deleted scene (the settings forget
	// it as boot_scene).
	OnDelete func(name string) error
	// Start, when set, reads the moment a POST /scenes/apply names for
	// the start of its scene's clip on Clock (clip_start on the aligned
	// clock, or the change's own moment), as the screen's Start does for
	// POST /screen/show; an error refuses the request.
	Start func(r *http.Request) (at time.Time, ok bool, err error)
}

// Saved is a saved scene with its name.
type Saved struct {
	Name string `json:"name"`
	boardapi.Scene
}

// List is the reply of GET /scenes and of saving and deleting.
type List struct {
	Scenes []Saved  `json:"scenes" doc:"saved scenes, by name"`
	Active *Running `json:"active" doc:"the scene running to its end, or null"`
}

// Running is the scene running to its end: the state of kind scene.
type Running struct {
	Name          *string  `json:"name" doc:"null for an unsaved scene applied without a name"`
	Slot          int      `json:"slot,omitempty"`
	Then          string   `json:"then"`
	UntilClipEnds bool     `json:"until_clip_ends"`
	RemainingS    *float64 `json:"remaining_s" doc:"seconds until duration_s is up, in tenths; null without one"`
}

// Started is the scene_started happening, and part of the apply reply.
type Started struct {
	Name          *string `json:"name"`
	Slot          int     `json:"slot,omitempty"`
	Then          string  `json:"then"`
	UntilClipEnds bool    `json:"until_clip_ends"`
	DurationS     float64 `json:"duration_s,omitempty"`
}

// Ended is the scene_ended happening and the reply of POST /scenes/end.
type Ended struct {
	Name *string `json:"name"`
	Slot int     `json:"slot,omitempty"`
	Then string  `json:"then"`
	By   string  `json:"by" doc:"clip, time, end or replaced"`
}

// Applied is the reply of POST /scenes/apply.
type Applied struct {
	Started Started  `json:"started"`
	Active  *Running `json:"active" doc:"the scene running to its end, or null (a stay scene)"`
}

// Manager keeps and runs the scenes. Its methods are safe for concurrent
// use.
type Manager struct {
	clk    clock.Clock
	store  Store
	screen Screen
	leds   LEDs
	holo   Holo
	pub    Publisher
	log    *slog.Logger
	onDel  func(string) error
	start  func(r *http.Request) (time.Time, bool, error)

	// op serialises applying, ending and then: everything that changes
	// the parts. mu guards the fields below and is never held while
	// calling the parts.
	op sync.Mutex
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	saved  map[string]boardapi.Scene
	run    *run
}

// run is a scene running to its end.
type run struct {
	name      *string
	slot      int
	then      string
	untilClip bool
	deadline  time.Time // zero without duration_s
	screenID  uint64    // the show the scene put up; 0 when none
	before    *before   // restore only
	stop      chan struct{}
	timer     clock.Timer
}

// before is what the board did before a restore scene (or the first of a
// chain of them), and which parts to bring back.
type before struct {
	screen screen.Snapshot
	leds   leds.State
	holo   boardapi.MotionRequest
	// has*: a scene of the chain set the part, so restore brings it
	// back.
	hasScreen, hasLEDs, hasHolo bool
}

// New loads the saved scenes and installs the manager as the screen's
// watcher.
func New(o Options) (*Manager, error) {
	if o.Clock == nil || o.Store == nil || o.Screen == nil || o.LEDs == nil || o.Holo == nil {
		return nil, fmt.Errorf("%w: clock, store, screen, leds and holo are required", ErrConfig)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{clk: o.Clock, store: o.Store, screen: o.Screen, leds: o.LEDs, holo: o.Holo, pub: o.Publisher,
		log: log, onDel: o.OnDelete, start: o.Start, saved: map[string]boardapi.Scene{}}
	keys, err := o.Store.Keys()
	if err != nil {
		return nil, fmt.Errorf("scenes: loading: %w", err)
	}
	for _, k := range keys {
		var s boardapi.Scene
		if _, err := o.Store.Get(k, &s); err != nil {
			return nil, fmt.Errorf("scenes: loading %q: %w", k, err)
		}
		m.saved[k] = s
	}
	o.Screen.SetWatcher(m)
	return m, nil
}

// Close ends the manager: a running scene's timer stops (its then is not
// done) and later calls do nothing.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	if r := m.run; r != nil {
		m.run = nil
		r.halt()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (r *run) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
		if r.timer != nil {
			r.timer.Stop()
		}
	}
}

// Exists reports whether a scene is saved under name (the settings'
// check of boot_scene).
func (m *Manager) Exists(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.saved[name]
	return ok
}

// List returns the saved scenes, by name, and the one running.
func (m *Manager) List() List {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listLocked()
}

func (m *Manager) listLocked() List {
	l := List{Scenes: make([]Saved, 0, len(m.saved)), Active: m.runningLocked()}
	for n, s := range m.saved {
		l.Scenes = append(l.Scenes, Saved{Name: n, Scene: s})
	}
	sort.Slice(l.Scenes, func(i, j int) bool { return l.Scenes[i].Name < l.Scenes[j].Name })
	return l
}

// Running returns the scene running to its end, or nil.
func (m *Manager) Running() *Running {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *Manager) runningLocked() *Running {
	r := m.run
	if r == nil {
		return nil
	}
	out := &Running{Name: r.name, Slot: r.slot, Then: r.then, UntilClipEnds: r.untilClip}
	if !r.deadline.IsZero() {
		s := math.Ceil(max(0, r.deadline.Sub(m.clk.Now()).Seconds())*10) / 10
		out.RemainingS = &s
	}
	return out
}

// Status fills the scene bytes of the native status block: the running
// scene's slot (0 none, 0xFF one without a slot) and the tenths of a
// second left of its duration (0xFFFF none).
func (m *Manager) Status(sb *frame.StatusBlock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sb.Scene, sb.Remaining = frame.SceneNone, frame.NoRemaining
	r := m.run
	if r == nil {
		return
	}
	sb.Scene = frame.SceneNoSlot
	if r.slot > 0 {
		sb.Scene = uint8(r.slot)
	}
	if !r.deadline.IsZero() {
		left := max(0, r.deadline.Sub(m.clk.Now()))
		tenths := (left + 100*time.Millisecond - 1) / (100 * time.Millisecond)
		sb.Remaining = uint16(min(int64(tenths), frame.NoRemaining-1))
	}
}

// Save stores s under name (PUT /scenes/scene), replacing a scene of that
// name.
func (m *Manager) Save(name string, s boardapi.Scene) (List, error) {
	if err := boardapi.CheckSceneName(name); err != nil {
		return List{}, err
	}
	if err := s.Check(); err != nil {
		return List{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return List{}, ErrClosed
	}
	if _, ok := m.saved[name]; !ok && len(m.saved) >= boardapi.MaxScenes {
		return List{}, api.Errorf(api.ErrFull, "%d scenes are saved already; delete one first", boardapi.MaxScenes)
	}
	if s.Slot != nil {
		for other, o := range m.saved {
			if other != name && o.Slot != nil && *o.Slot == *s.Slot {
				return List{}, api.Errorf(api.ErrSlotTaken, "slot %d belongs to scene %q", *s.Slot, other)
			}
		}
	}
	if err := m.store.Put(name, s); err != nil {
		return List{}, fmt.Errorf("scenes: saving %q: %w", name, err)
	}
	m.saved[name] = s
	l := m.listLocked()
	m.publishLocked(events.KindScenes, l)
	return l, nil
}

// Delete forgets the scene called name (DELETE /scenes/scene). A scene
// running keeps running.
func (m *Manager) Delete(name string) (List, error) {
	m.mu.Lock()
	if _, ok := m.saved[name]; !ok {
		m.mu.Unlock()
		return List{}, api.Errorf(api.ErrUnknownScene, "no scene is called %q", name)
	}
	if err := m.store.Delete(name); err != nil {
		m.mu.Unlock()
		return List{}, fmt.Errorf("scenes: deleting %q: %w", name, err)
	}
	delete(m.saved, name)
	l := m.listLocked()
	m.publishLocked(events.KindScenes, l)
	m.mu.Unlock()
	if m.onDel != nil {
		if err := m.onDel(name); err != nil {
			m.log.Warn("scenes: forgetting the boot scene failed", "scene", name, "err", err)
		}
	}
	return l, nil
}

// resolve finds the scene a request names.
func (m *Manager) resolve(req boardapi.SceneApply) (*string, boardapi.Scene, error) {
	switch {
	case req.Scene != nil && req.Slot == nil:
		if req.Name != nil {
			if err := boardapi.CheckSceneName(*req.Name); err != nil {
				return nil, boardapi.Scene{}, err
			}
		}
		if err := req.Scene.Check(); err != nil {
			return nil, boardapi.Scene{}, err
		}
		return req.Name, *req.Scene, nil
	case req.Name != nil && req.Slot == nil:
		m.mu.Lock()
		s, ok := m.saved[*req.Name]
		m.mu.Unlock()
		if !ok {
			return nil, boardapi.Scene{}, api.Errorf(api.ErrUnknownScene, "no scene is called %q", *req.Name)
		}
		return req.Name, s, nil
	case req.Slot != nil && req.Name == nil && req.Scene == nil:
		m.mu.Lock()
		defer m.mu.Unlock()
		for n, s := range m.saved {
			if s.Slot != nil && *s.Slot == *req.Slot {
				return &n, s, nil
			}
		}
		return nil, boardapi.Scene{}, api.Errorf(api.ErrUnknownScene, "no scene has slot %d", *req.Slot)
	}
	return nil, boardapi.Scene{}, api.Errorf(api.ErrBadRequest, "give name, slot, or scene (with an optional name)")
}

// Check checks an apply request as Apply does before anything changes,
// changing nothing: the form, that a named scene exists, and its parts;
// the screen's file is not opened (Apply checks it).
func (m *Manager) Check(req boardapi.SceneApply) error {
	_, s, err := m.resolve(req)
	if err != nil {
		return err
	}
	if s.Screen != nil {
		if err := s.Screen.Check(); err != nil {
			return boardapi.PartError("screen", err)
		}
	}
	if s.LEDs != nil {
		if err := s.LEDs.Check(); err != nil {
			return boardapi.PartError("leds", err)
		}
	}
	if s.Holo != nil {
		if _, err := s.Holo.Validate(); err != nil {
			return boardapi.PartError("holo", err)
		}
		if mo := s.Holo.Motion; mo != boardapi.MotionStop && mo != boardapi.MotionOff {
			if st := m.holo.State(); !st.Ready {
				return boardapi.PartError("holo", api.Errorf(api.ErrNotReady, "holo cannot move: %s", st.Reason))
			}
		}
	}
	return nil
}

// ApplyName applies the saved scene called name (the boot scene).
func (m *Manager) ApplyName(name string) (Applied, error) {
	return m.Apply(boardapi.SceneApply{Name: &name})
}

// Apply applies a scene (POST /scenes/apply); its clip, if any, starts
// when it is shown.
func (m *Manager) Apply(req boardapi.SceneApply) (Applied, error) {
	return m.applyAt(req, time.Time{})
}

// applyAt applies a scene whose clip starts its timeline at at on the
// Manager's clock (zero: when it is shown).
func (m *Manager) applyAt(req boardapi.SceneApply, at time.Time) (Applied, error) {
	name, s, err := m.resolve(req)
	if err != nil {
		return Applied{}, err
	}
	m.op.Lock()
	defer m.op.Unlock()
	then := s.ThenOrDefault()

	// Check every part before anything changes.
	var shown *screen.Prepared
	if s.Screen != nil {
		p, err := m.screen.Prepare(*s.Screen, then != boardapi.SceneThenStay)
		if err != nil {
			return Applied{}, boardapi.PartError("screen", err)
		}
		if !at.IsZero() {
			p.StartAt(at)
		}
		shown = p
	}
	fail := func(err error) (Applied, error) {
		shown.Discard()
		return Applied{}, err
	}
	untilClip := shown != nil && shown.Kind() == screen.ShowingClip && shown.Plays() > 0
	if then != boardapi.SceneThenStay && s.DurationS == nil && !untilClip {
		return fail(boardapi.PartError("screen", api.Errorf(api.ErrBadRequest,
			"%s is not a clip that ends; a scene with then %s needs one, or duration_s", *s.Screen.Path, then)))
	}
	if s.LEDs != nil {
		if err := s.LEDs.Check(); err != nil {
			return fail(boardapi.PartError("leds", err))
		}
	}
	if s.Holo != nil {
		if _, err := s.Holo.Validate(); err != nil {
			return fail(boardapi.PartError("holo", err))
		}
		if mo := s.Holo.Motion; mo != boardapi.MotionStop && mo != boardapi.MotionOff {
			if st := m.holo.State(); !st.Ready {
				return fail(boardapi.PartError("holo", api.Errorf(api.ErrNotReady, "holo cannot move: %s", st.Reason)))
			}
		}
	}

	// The parts are called without m.mu held (the screen calls Stopping
	// with its own lock held).
	m.mu.Lock()
	old := m.run
	m.mu.Unlock()
	var bf *before
	if then == boardapi.SceneThenRestore {
		bf = m.before(old, s)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fail(ErrClosed)
	}
	if m.run != nil {
		m.endLocked(m.run, ByReplaced)
	}
	m.mu.Unlock()

	// Set the parts in order; a failure stops the rest.
	var screenID uint64
	if shown != nil {
		_, id, err := m.screen.Present(shown)
		if err != nil {
			return Applied{}, m.aborted(boardapi.PartError("screen", err))
		}
		screenID = id
	}
	if s.LEDs != nil {
		if _, err := m.leds.Patch(*s.LEDs); err != nil {
			return Applied{}, m.aborted(boardapi.PartError("leds", err))
		}
	}
	if s.Holo != nil {
		if _, err := m.holo.Motion(*s.Holo); err != nil {
			return Applied{}, m.aborted(boardapi.PartError("holo", err))
		}
	}

	st := Started{Name: name, Slot: s.SlotOrZero(), Then: then, UntilClipEnds: then != boardapi.SceneThenStay && untilClip}
	if s.DurationS != nil {
		st.DurationS = *s.DurationS
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emitLocked(events.KindSceneStarted, st)
	if then != boardapi.SceneThenStay {
		r := &run{name: name, slot: s.SlotOrZero(), then: then, untilClip: untilClip, screenID: screenID, before: bf,
			stop: make(chan struct{})}
		if s.DurationS != nil {
			d := time.Duration(*s.DurationS * float64(time.Second))
			r.deadline = m.clk.Now().Add(d)
			r.timer = m.clk.NewTimer(d)
			m.wg.Add(1)
			go m.wait(r)
		}
		m.run = r
	}
	if then != boardapi.SceneThenStay || old != nil {
		m.publishLocked(events.KindScene, m.runningLocked())
	}
	return Applied{Started: st, Active: m.runningLocked()}, nil
}

// aborted reports a part that failed after the old scene ended.
func (m *Manager) aborted(err error) error {
	m.mu.Lock()
	m.publishLocked(events.KindScene, m.runningLocked())
	m.mu.Unlock()
	return err
}

// before records what a restore scene brings back: the record of the
// restore scene it replaces, if any (the board goes back to what it did
// before the first of them), else what the parts do now.
func (m *Manager) before(old *run, s boardapi.Scene) *before {
	bf := &before{}
	if old != nil && old.then == boardapi.SceneThenRestore && old.before != nil {
		*bf = *old.before
	} else {
		bf.screen, bf.leds, bf.holo = m.screen.Snapshot(), m.leds.Snapshot(), m.holo.Snapshot()
	}
	bf.hasScreen = bf.hasScreen || s.Screen != nil
	bf.hasLEDs = bf.hasLEDs || s.LEDs != nil
	bf.hasHolo = bf.hasHolo || s.Holo != nil
	return bf
}

// wait ends r when its duration is up.
func (m *Manager) wait(r *run) {
	defer m.wg.Done()
	select {
	case <-r.stop:
		return
	case <-r.timer.C():
	}
	m.finish(r, ByTime)
}

// End ends the scene running to its end (POST /scenes/end); its then is
// done.
func (m *Manager) End() (Ended, error) {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	r := m.run
	if r == nil {
		m.mu.Unlock()
		return Ended{}, api.Errorf(api.ErrNotRunning, "no scene is running to its end")
	}
	e := m.endLocked(r, ByEnd)
	m.mu.Unlock()
	m.doThen(r)
	return e, nil
}

// finish ends r (if it still runs) by clip or time and does its then.
func (m *Manager) finish(r *run, by string) {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	if m.run != r || m.closed {
		m.mu.Unlock()
		return
	}
	m.endLocked(r, by)
	m.mu.Unlock()
	m.doThen(r)
}

// endLocked ends r: scene_ended and the scene state. m.mu is held.
func (m *Manager) endLocked(r *run, by string) Ended {
	m.run = nil
	r.halt()
	e := Ended{Name: r.name, Slot: r.slot, Then: r.then, By: by}
	m.emitLocked(events.KindSceneEnded, e)
	m.publishLocked(events.KindScene, (*Running)(nil))
	return e
}

// doThen does an ended scene's then. m.op is held.
func (m *Manager) doThen(r *run) {
	switch r.then {
	case boardapi.SceneThenOff:
		m.screen.Off()
		m.leds.Off()
		m.holo.Off()
	case boardapi.SceneThenRestore:
		bf := r.before
		if bf == nil {
			return
		}
		if bf.hasScreen {
			if err := m.screen.Restore(bf.screen); err != nil {
				m.log.Warn("scenes: restoring the screen failed", "err", err)
			}
		}
		if bf.hasLEDs {
			if err := m.leds.Restore(bf.leds); err != nil {
				m.log.Warn("scenes: restoring the LEDs failed", "err", err)
			}
		}
		if bf.hasHolo {
			if err := m.holo.Restore(bf.holo); err != nil {
				m.log.Warn("scenes: restoring the holo failed", "err", err)
			}
		}
	}
}

// Stopping is the screen watcher's hook: the show id is being replaced.
// When it is the running scene's, the scene ends by replaced.
func (m *Manager) Stopping(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.run; r != nil && r.screenID == id {
		m.endLocked(r, ByReplaced)
	}
}

// Finished is the screen watcher's hook: clip id played all its plays.
// When it is the running scene's clip, the scene ends by clip. It waits
// for an apply in progress, so a clip that ends at once still ends its
// scene.
func (m *Manager) Finished(id uint64) {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	r := m.run
	if m.closed || r == nil || r.screenID != id || !r.untilClip {
		m.mu.Unlock()
		return
	}
	m.endLocked(r, ByClip)
	m.mu.Unlock()
	m.doThen(r)
}

func (m *Manager) publishLocked(kind string, state any) {
	if m.pub != nil {
		m.pub.SetState(kind, state)
	}
}

func (m *Manager) emitLocked(kind string, fields any) {
	if m.pub != nil {
		m.pub.Emit(kind, fields)
	}
}
