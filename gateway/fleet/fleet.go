package fleet

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/eventlog"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/registry"
)

// Errors of the fleet core beyond those drivers share (driver.go).
var (
	// ErrBadAction: the action kind is unknown or its body is not one the
	// boards take (it wraps action.ErrUnknownKind or action.ErrInvalid).
	ErrBadAction = fault.New(fault.Invalid, "fleet: bad action")
	// ErrBadSelector: the selector names nothing, or a group outside 1-31.
	ErrBadSelector = fault.New(fault.Invalid, "fleet: bad selector")
)

// Defaults of Options.
const (
	DefaultBufferSize   = 4096
	DefaultWatcherQueue = 1024
	DefaultConcurrency  = 16
	DefaultPersistEvery = 30 * time.Second
	DefaultCallTimeout  = 10 * time.Second
	// restartMerge is how long after a board's restart another transport
	// may report the same restart without starting yet another boot
	// epoch (a board on a line and the LAN is seen restarting by both).
	restartMerge = 30 * time.Second
	// identifyWorkers read GET /info and GET /link of newly seen boards.
	identifyWorkers = 4
	identifyQueue   = 4096
)

// Options configure a Fleet.
type Options struct {
	// Registry keeps the boards across restarts; nil keeps them in memory
	// only.
	Registry *registry.Registry
	// Drivers reach the boards: one Line per RS485 line, the LAN driver.
	Drivers []Driver
	Clock   clock.Clock
	Log     *slog.Logger
	// BufferSize is how many events the fleet keeps for Watch replays
	// (default 4096).
	BufferSize int
	// WatcherQueue is how many events may wait for one watcher before it
	// is cut off (default 1024).
	WatcherQueue int
	// Concurrency bounds the HTTP calls one Do runs at once (default 16).
	Concurrency int
	// PersistEvery is how often last-seen times are written to the
	// registry (default 30 s); other changes are written at once.
	PersistEvery time.Duration
	// CallTimeout bounds the calls the core makes itself (GET /info and
	// GET /link of a newly seen board); default 10 s.
	CallTimeout time.Duration
	// FireUncertainty is the largest clock uncertainty with which a board
	// is trusted to make a timed change itself (fire_at); a board known
	// less well is fired by the gateway at the moment (default
	// DefaultFireUncertainty, 2 ms).
	FireUncertainty time.Duration
}

// Stats are the fleet core's counters, for metrics.
type Stats struct {
	Boards   int // boards known
	Online   int // boards reachable now
	Watchers int // event watchers attached now
	// EventsIn counts reports drivers made: happenings, state changes,
	// restarts and losses (duplicates included).
	EventsIn uint64
	// Events is the number of events put on the fleet stream (the last N).
	Events uint64
	// Duplicates counts happenings dropped as already seen.
	Duplicates uint64
	// Dropped counts events lost by watchers that fell behind.
	Dropped uint64
	// ReplayMissed counts events a Watch(after) asked for that had already
	// left the buffer.
	ReplayMissed uint64
	// Unattributed counts reports from a place where no board is known
	// yet (before its GET /info was read).
	Unattributed uint64
	// PersistErrors counts failed registry writes.
	PersistErrors uint64
	// PerBoard counts events per board id.
	PerBoard map[string]uint64
	// Lines holds each line driver's counters by driver name.
	Lines map[string]LineStats
}

// Fleet is the gateway's core: it implements Service for the API and Sink
// for the drivers. Create it with New and run it with Run.
type Fleet struct {
	o       Options
	clk     clock.Clock
	log     *slog.Logger
	drivers map[string]Driver
	lines   map[string]Line

	mu      sync.Mutex
	boards  map[string]*boardState
	refs    map[Ref]string // where → board id
	pending map[job]bool   // identify jobs queued or running
	ev      *eventlog.Log[Event]
	st      counters

	jobs        chan job
	persistWake chan struct{}
	persistMu   sync.Mutex // orders registry writes as memory changed
	obs         observers  // Observe (observe.go)
}

type counters struct {
	eventsIn, duplicates, unattributed, persistErrors uint64
}

var (
	_ Service = (*Fleet)(nil)
	_ Sink    = (*Fleet)(nil)
)

// New makes a fleet of the boards the registry knows (all offline until a
// driver sees them) and the given drivers.
func New(o Options) *Fleet {
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.BufferSize = defaults.Positive(o.BufferSize, DefaultBufferSize)
	o.WatcherQueue = defaults.Positive(o.WatcherQueue, DefaultWatcherQueue)
	o.Concurrency = defaults.Positive(o.Concurrency, DefaultConcurrency)
	o.PersistEvery = defaults.Positive(o.PersistEvery, DefaultPersistEvery)
	o.CallTimeout = defaults.Positive(o.CallTimeout, DefaultCallTimeout)
	f := &Fleet{o: o, clk: o.Clock, log: o.Log,
		drivers: map[string]Driver{}, lines: map[string]Line{},
		boards: map[string]*boardState{}, refs: map[Ref]string{}, pending: map[job]bool{},
		ev:   newEventLog(o.BufferSize),
		jobs: make(chan job, identifyQueue), persistWake: make(chan struct{}, 1)}
	for _, d := range o.Drivers {
		f.drivers[d.Name()] = d
		if l, ok := d.(Line); ok {
			f.lines[d.Name()] = l
		}
	}
	if o.Registry != nil {
		for _, rec := range o.Registry.List() {
			f.boards[rec.ID] = newBoardState(rec)
		}
	}
	return f
}

// Run runs every driver with the fleet as its sink, reads the identity and
// groups of newly seen boards, and writes changes to the registry, until
// ctx ends. It returns the drivers' errors other than ctx's end, joined.
func (f *Fleet) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []error
	for _, d := range f.o.Drivers {
		wg.Go(func() {
			err := d.Run(ctx, f)
			if err != nil && ctx.Err() == nil {
				f.log.Error("fleet: driver stopped", "driver", d.Name(), "err", err)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	for range identifyWorkers {
		wg.Go(func() { f.identifyLoop(ctx) })
	}
	wg.Go(func() { f.persistLoop(ctx) })
	<-ctx.Done()
	wg.Wait()
	f.flush(true)
	return errors.Join(errs...)
}

// Stats returns a snapshot of the counters.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	dropped, replayMissed := f.ev.Stats()
	s := Stats{Boards: len(f.boards), Watchers: f.ev.Watchers(),
		EventsIn: f.st.eventsIn, Events: f.ev.Last(), Duplicates: f.st.duplicates, Dropped: dropped,
		ReplayMissed: replayMissed, Unattributed: f.st.unattributed, PersistErrors: f.st.persistErrors,
		PerBoard: make(map[string]uint64, len(f.boards)), Lines: make(map[string]LineStats, len(f.lines))}
	for id, b := range f.boards {
		if b.online {
			s.Online++
		}
		s.PerBoard[id] = b.events
	}
	f.mu.Unlock()
	for name, l := range f.lines {
		s.Lines[name] = l.Stats()
	}
	return s
}

// persistLoop writes changed records: at once when asked (a new board, new
// groups, addresses, firmware), and every PersistEvery for last-seen times.
func (f *Fleet) persistLoop(ctx context.Context) {
	t := f.clk.NewTicker(f.o.PersistEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.persistWake:
			f.flush(false)
		case <-t.C():
			f.flush(true)
		}
	}
}

func (f *Fleet) wakePersist() {
	select {
	case f.persistWake <- struct{}{}:
	default:
	}
}

// flush writes the records marked changed (urgent ones only unless all).
func (f *Fleet) flush(all bool) {
	if f.o.Registry == nil {
		return
	}
	f.persistMu.Lock()
	defer f.persistMu.Unlock()
	f.mu.Lock()
	var recs []registry.Record
	for _, b := range f.boards {
		if b.urgent || all && b.dirty {
			recs = append(recs, b.record())
			b.urgent, b.dirty = false, false
		}
	}
	f.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	if err := f.o.Registry.PutMany(recs); err != nil {
		f.log.Error("fleet: saving boards", "err", err)
		f.mu.Lock()
		f.st.persistErrors++
		for _, r := range recs {
			if b := f.boards[r.ID]; b != nil {
				b.dirty = true
			}
		}
		f.mu.Unlock()
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
