package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
)

// Names in the engine (see the package doc).
const (
	BucketGateways = "holo_gateways"
	BucketBoards   = "holo_boards"
	BucketTokens   = "holo_tokens"
	BucketLease    = "holo_lease"
	StreamEvents   = "HOLO_EVENTS"
	StreamRollouts = "HOLO_ROLLOUTS"
	ObjectImages   = "holo_artifacts"

	subjectEvents = "holo.ev"
	subjectGW     = "holo.gw"
)

// Defaults of Options.
const (
	DefaultHeartbeat   = time.Second
	DefaultDeadAfter   = 4 * time.Second
	DefaultSyncEvery   = 500 * time.Millisecond
	DefaultSeenEvery   = 60 * time.Second
	DefaultCallTimeout = 30 * time.Second
	// DefaultLease is how long the rollout coordinator's lease lasts
	// without renewal.
	DefaultLease = 3 * time.Second
	// DefaultEventsMaxAge is how long the events stream keeps events
	// (replays reach that far back).
	DefaultEventsMaxAge = 7 * 24 * time.Hour
	// DefaultEventsMaxBytes bounds the events stream's storage.
	DefaultEventsMaxBytes = 1 << 30
	// DefaultQueueMax bounds the events waiting in memory for the
	// engine: at 1 KiB an event, 256 MiB.
	DefaultQueueMax = 1 << 18
	// setupAttempt bounds one try at creating a bucket or stream (a new
	// cluster answers nothing until it has elected its meta leader).
	setupAttempt = 3 * time.Second
)

// Local is what the cluster needs of this gateway's fleet core
// (*fleet.Fleet).
type Local interface {
	fleet.Service
	CallRaw(ctx context.Context, id, method, path, contentType string, body io.Reader, length int64) (fleet.Reply, error)
}

// Options configure a Cluster.
type Options struct {
	Engine *Engine
	Local  Local
	// API is this gateway's API address, published in its heartbeat.
	API string
	// Lines is how many RS485 lines this gateway masters, published in
	// its heartbeat.
	Lines int
	Clock clock.Clock
	Log   *slog.Logger
	// Heartbeat is how often this gateway says it is alive (default
	// 1 s); a gateway not heard for DeadAfter (default 4 s) is taken for
	// dead: its boards show offline and its LAN boards may be taken over.
	Heartbeat, DeadAfter time.Duration
	// SyncEvery is how often this gateway compares its boards with what
	// it published (default 500 ms; board events trigger it sooner);
	// SeenEvery is how often a board's record is rewritten only for its
	// last-seen time and clock (default 60 s).
	SyncEvery, SeenEvery time.Duration
	// Lease is how long the rollout coordinator's lease lasts without
	// renewal (default DefaultLease): another gateway takes over that
	// long after the coordinator stopped.
	Lease time.Duration
	// CallTimeout bounds a routed call whose context has no deadline
	// (default 30 s).
	CallTimeout time.Duration
	// EventsMaxAge and EventsMaxBytes bound the events stream (defaults
	// DefaultEventsMaxAge, DefaultEventsMaxBytes).
	EventsMaxAge   time.Duration
	EventsMaxBytes int64
	// QueueMax bounds the events of this gateway's boards waiting in
	// memory while the engine cannot be reached (default
	// DefaultQueueMax); beyond it the oldest are dropped and counted
	// (holo_gateway_cluster_events_lost_total).
	QueueMax int
	// Guard decides the routed requests this gateway serves, with the
	// policy the API uses, and audits them (its Audit); nil decides with
	// auth.Authorize and keeps no records.
	Guard *auth.Guard
}

// Cluster is this gateway's member of the cluster: it implements
// fleet.Service for the whole installation over the local fleet core and
// the other gateways. Create it with New and run it with Run.
type Cluster struct {
	o    Options
	eng  *Engine
	name string
	boot string
	clk  clock.Clock
	log  *slog.Logger

	nc *nats.Conn
	js jetstream.JetStream

	mu       sync.Mutex
	kvGW     jetstream.KeyValue // nil until set up
	kvBoards jetstream.KeyValue
	records  map[string]*record  // board id -> the engine's record, as watched
	gateways map[string]*gwState // gateway name -> its last heartbeat
	written  map[string]time.Time
	standby  map[string]bool // boards this gateway reaches but another owns
	loaded   bool            // the boards bucket's initial values are in
	// gwLoaded: the gateways bucket's initial values (the heartbeats of
	// the gateways alive now) are in. Until then every other gateway
	// would look dead, and a board it owns would be taken from it.
	gwLoaded bool
	lastBeat time.Time // last heartbeat the engine acknowledged
	started  time.Time // when New made this run
	// boardsWritten is the revision of the last record this gateway
	// wrote (acknowledged at boardsWrittenAt), boardsSeen the highest
	// the records watcher handed out.
	boardsWritten, boardsSeen uint64
	boardsWrittenAt           time.Time
	setupErr                  error

	tokens  *auth.Tokens // shared with the cluster (ShareTokens), or nil
	arts    *Artifacts   // the firmware store (Artifacts), or nil
	callers callers      // routed requests being served, by caller
	co      *coordinator // rollouts (RunRollouts), or nil
	// install answers the other gateways' installation plans and
	// exports (Installation.Serve; nil until the installer is made).
	// Guarded by mu.
	install installation.Local

	wake chan struct{} // asks the sync loop for a round now
	// ownChanged tells Own's reader that ownership may have changed.
	ownChanged chan struct{}
	st         stats
	ev         *events
}

// New makes this gateway's member of the cluster; Run joins it.
func New(o Options) (*Cluster, error) {
	if o.Engine == nil || o.Local == nil {
		return nil, fmt.Errorf("%w: Engine and Local are required", ErrConfig)
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	if o.Guard == nil {
		o.Guard = &auth.Guard{}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Heartbeat, DefaultHeartbeat)
	def(&o.DeadAfter, DefaultDeadAfter)
	def(&o.SyncEvery, DefaultSyncEvery)
	def(&o.SeenEvery, DefaultSeenEvery)
	def(&o.CallTimeout, DefaultCallTimeout)
	def(&o.Lease, DefaultLease)
	def(&o.EventsMaxAge, DefaultEventsMaxAge)
	o.EventsMaxBytes = defaults.Positive(o.EventsMaxBytes, DefaultEventsMaxBytes)
	o.QueueMax = defaults.Positive(o.QueueMax, DefaultQueueMax)
	var b [8]byte
	_, _ = rand.Read(b[:])
	c := &Cluster{o: o, eng: o.Engine, name: o.Engine.Name(), boot: hex.EncodeToString(b[:]), clk: o.Clock, log: o.Log,
		nc: o.Engine.Conn(), js: o.Engine.JetStream(),
		records: map[string]*record{}, gateways: map[string]*gwState{}, written: map[string]time.Time{},
		standby: map[string]bool{}, wake: make(chan struct{}, 1), ownChanged: make(chan struct{}, 1), started: o.Clock.Now()}
	c.ev = newEvents(c)
	return c, nil
}

// Name is this gateway's name.
func (c *Cluster) Name() string { return c.name }

// SetAPI sets the API address this gateway's heartbeat publishes.
func (c *Cluster) SetAPI(addr string) {
	c.mu.Lock()
	c.o.API = addr
	c.mu.Unlock()
}

// Boot identifies this run of the gateway (new at every start).
func (c *Cluster) Boot() string { return c.boot }

// Run sets up the buckets and streams (waiting for the engine as long as
// it must), then keeps this gateway's heartbeat and boards published,
// follows the others', answers routed requests and publishes the events,
// until ctx ends.
func (c *Cluster) Run(ctx context.Context) error {
	if err := c.setup(ctx); err != nil {
		return err
	}
	sub, err := c.nc.Subscribe(gwSubject(c.name), c.serveRPC(ctx))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	var wg sync.WaitGroup
	wg.Go(func() { c.watchGateways(ctx) })
	wg.Go(func() { c.watchBoards(ctx) })
	wg.Go(func() { c.heartbeatLoop(ctx) })
	wg.Go(func() { c.syncLoop(ctx) })
	wg.Go(func() { c.ev.publishLoop(ctx) })
	if c.tokens != nil {
		wg.Go(func() { c.shareTokens(ctx) })
	}
	if c.co != nil {
		wg.Go(func() { c.co.run(ctx) })
	}
	wg.Wait()
	return nil
}

// setup creates (or binds to) the buckets and streams, retrying while the
// engine is not ready, until ctx ends.
func (c *Cluster) setup(ctx context.Context) error {
	gw, err := c.bucket(ctx, BucketGateways, "holo-gateway heartbeats")
	if err != nil {
		return err
	}
	boards, err := c.bucket(ctx, BucketBoards, "holo boards and their owners")
	if err != nil {
		return err
	}
	if err := c.ev.setup(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	c.kvGW, c.kvBoards = gw, boards
	c.mu.Unlock()
	return nil
}

// bucket creates (or binds to) the cluster's key-value bucket name: the
// latest value of each key, on disk, replicated as the engine's streams.
// It retries while the engine is not ready, until ctx ends.
func (c *Cluster) bucket(ctx context.Context, name, description string) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{Bucket: name, Description: description, History: 1,
		Replicas: c.eng.Replicas(), Storage: jetstream.FileStorage}
	var kv jetstream.KeyValue
	err := retry(ctx, c.log, "bucket "+name, func(ctx context.Context) error {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	return kv, err
}

// retry runs f with a bounded context until it succeeds or ctx ends.
func retry(ctx context.Context, log *slog.Logger, what string, f func(ctx context.Context) error) error {
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, setupAttempt)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: %s: %w", what, errors.Join(err, ctx.Err()))
		}
		if i > 0 {
			log.Warn("cluster: engine not ready, retrying", "what", what, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// key is a board id as a KV key and subject token: ids made of letters,
// digits, '-' and '_' stay as they are, others are hex-encoded after '='.
func key(id string) string {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return "=" + hex.EncodeToString([]byte(id))
		}
	}
	if id == "" {
		return "="
	}
	return id
}

// idOf reverses key.
func idOf(k string) string {
	if rest, ok := strings.CutPrefix(k, "="); ok {
		if b, err := hex.DecodeString(rest); err == nil {
			return string(b)
		}
	}
	return k
}

func gwSubject(name string) string { return subjectGW + "." + name + ".rpc" }
