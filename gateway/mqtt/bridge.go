package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
	"github.com/holofleet/holofleet/gateway/mqtt/policy"
	"github.com/holofleet/holofleet/gateway/mqtt/spool"
	"github.com/holofleet/holofleet/gateway/rollout"
	"github.com/holofleet/holofleet/store"
)

// Defaults of Options.
const (
	DefaultWindow     = 256
	DefaultBoardRate  = 20  // commands per second per board
	DefaultTopicRate  = 10  // commands per second per command topic
	DefaultBurst      = 20  // tokens a bucket holds
	DefaultCommandQ   = 256 // commands waiting to run
	DefaultWorkers    = 8
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	// MaxCommand bounds a command's payload.
	MaxCommand = 16 << 10
	// namesBucket keeps renamed boards (id -> name).
	namesBucket = "mqtt_names"
)

// Options configure a Bridge.
type Options struct {
	Fleet fleet.Service
	// Broker is the broker URL: tcp://host:port, ssl:// (or tls://,
	// mqtts://) for TLS, ws:// or wss://.
	Broker             string
	Username, Password string
	// CAFile, CertFile and KeyFile (PEM) set up TLS: the CA that signed
	// the broker's certificate and the client's certificate.
	CAFile, CertFile, KeyFile string
	// TLS overrides the TLS configuration built from the files.
	TLS *tls.Config
	// ClientID defaults to "holo-gateway-<base>-<random>".
	ClientID string
	// Base and HAPrefix are the topic roots (defaults "holo" and
	// "homeassistant").
	Base, HAPrefix string
	// DB keeps renamed boards and the spool's spill; nil keeps both in
	// memory.
	DB *store.DB
	// Spool bounds the outbound queue (spool.Options' Mem and Disk).
	SpoolMem, SpoolDisk int
	// Window is how many QoS 1 publications may await their ack at once.
	Window int
	// BoardRate and TopicRate (commands per second) and Burst bound the
	// commands per board and per command topic.
	BoardRate, TopicRate float64
	Burst                int
	// Rollouts, when set, is followed on bridge/rollout/<id>, bridge/event
	// and the HA update entities, runs the "rollout" request and, with
	// Firmware, installs the UpdateChannel's image (see rollout.go).
	Rollouts rollout.Service
	// Firmware gives the release channels: the update entities' latest
	// version and what their install command installs.
	Firmware FirmwareChannels
	// UpdateChannel is the release channel the update entities offer
	// (default DefaultUpdateChannel).
	UpdateChannel string
	// KeepRollouts is how many finished rollouts keep their retained
	// bridge/rollout/<id>, the newest (default DefaultKeepRollouts); an
	// older one's is cleared. Unfinished rollouts always keep theirs.
	KeepRollouts int
	// Install starts a firmware update on a board (the HA update entity's
	// install button); nil uses Rollouts, or answers ErrUnsupported.
	Install func(ctx context.Context, boardID string) error
	// Rollout runs the "rollout" request; nil uses Rollouts, or answers
	// ErrUnsupported.
	Rollout func(ctx context.Context, body json.RawMessage) (any, error)
	// Cues runs the "cue" request (cue.go); nil answers ErrUnsupported.
	Cues Cues
	// Accept is the most a command from MQTT may do: the role its
	// publisher is taken to have ("viewer", "operator", "admin", or
	// "none" for no commands at all), decided for each command through
	// Policy with auth.Authorize. "" takes every command the broker
	// delivers, as admin: right for the embedded broker, which authorises
	// each client itself; an external broker cannot tell the bridge who
	// published (see gateway/mqtt/policy).
	Accept string
	// Guard receives the audit records of commands decided by Accept
	// (an external broker's). With the embedded broker the broker's own
	// policy records them with the publisher's real identity.
	Guard *auth.Guard
	// Version is the gateway's version for bridge/info and HA.
	Version string
	// MinBackoff and MaxBackoff bound the wait between connection tries.
	MinBackoff, MaxBackoff time.Duration
	Clock                  clock.Clock
	Log                    *slog.Logger
	// Registerer gets the bridge's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Cluster, when set, makes the bridge one of a cluster's gateways
	// sharing Base with the other gateways' bridges on one broker
	// (cluster.go): Fleet is then this gateway's own boards (cluster.Own,
	// which is the Cluster too) and Installation every board of the
	// cluster, which bridge requests answer for.
	Cluster      Cluster
	Installation fleet.Service
	// InstallationStates, when set, gives every board Home Assistant's
	// installation sensor (installation.go).
	InstallationStates InstallationStates
}

// Stats are the bridge's counters.
type Stats struct {
	// Gateway is the gateway's name in a cluster ("" alone).
	Gateway     string `json:",omitempty"`
	Connected   bool
	Connects    uint64 // successful connections
	Published   uint64 // publications acknowledged (QoS 1) or written (QoS 0)
	Retries     uint64 // publications sent again after a lost connection
	Happenings  uint64 // happenings queued
	Commands    uint64 // commands received
	Refused     uint64 // commands refused (bad, rate limited, busy)
	RateLimited uint64
	Spool       spool.Stats
}

// Bridge mirrors a fleet into MQTT. Make it with New, run it with Run.
type Bridge struct {
	o     Options
	t     layout.Topics
	clk   clock.Clock
	log   *slog.Logger
	queue *spool.Queue
	names *names
	m     *metrics

	// timed runs timed show commands (fire.go), each waiting for its
	// moment on a goroutine of its own, at most MaxTimed at once.
	timed    sync.WaitGroup
	timedSem chan struct{}

	client    paho.Client
	connected atomic.Bool
	// losses counts the connections lost (the lost handler adds one,
	// before the connect loop can connect again).
	losses atomic.Uint64
	lost   chan struct{} // a connection ended: for connectLoop (buffered 1)
	// drop asks connectLoop to end a connection the broker stopped
	// acknowledging and connect again (buffered 1).
	drop    chan struct{}
	lostPub chan struct{} // wakes publishLoop to compare losses
	up      chan struct{} // a connection began (buffered 1)

	// retained is the last payload of every retained topic; dirty lists
	// the topics not yet published since they changed (or since the
	// connection began).
	rmu      sync.Mutex
	retained map[string][]byte
	dirty    map[string]bool
	order    []string // dirty topics in the order they changed
	rwake    chan struct{}

	// view is the bridge's picture of the boards (owned by the event
	// goroutine, read under vmu by commands).
	vmu    sync.Mutex
	boards map[string]*boardInfo
	// latest is the update channel's version as the last snapshot read
	// it, latestSummary its release summary.
	latest, latestSummary string

	// peers are the other bridges of a cluster on the broker; resnap
	// asks the event goroutine for a snapshot now.
	peers  peers
	resnap chan struct{}

	cmds    chan command
	limits  *limiter
	policy  *policy.Policy
	accept  auth.Role
	updates sync.Map // board id -> Update

	st struct {
		connects, published, retries, happenings, commands, refused, ratelimited atomic.Uint64
	}
}

// boardInfo is what the bridge knows of a board for topics and discovery.
type boardInfo struct {
	view   fleet.BoardView
	name   string
	scenes []string // saved scene names (the HA select)
	// runs is the version a rollout found the board running, believed
	// while the fleet's view still says runsSaw (what it said then).
	runs, runsSaw string
	// ledsOn is the last strip mode other than off seen in the board's
	// state: HA's ON brings it back.
	ledsOn string
}

// New checks o and makes a bridge; Run connects it.
func New(o Options) (*Bridge, error) {
	if o.Fleet == nil {
		return nil, fmt.Errorf("%w: no fleet", ErrConfig)
	}
	o.Base, o.HAPrefix = layout.RootsOrDefault(o.Base, o.HAPrefix)
	if err := checkRoots(o.Base, o.HAPrefix); err != nil {
		return nil, err
	}
	if o.ClientID == "" {
		// Unique per run: two gateways on one broker must not take each
		// other's session (the session is clean anyway).
		var r [4]byte
		_, _ = rand.Read(r[:])
		o.ClientID = "holo-gateway-" + strings.ReplaceAll(o.Base, "/", "-") + "-" + hex.EncodeToString(r[:])
	}
	defaults.Positives(map[*int]int{&o.Window: DefaultWindow, &o.Burst: DefaultBurst, &o.KeepRollouts: DefaultKeepRollouts})
	o.BoardRate = defaults.Positive(o.BoardRate, DefaultBoardRate)
	o.TopicRate = defaults.Positive(o.TopicRate, DefaultTopicRate)
	o.MinBackoff = defaults.Positive(o.MinBackoff, DefaultMinBackoff)
	o.MaxBackoff = defaults.Positive(o.MaxBackoff, DefaultMaxBackoff)
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.UpdateChannel == "" {
		o.UpdateChannel = DefaultUpdateChannel
	}
	var err error
	t := layout.Topics{Base: o.Base, HA: o.HAPrefix}
	if o.Cluster != nil {
		if t.Gateway = o.Cluster.Name(); t.Gateway == "" || strings.ContainsAny(t.Gateway, "/+#") {
			return nil, fmt.Errorf("%w: gateway name %q", ErrConfig, t.Gateway)
		}
		if o.Installation == nil {
			o.Installation = o.Fleet
		}
	}
	b := &Bridge{o: o, t: t, clk: o.Clock, log: o.Log, peers: peers{by: map[string]*peer{}}, resnap: make(chan struct{}, 1),
		lost: make(chan struct{}, 1), drop: make(chan struct{}, 1), lostPub: make(chan struct{}, 1), up: make(chan struct{}, 1),
		retained: map[string][]byte{}, dirty: map[string]bool{}, rwake: make(chan struct{}, 1),
		boards: map[string]*boardInfo{}, cmds: make(chan command, DefaultCommandQ), timedSem: make(chan struct{}, MaxTimed)}
	b.limits = newLimiter(o.Clock, o.BoardRate, o.TopicRate, o.Burst)
	if b.accept, err = ParseAccept(o.Accept); err != nil {
		return nil, err
	}
	if b.policy, err = policy.New(o.Base, o.HAPrefix); err != nil {
		return nil, err
	}
	if o.Accept != "" {
		b.policy.Guard = o.Guard
	}
	if o.Rollouts != nil {
		if b.o.Install == nil {
			b.o.Install = b.install
		}
		if b.o.Rollout == nil {
			b.o.Rollout = b.rolloutRequest
		}
	}
	q, err := spool.Open(spool.Options{DB: o.DB, Mem: o.SpoolMem, Disk: o.SpoolDisk})
	if err != nil {
		return nil, err
	}
	b.queue = q
	if b.names, err = openNames(o.DB); err != nil {
		return nil, err
	}
	opts, err := b.clientOptions()
	if err != nil {
		return nil, err
	}
	b.client = paho.NewClient(opts)
	if b.m, err = newMetrics(b, o.Registerer); err != nil {
		return nil, err
	}
	return b, nil
}

// clientOptions turns Options into paho's.
func (b *Bridge) clientOptions() (*paho.ClientOptions, error) {
	u, err := url.Parse(b.o.Broker)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: broker URL %q", ErrConfig, b.o.Broker)
	}
	secure := false
	switch u.Scheme {
	case "tcp", "mqtt", "ws":
	case "ssl", "tls", "mqtts", "tcps", "wss":
		secure = true
	default:
		return nil, fmt.Errorf("%w: broker URL scheme %q (tcp, ssl, tls, mqtts, ws, wss)", ErrConfig, u.Scheme)
	}
	o := paho.NewClientOptions()
	broker := *u
	broker.User = nil
	switch broker.Scheme {
	case "mqtt":
		broker.Scheme = "tcp"
	case "tls", "mqtts", "tcps":
		broker.Scheme = "ssl"
	}
	o.AddBroker(broker.String())
	o.SetClientID(b.o.ClientID)
	user, pass := b.o.Username, b.o.Password
	if u.User != nil && user == "" {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	if user != "" {
		o.SetUsername(user)
		o.SetPassword(pass)
	}
	tc := b.o.TLS
	if tc == nil && (secure || b.o.CAFile != "" || b.o.CertFile != "") {
		if tc, err = tlsConfig(b.o.CAFile, b.o.CertFile, b.o.KeyFile); err != nil {
			return nil, err
		}
	}
	if tc != nil {
		o.SetTLSConfig(tc)
	}
	o.SetCleanSession(true)
	o.SetAutoReconnect(false)
	o.SetConnectRetry(false)
	o.SetOrderMatters(false)
	o.SetKeepAlive(15 * time.Second)
	o.SetPingTimeout(5 * time.Second)
	o.SetConnectTimeout(5 * time.Second)
	o.SetWriteTimeout(5 * time.Second)
	o.SetMessageChannelDepth(1024)
	o.SetWill(b.t.Own("state"), string(b.statePayload(false)), 1, true)
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		b.log.Warn("mqtt: connection lost", "err", err)
		b.losses.Add(1)
		b.connected.Store(false)
		signal(b.lost)
		signal(b.lostPub)
	})
	o.SetOnConnectHandler(func(paho.Client) {
		b.connected.Store(true)
		signal(b.up)
	})
	return o, nil
}

// tlsConfig loads the CA and the client's certificate.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CA: %w", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrConfig, caFile)
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: the client certificate and key go together", ErrConfig)
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", ErrConfig, err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Stats returns the counters.
func (b *Bridge) Stats() Stats {
	return Stats{Gateway: b.t.Gateway, Connected: b.connected.Load(), Connects: b.st.connects.Load(), Published: b.st.published.Load(),
		Retries: b.st.retries.Load(), Happenings: b.st.happenings.Load(), Commands: b.st.commands.Load(),
		Refused: b.st.refused.Load(), RateLimited: b.st.ratelimited.Load(), Spool: b.queue.Stats()}
}

// Run follows the fleet, keeps the broker connection and publishes until
// ctx ends; then it marks the bridge offline, keeps what was not sent in
// the spool and disconnects.
func (b *Bridge) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Replay what the fleet's buffer holds (the states reported since
	// the gateway started), then follow.
	w := b.o.Fleet.Watch(ctx, fleet.Filter{}, 0)
	b.snapshot()
	var wg sync.WaitGroup
	wg.Go(func() { b.follow(ctx, w) })
	if b.o.Rollouts != nil {
		wg.Go(func() { b.followRollouts(ctx) })
	}
	if b.o.InstallationStates != nil {
		wg.Go(func() { b.followInstallation(ctx) })
	}
	for range DefaultWorkers {
		wg.Go(func() { b.commandLoop(ctx) })
	}
	wg.Go(func() { b.connectLoop(ctx) })
	b.publishLoop(ctx)
	cancel()
	wg.Wait()
	b.timed.Wait()
	if b.client.IsConnectionOpen() {
		t := b.client.Publish(b.t.Own("state"), 1, true, b.statePayload(false))
		t.WaitTimeout(2 * time.Second)
		b.client.Disconnect(250)
	}
	if err := b.queue.Flush(); err != nil {
		b.log.Error("mqtt: keeping the spool", "err", err)
	}
	return nil
}

// connectLoop (re)connects with backoff whenever the connection is down.
//
// It owns the connection's life: it connects, and it ends a connection
// publishLoop gave up on (drop). After a drop it tries to connect again
// without asking the client whether the connection is open: paho's
// Disconnect returns before the client's status leaves "connected", so
// that answer can still be the old connection's, and a loop that took it
// would wait for a loss that never comes (the bridge stayed offline until
// a restart; issue 26). A try made too early fails and is retried after
// the backoff.
func (b *Bridge) connectLoop(ctx context.Context) {
	backoff := b.o.MinBackoff
	retry := false // connect even if the client says it is connected
	for ctx.Err() == nil {
		if retry || !b.client.IsConnectionOpen() {
			// A drop asked for before this try was for a connection
			// already gone.
			select {
			case <-b.drop:
			default:
			}
			b.log.Debug("mqtt: connecting", "broker", b.o.Broker)
			tok := b.client.Connect()
			select {
			case <-tok.Done():
			case <-ctx.Done():
				return
			}
			if err := tok.Error(); err != nil {
				b.log.Debug("mqtt: connecting", "broker", b.o.Broker, "err", err)
				if clock.Sleep(ctx, b.clk, backoff) != nil {
					return
				}
				backoff = min(2*backoff, b.o.MaxBackoff)
				continue
			}
			retry = false
			backoff = b.o.MinBackoff
			b.st.connects.Add(1)
			b.log.Info("mqtt: connected", "broker", b.o.Broker)
		}
		select {
		case <-b.lost:
			b.log.Debug("mqtt: connection ended")
		case <-b.drop:
			b.log.Info("mqtt: disconnecting to start over", "broker", b.o.Broker)
			b.client.Disconnect(0)
			retry = true
		case <-ctx.Done():
			return
		}
	}
}

// onConnected subscribes and marks every retained topic for publishing.
func (b *Bridge) onConnected() error {
	filters := map[string]byte{b.t.SetFilter(): 1, b.t.GroupFilter(): 1, b.t.RequestFilter(): 1, b.t.HAStatus(): 1}
	if b.clustered() {
		filters[b.t.PeerFilter("state")], filters[b.t.PeerFilter("boards")] = 1, 1
	}
	tok := b.client.SubscribeMultiple(filters, b.onMessage)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("mqtt: subscribe: %v", tok.Error())
	}
	b.rmu.Lock()
	b.order = b.order[:0]
	clear(b.dirty)
	// bridge/state first, then the rest.
	state := b.t.Own("state")
	b.retained[state] = b.statePayload(true)
	b.order = append(b.order, state)
	b.dirty[state] = true
	for t := range b.retained {
		if !b.dirty[t] {
			b.dirty[t] = true
			b.order = append(b.order, t)
		}
	}
	b.rmu.Unlock()
	signal(b.rwake)
	return nil
}

// setRetained records a retained topic's payload and marks it for
// publishing; an unchanged payload is not published again. A nil payload
// clears the topic on the broker (and forgets it).
func (b *Bridge) setRetained(topic string, payload []byte) {
	b.rmu.Lock()
	old, had := b.retained[topic]
	if had && string(old) == string(payload) && payload != nil {
		b.rmu.Unlock()
		return
	}
	b.retained[topic] = payload
	if !b.dirty[topic] {
		b.dirty[topic] = true
		b.order = append(b.order, topic)
	}
	b.rmu.Unlock()
	signal(b.rwake)
}

// clearRetained clears a retained topic this bridge set (one it never
// set, or already cleared, is left alone).
func (b *Bridge) clearRetained(topic string) {
	b.rmu.Lock()
	p, had := b.retained[topic]
	b.rmu.Unlock()
	if had && p != nil {
		b.setRetained(topic, nil)
	}
}

// takeRetained returns up to n dirty topics with their payloads. In a
// cluster, the topics only the leader publishes are held back (kept,
// not sent) while this bridge does not lead; holding one back counts as
// not leading for checkLeader, which marks them all again once this
// bridge leads. (A moment of not leading seen here alone, say the
// gateway cut off from the engine for a heartbeat under load, left the
// merged bridge/boards stale until the next change of the lists.)
func (b *Bridge) takeRetained(n int) []spool.Message {
	lead := b.leads()
	held := false
	defer func() {
		if held {
			b.peers.mu.Lock()
			b.peers.leader = false
			b.peers.mu.Unlock()
		}
	}()
	b.rmu.Lock()
	defer b.rmu.Unlock()
	var out []spool.Message
	for len(b.order) > 0 && len(out) < n {
		t := b.order[0]
		b.order = b.order[1:]
		if !b.dirty[t] {
			continue
		}
		delete(b.dirty, t)
		if !lead && b.leaderOnly(t) {
			held = true
			continue
		}
		p := b.retained[t]
		if p == nil {
			delete(b.retained, t)
		}
		out = append(out, spool.Message{Topic: t, Payload: p, QoS: 1, Retain: true})
	}
	if len(b.order) == 0 {
		b.order = nil
	}
	return out
}

// remarkRetained marks a retained message as needing publishing again (its
// publication failed) unless a newer payload is already waiting.
func (b *Bridge) remarkRetained(m spool.Message) {
	b.rmu.Lock()
	defer b.rmu.Unlock()
	if b.dirty[m.Topic] {
		return
	}
	if _, ok := b.retained[m.Topic]; !ok && m.Payload != nil {
		return
	}
	if m.Payload == nil {
		b.retained[m.Topic] = nil
	}
	b.dirty[m.Topic] = true
	b.order = append([]string{m.Topic}, b.order...)
}

// enqueue puts a non-retained message on the spool.
func (b *Bridge) enqueue(m spool.Message) {
	m.At = b.clk.Now()
	if err := b.queue.Push(m); err != nil {
		b.log.Warn("mqtt: spool full, message dropped", "topic", m.Topic)
	}
}

// inflight is one publication awaiting its ack.
type inflight struct {
	m   spool.Message
	tok paho.Token
}

// publishLoop sends retained topics and the spool, in order, with up to
// Window acks awaited, until ctx ends. Messages of a lost connection go
// out again, first, on the next one.
func (b *Bridge) publishLoop(ctx context.Context) {
	var retry []spool.Message // spool messages to send again, in order
	var flying []inflight
	connected := false
	var losses uint64 // b.losses when this loop's connection came up
	fail := func(drop bool) {
		// The spooled messages in flight were sent before those still
		// waiting in retry: they go first, in their order.
		var again []spool.Message
		for _, f := range flying {
			if f.m.Retain {
				b.remarkRetained(f.m)
			} else {
				again = append(again, f.m)
			}
		}
		retry = append(again, retry...)
		flying = flying[:0]
		connected = false
		if drop && b.client.IsConnectionOpen() {
			// The broker did not ack: start over. The connect loop ends
			// the connection and connects again (see connectLoop).
			b.log.Warn("mqtt: dropping the connection: the broker did not acknowledge")
			b.connected.Store(false)
			signal(b.drop)
		}
	}
	for {
		if connected && b.losses.Load() != losses {
			// The connection published on ended (and maybe another came
			// up) before this loop heard of it: what it sent since goes
			// out again first, on the new connection, in order.
			fail(false)
		}
		if !connected {
			select {
			case <-ctx.Done():
				b.requeue(retry, flying)
				return
			case <-b.up:
			}
			losses = b.losses.Load()
			if !b.client.IsConnectionOpen() {
				continue
			}
			if err := b.onConnected(); err != nil {
				b.log.Warn("mqtt: after connecting", "err", err)
				fail(true)
				continue
			}
			connected = true
			b.m.retries.Add(float64(len(retry)))
			b.st.retries.Add(uint64(len(retry)))
		}
		// Fill the window: retained first, then retries, then the spool.
		for len(flying) < b.o.Window && b.losses.Load() == losses {
			room := b.o.Window - len(flying)
			batch := b.takeRetained(room)
			if len(batch) == 0 && len(retry) > 0 {
				n := min(room, len(retry))
				batch = append(batch, retry[:n]...)
				retry = retry[n:]
			}
			if len(batch) == 0 {
				batch = b.queue.Pop(room)
			}
			if len(batch) == 0 {
				break
			}
			for _, m := range batch {
				var tok paho.Token
				if m.Payload == nil {
					tok = b.client.Publish(m.Topic, m.QoS, m.Retain, []byte{})
				} else {
					tok = b.client.Publish(m.Topic, m.QoS, m.Retain, m.Payload)
				}
				flying = append(flying, inflight{m, tok})
			}
		}
		var head <-chan struct{}
		if len(flying) > 0 {
			head = flying[0].tok.Done()
		}
		var more <-chan struct{}
		var rmore <-chan struct{}
		if len(flying) < b.o.Window {
			more, rmore = b.queue.Ready(), b.rwake
		}
		select {
		case <-ctx.Done():
			b.requeue(retry, flying)
			return
		case <-head:
			// Acks come in order on one connection; take every done one.
			// A failure on a connection already lost is that loss's: the
			// connection now up (maybe a new one) is not dropped for it.
			if !b.settle(&flying) {
				fail(b.losses.Load() == losses)
			}
		case <-more:
		case <-rmore:
		case <-b.lostPub:
			// Only a loss counted since this connection came up ends it: a
			// signal left from an earlier one would drop a good connection
			// the connect loop no longer watches.
			if b.losses.Load() != losses {
				fail(false)
			}
		case <-b.up:
			// A new connection while this one was thought up: start over
			// on it.
			fail(false)
			signal(b.up)
		}
	}
}

// settle drops the acknowledged messages at the front of flying; it
// reports false when one failed.
func (b *Bridge) settle(flying *[]inflight) bool {
	for len(*flying) > 0 {
		f := (*flying)[0]
		select {
		case <-f.tok.Done():
		default:
			return true
		}
		if err := f.tok.Error(); err != nil {
			b.log.Debug("mqtt: publish failed", "topic", f.m.Topic, "err", err)
			return false
		}
		b.delivered(f.m)
		(*flying)[0] = inflight{}
		*flying = (*flying)[1:]
	}
	return true
}

// delivered counts an acknowledged message.
func (b *Bridge) delivered(m spool.Message) {
	b.st.published.Add(1)
	b.m.published.Inc()
	if !m.Retain && !m.At.IsZero() {
		b.m.latency.Observe(b.clk.Since(m.At).Seconds())
	}
}

// requeue keeps what was not acknowledged at shutdown for the next run.
func (b *Bridge) requeue(retry []spool.Message, flying []inflight) {
	if len(retry) == 0 && len(flying) == 0 {
		return
	}
	// The spool only appends; messages taken out go back behind the rest.
	// (At shutdown order across a restart is best effort.)
	for _, f := range flying {
		if !f.m.Retain {
			_ = b.queue.Push(f.m)
		}
	}
	for _, m := range retry {
		_ = b.queue.Push(m)
	}
}
