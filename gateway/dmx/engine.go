package dmx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Surface is the DMX inputs' surface in the audit log.
const Surface auth.Surface = "dmx"

// Defaults of Options.
const (
	// DefaultSyncLead is how far ahead of a sync packet's arrival the
	// latched looks fire: time for the fleet to time the group frames on
	// the lines (a line finishes the exchange under way, up to a poll
	// wait, before it keeps itself free: docs/fire.md) and tell the LAN
	// boards ahead. Shorter leads land sooner and less together.
	DefaultSyncLead = 150 * time.Millisecond
	// DefaultLineShare is the share of an RS485 line's capacity DMX may
	// take, so that polling and events go on.
	DefaultLineShare = 0.5
	// DefaultLineBaud is the line speed assumed for the share.
	DefaultLineBaud = 115200
	// SyncLossSACN and SyncLossArtNet: a receiver that heard no sync
	// packet for that long applies data at once again (each standard's
	// fallback).
	SyncLossSACN   = 2500 * time.Millisecond
	SyncLossArtNet = 4 * time.Second
	// checkEvery is how often sources and syncs are checked for loss.
	checkEvery = 250 * time.Millisecond
)

// Fleet is what the engine needs of the fleet core.
type Fleet interface {
	Boards(f fleet.Filter) []fleet.BoardView
	Do(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error)
}

// Options configure an Engine.
type Options struct {
	Fleet Fleet
	Patch *Patch
	// Guard decides and records; Role is every DMX source's role (DMX
	// has no authentication): RoleNone ignores every packet, RoleViewer
	// merges and lists sources but sends nothing, RoleOperator drives
	// the patched boards.
	Guard      *auth.Guard
	Role       auth.Role
	Clock      clock.Clock
	Log        *slog.Logger
	Registerer prometheus.Registerer
	SyncLead   time.Duration
	LineShare  float64
	LineBaud   int
}

// Engine merges the universes its listeners hand it, latches them for
// sync, decodes the patched fixtures and sends the changes to the fleet,
// latest value per target.
type Engine struct {
	o   Options
	clk clock.Clock
	log *slog.Logger
	m   *metrics

	wake chan struct{}

	mu      sync.Mutex
	patch   *Patch
	unis    map[int]*universe
	targets map[string]*target
	// order is the targets' keys in the order decide starts their sends:
	// group fixtures first (their frames wait for a line's wire, and
	// started together they go out back to back: rs485's group batch),
	// then the rest, each part by key.
	order    []string
	latched  map[int]latch
	lastSync map[string]time.Time
	buckets  map[string]*bucket
	checked  map[string]bool // sources the guard decided on
	labels   map[string]bool // source names used as metric labels
	packetN  uint64          // packets taken, to order sources by arrival
	retry    clock.Timer
	onPatch  []func()
}

// latch is a merged look waiting for its sync packet.
type latch struct {
	key   string
	slots [Slots]byte
	in    time.Time
}

// target is one patched target's output state.
type target struct {
	fx      Fixture
	sent    *Look // what it last got; nil: unknown
	pending *Look // the newest look not sent yet
	at      time.Time
	in      time.Time
	release bool
	busy    bool
	// retryAt holds a look whose send failed (a board not reached) until
	// then: it is tried again, unless a newer look comes first.
	retryAt time.Time
}

// New makes an engine for the patch.
func New(o Options) (*Engine, error) {
	if o.Fleet == nil || o.Patch == nil {
		return nil, errors.New("dmx: Fleet and Patch are required")
	}
	if err := o.Patch.Check(); err != nil {
		return nil, err
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.SyncLead = defaults.Positive(o.SyncLead, DefaultSyncLead)
	if o.LineShare <= 0 || o.LineShare > 1 {
		o.LineShare = DefaultLineShare
	}
	o.LineBaud = defaults.Positive(o.LineBaud, DefaultLineBaud)
	e := &Engine{o: o, clk: o.Clock, log: o.Log, m: newMetrics(o.Registerer, o.LineShare), wake: make(chan struct{}, 1),
		unis: map[int]*universe{}, targets: map[string]*target{}, latched: map[int]latch{},
		lastSync: map[string]time.Time{}, buckets: map[string]*bucket{}, checked: map[string]bool{}, labels: map[string]bool{}}
	e.setPatch(o.Patch)
	return e, nil
}

func (e *Engine) setPatch(p *Patch) {
	e.patch = p
	e.unis = map[int]*universe{}
	for _, u := range p.UniverseList() {
		e.unis[u] = newUniverse(u, p)
	}
	old := e.targets
	e.targets = map[string]*target{}
	for _, f := range p.Fixtures {
		k := f.Target()
		t := &target{fx: f}
		if o := old[k]; o != nil && o.fx.Profile == f.Profile {
			t.sent = o.sent
		}
		e.targets[k] = t
	}
	rank := func(k string) int {
		if e.targets[k].fx.Group != 0 {
			return 0
		}
		return 1
	}
	e.order = slices.SortedFunc(maps.Keys(e.targets), func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	e.latched = map[int]latch{}
}

// Patch is the patch in use.
func (e *Engine) Patch() *Patch {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.patch
}

// SetPatch replaces the patch (checked first); sources and latched looks
// of the old one are dropped, targets kept go on from what they got.
func (e *Engine) SetPatch(p *Patch) error {
	if err := p.Check(); err != nil {
		return err
	}
	e.mu.Lock()
	e.setPatch(p)
	fns := slices.Clone(e.onPatch)
	e.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return nil
}

// OnPatch adds fn to what runs after the patch changed (the sACN
// listener joins the groups of new universes; the Art-Net poll reply
// lists them).
func (e *Engine) OnPatch(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onPatch = append(e.onPatch, fn)
}

// Universes are the patched universes (the sACN listener joins their
// multicast groups).
func (e *Engine) Universes() []int { return e.Patch().UniverseList() }

// Sources lists the sources of every universe.
func (e *Engine) Sources() []SourceView {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []SourceView
	for _, u := range e.unis {
		var top uint8
		for _, s := range u.sources {
			top = max(top, s.priority)
		}
		for _, s := range u.sources {
			out = append(out, SourceView{Universe: u.num, Protocol: s.proto, Name: s.name, Address: s.addr,
				Priority: int(s.priority), Rate: s.rate(), Packets: s.packets, LastSeen: s.last, Winning: s.priority == top})
		}
	}
	slices.SortFunc(out, func(a, b SourceView) int {
		if a.Universe != b.Universe {
			return a.Universe - b.Universe
		}
		return strings.Compare(a.Name+a.Address, b.Name+b.Address)
	})
	return out
}

// Frame is one universe's data from one source, as a listener hands it
// to the engine.
type Frame struct {
	Proto    string
	Universe int
	// Key tells sources apart (the sACN CID, the Art-Net sender's IP).
	Key      string
	Name     string
	Addr     string
	Priority uint8
	// Sequence is the packet's number (HasSequence false: not numbered,
	// as Art-Net's 0).
	Sequence    uint8
	HasSequence bool
	// SyncAddr is sACN's synchronisation address (0: none).
	SyncAddr   uint16
	Terminated bool
	Slots      []byte
}

// syncKey is the key of the latch a frame waits in: "sacn:<addr>" or
// "artnet".
func (fr *Frame) syncKey() string {
	if fr.Proto == ProtoArtNet {
		return ProtoArtNet
	}
	if fr.SyncAddr == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d", ProtoSACN, fr.SyncAddr)
}

func syncLoss(key string) time.Duration {
	if key == ProtoArtNet {
		return SyncLossArtNet
	}
	return SyncLossSACN
}

// admit decides once per source whether it may drive the boards (the
// guard records the decision) and reports whether to take its frames.
func (e *Engine) admit(fr *Frame) bool {
	if e.o.Role == auth.RoleNone {
		e.m.dropped.WithLabelValues("denied").Inc()
	}
	k := fr.Proto + ":" + fr.Key
	e.mu.Lock()
	seen := e.checked[k]
	if !seen && len(e.checked) < 4096 {
		e.checked[k] = true
	}
	e.mu.Unlock()
	if seen || e.o.Guard == nil {
		return e.o.Role != auth.RoleNone
	}
	a := auth.Attributes{Who: auth.Identity{Name: fmt.Sprintf("dmx:%s:%s", fr.Proto, fr.Addr), Role: e.o.Role}, Surface: Surface,
		Verb: auth.VerbAct, Resource: auth.ResActions, Kind: "dmx", Operation: fmt.Sprintf("universe %d", fr.Universe), Name: fr.Name}
	if e.o.Role == auth.RoleViewer {
		a.Verb, a.Resource = auth.VerbWatch, auth.ResEvents
	}
	p, err := e.o.Guard.Check(a)
	if err != nil {
		e.log.Info("dmx: source refused", "source", fr.Name, "addr", fr.Addr, "universe", fr.Universe, "err", err)
		return false
	}
	p.Done(auth.CodeOK)
	e.log.Info("dmx: new source", "proto", fr.Proto, "source", fr.Name, "addr", fr.Addr, "universe", fr.Universe, "priority", fr.Priority)
	return true
}

// Data takes one universe frame from a source, received at in.
func (e *Engine) Data(fr Frame) {
	in := e.clk.Now()
	uniLabel := fmt.Sprint(fr.Universe)
	if !e.admit(&fr) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	u := e.unis[fr.Universe]
	if u == nil {
		e.m.dropped.WithLabelValues("unpatched").Inc()
		return
	}
	k := fr.Proto + ":" + fr.Key
	s := u.sources[k]
	if fr.Terminated {
		if s != nil {
			delete(u.sources, k)
			e.log.Info("dmx: source terminated its stream", "source", s.name, "universe", u.num)
			e.afterLoss(u, in)
		}
		return
	}
	if s == nil {
		if len(u.sources) >= MaxSources {
			e.m.dropped.WithLabelValues("sources").Inc()
			return
		}
		s = &source{key: k, name: fr.Name, proto: fr.Proto, addr: fr.Addr, first: in}
		u.sources[k] = s
	} else if fr.HasSequence && !sequenceOK(s.seq, fr.Sequence) {
		e.m.dropped.WithLabelValues("sequence").Inc()
		return
	}
	e.m.packets.WithLabelValues(fr.Proto, uniLabel, e.sourceLabel(s.name)).Inc()
	s.seq, s.last, s.priority, s.syncAddr = fr.Sequence, in, fr.Priority, fr.SyncAddr
	s.packets++
	e.packetN++
	s.order = e.packetN
	s.n = copy(s.slots[:], fr.Slots)
	clear(s.slots[s.n:])
	u.live = true
	merged, changed := u.merge()
	if merged {
		e.m.merges.WithLabelValues(uniLabel).Inc()
	}
	key := fr.syncKey()
	if key != "" && in.Sub(e.lastSync[key]) < syncLoss(key) {
		// Synchronous mode: the look waits for its sync packet.
		e.latched[u.num] = latch{key: key, slots: u.merged, in: in}
		return
	}
	// Even an unchanged frame is applied: a target whose last send
	// failed, or that was not found yet, is tried again; the others,
	// unchanged, send nothing.
	_ = changed
	delete(e.latched, u.num)
	e.applyLocked(u.num, &u.merged, time.Time{}, in)
}

// MaxSourceLabels bounds the source names the packet counter is labelled
// with (a source names itself: a sender making up names must not make up
// metric series); later names count as "other".
const MaxSourceLabels = 64

// sourceLabel is name as a metric label (e.mu held).
func (e *Engine) sourceLabel(name string) string {
	if e.labels[name] {
		return name
	}
	if len(e.labels) >= MaxSourceLabels {
		return "other"
	}
	e.labels[name] = true
	return name
}

// sequenceOK is E1.31's rule (sacn.SequenceOK), kept here so the engine
// reads no codec.
func sequenceOK(last, next uint8) bool {
	d := int8(next - last)
	return d > 0 || d <= -20
}

// Sync takes a sync packet: an sACN one for addr, or an ArtSync
// (proto ProtoArtNet). The latched looks waiting for it fire together,
// SyncLead from now.
func (e *Engine) Sync(proto string, addr uint16) {
	now := e.clk.Now()
	key := ProtoArtNet
	if proto == ProtoSACN {
		key = fmt.Sprintf("%s:%d", ProtoSACN, addr)
	}
	e.m.syncs.WithLabelValues(proto).Inc()
	if e.o.Role == auth.RoleNone {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastSync[key] = now
	at := now.Add(e.o.SyncLead)
	for _, n := range slices.Sorted(maps.Keys(e.latched)) {
		l := e.latched[n]
		if l.key != key {
			continue
		}
		delete(e.latched, n)
		e.applyLocked(n, &l.slots, at, l.in)
	}
	e.signal()
}

// applyLocked decodes the universe's fixtures from slots and sets their
// targets' pending looks (e.mu held).
func (e *Engine) applyLocked(uni int, slots *[Slots]byte, at, in time.Time) {
	for _, f := range e.patch.Fixtures {
		if f.Universe != uni {
			continue
		}
		t := e.targets[f.Target()]
		l := LookOf(f, slots)
		if t.pending != nil {
			if *t.pending == l && !t.release {
				continue
			}
			e.m.coalesced.WithLabelValues(f.Kind()).Inc()
		} else if t.sent != nil && *t.sent == l && !t.busy {
			continue // unchanged: nothing to send
		}
		t.pending, t.at, t.in, t.release = &l, at, in, false
	}
	e.signal()
}

// afterLoss handles a universe whose sources may all be gone (e.mu held).
func (e *Engine) afterLoss(u *universe, now time.Time) {
	if len(u.sources) > 0 {
		if _, changed := u.merge(); changed {
			e.applyLocked(u.num, &u.merged, time.Time{}, now)
		}
		return
	}
	if !u.live {
		return
	}
	u.live = false
	delete(e.latched, u.num)
	if e.patch.Loss(u.num) != LossRelease {
		e.log.Info("dmx: universe lost its sources, holding its last look", "universe", u.num)
		return
	}
	e.log.Info("dmx: universe lost its sources, releasing its boards", "universe", u.num)
	u.merged = [Slots]byte{}
	for _, f := range e.patch.Fixtures {
		if f.Universe == u.num {
			t := e.targets[f.Target()]
			t.pending, t.release, t.at, t.in = &Look{}, true, time.Time{}, now
		}
	}
	e.signal()
}

// check drops silent sources and falls back from sync modes whose sync
// packets stopped.
func (e *Engine) check() {
	now := e.clk.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(e.unis)) {
		u := e.unis[n]
		if gone := u.expire(now); len(gone) > 0 {
			e.log.Info("dmx: sources lost", "universe", n, "sources", gone)
			e.m.lost.Add(float64(len(gone)))
			e.afterLoss(u, now)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(e.latched)) {
		l := e.latched[n]
		if now.Sub(e.lastSync[l.key]) >= syncLoss(l.key) {
			e.log.Info("dmx: sync packets stopped, applying data at once", "universe", n, "sync", l.key)
			delete(e.latched, n)
			e.applyLocked(n, &l.slots, time.Time{}, l.in)
		}
	}
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run sends the targets' looks and checks for loss until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	tick := e.clk.NewTicker(checkEvery)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			if e.retry != nil {
				e.retry.Stop()
			}
			e.mu.Unlock()
			return nil
		case <-tick.C():
			e.check()
		case <-e.wake:
		}
		if e.o.Role != auth.RoleOperator {
			e.dropPending()
			continue
		}
		for _, j := range e.decide(e.o.Fleet.Boards(fleet.Filter{})) {
			wg.Go(func() { e.send(ctx, j) })
		}
	}
}

// dropPending forgets pending looks a read-only engine may not send.
func (e *Engine) dropPending() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.targets {
		if t.pending != nil {
			t.pending = nil
			e.m.dropped.WithLabelValues("read_only").Inc()
		}
	}
}
