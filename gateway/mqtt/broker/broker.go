// Package broker is the gateway's embedded MQTT broker: a mochi-mqtt
// server on one TCP listener, used when no external broker is configured
// so that the MQTT bridge works on a machine without Mosquitto.
//
// It speaks MQTT 3.1.1 and 5 on plain TCP. Retained messages and sessions
// live in memory only: a restart of the gateway empties them and the
// bridge publishes its retained topics again when it connects.
//
// # Who may connect
//
//   - A gateway token: username = the token's name, password = its secret
//     (holoctl token create NAME --role viewer|operator|admin). The
//     session has the token's role. When the token is revoked (or made
//     again with a new secret) the session is disconnected and forgotten
//     within RevokeEvery.
//   - The gateway's own bridge, with the Gateway credentials the gateway
//     made at start (random, never stored).
//   - A client with no username and no password, when Anonymous names a
//     role, and only on a listener bound to loopback unless
//     AnonymousRemote says otherwise.
//
// Anything else is refused in CONNACK (bad username or password, not
// authorised, server busy).
//
// # What a session may do
//
// Policy decides every publication (with its payload), subscription and
// delivery of a token or anonymous session, through auth.Authorize; its
// Gateway method decides the bridge's. A refused publication is acked
// and dropped for MQTT 3.1.1 and QoS 0 (as Mosquitto does) and answered
// with "not authorised" (0x87) in PUBACK for MQTT 5 at QoS 1 and 2; no
// subscriber sees it. A refused subscription gets a failure code in
// SUBACK; a message a session may not read is not sent to it. A will is
// decided as a publication when the client connects: one it may not send
// refuses the connection. A session may take over a client id only from a
// session of the same identity (the same token, or the bridge), and
// resumes a kept session (clean session off) only then: a login of
// another identity with the id of a disconnected kept session starts
// clean (session present 0), its subscriptions and queued messages gone.
//
// # Limits
//
// Limits bound a packet's size (checked from its fixed header as it
// arrives, before the broker reads or allocates the rest; the CONNECT is
// bounded by MaxConnect and must come within ConnectTimeout, see
// listener.go), the connected clients (the bridge not counted), the
// retained messages clients may leave (count and payload size; the
// bridge's own are not counted), and subscriptions: filters per
// SUBSCRIBE, per client and of all clients (the bridge's not counted); a
// filter beyond is refused in SUBACK, the others granted.
package broker

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
)

// DefaultPort is the embedded broker's port: 1884, beside the 1883 an
// installed Mosquitto usually holds.
const DefaultPort = 1884

// Defaults of Limits and Options.
const (
	// DefaultMaxPacket bounds a client's MQTT packet: 256 KiB, far above
	// a command (the bridge takes at most 16 KiB).
	DefaultMaxPacket = 256 << 10
	// DefaultMaxClients bounds the connected clients, the bridge not
	// counted.
	DefaultMaxClients = 1000
	// DefaultMaxRetained bounds the retained messages clients (not the
	// bridge) may leave on the broker.
	DefaultMaxRetained = 1000
	// DefaultMaxRetainedSize bounds the payload of a retained message a
	// client (not the bridge) leaves.
	DefaultMaxRetainedSize = 64 << 10
	// DefaultMaxSubscriptions bounds the subscriptions of one client (the
	// bridge not counted): room for Home Assistant on a large fleet (a few
	// topics per board).
	DefaultMaxSubscriptions = 5000
	// DefaultMaxFilters bounds the filters of one SUBSCRIBE packet (Home
	// Assistant sends at most 500).
	DefaultMaxFilters = 500
	// DefaultMaxSubscriptionsTotal bounds the subscriptions of all
	// clients together (the bridge not counted).
	DefaultMaxSubscriptionsTotal = 100_000
	// DefaultRevokeEvery is how often sessions are checked against the
	// tokens.
	DefaultRevokeEvery = 250 * time.Millisecond
	// SessionExpiry bounds how long the session of a disconnected client
	// that asked to keep it (clean session off) is kept.
	SessionExpiry = 24 * time.Hour
)

// AnonymousName is the identity name of clients without credentials.
const AnonymousName = "anonymous"

// Errors of the embedded broker.
var (
	// ErrListen: the listener could not be opened (port taken, bad address).
	ErrListen = errors.New("broker: cannot listen")
	// ErrClosed: the broker was used after Close.
	ErrClosed = errors.New("broker: closed")
	// ErrConfig: the options are not usable (anonymous clients on a
	// listener beyond loopback without AnonymousRemote, a bad role, no
	// bridge password).
	ErrConfig = errors.New("broker: bad configuration")
)

// Tokens authenticates token logins (*auth.Tokens).
type Tokens interface {
	// Lookup returns the token whose secret is secret.
	Lookup(secret string) (auth.Token, error)
	// List returns every token (for revocation).
	List() []auth.Token
}

// Policy decides what sessions may do (*policy.Policy, gateway/mqtt/policy).
type Policy interface {
	// Publish decides whether who, connected from client (host:port),
	// may publish payload on topic.
	Publish(who auth.Identity, client, topic string, payload []byte) auth.Decision
	// Subscribe decides whether who, connected from client, may
	// subscribe to filter, or be sent a message on topic (a filter
	// without wildcards).
	Subscribe(who auth.Identity, client, filter string) auth.Decision
	// Gateway reports whether the gateway's bridge may publish on topic
	// (publish) or subscribe to or be sent it.
	Gateway(topic string, publish bool) bool
	// Command reports whether topic is a command: its publications are
	// never retained (a retained command would run again, or be read by
	// whoever subscribes later).
	Command(topic string) bool
}

// Credentials are the bridge's login.
type Credentials struct{ Username, Password string }

// Limits bound what clients may cost the broker; zero fields take the
// defaults.
type Limits struct {
	// MaxPacket bounds a client's packets after CONNECT: the bytes after
	// the fixed header (DefaultMaxPacket). The bridge's are bounded by
	// GatewayMaxPacket.
	MaxPacket int
	// MaxClients bounds the connected clients, the bridge not counted
	// (DefaultMaxClients).
	MaxClients int
	// MaxRetained bounds how many retained messages clients keep on the
	// broker (DefaultMaxRetained).
	MaxRetained int
	// MaxRetainedSize bounds a retained payload from a client, in bytes
	// (DefaultMaxRetainedSize).
	MaxRetainedSize int
	// MaxSubscriptions bounds one client's subscriptions
	// (DefaultMaxSubscriptions), MaxFilters the filters of one SUBSCRIBE
	// (DefaultMaxFilters), MaxSubscriptionsTotal all clients'
	// (DefaultMaxSubscriptionsTotal); the bridge's are not counted. A
	// filter beyond is refused in SUBACK: 0x97 quota exceeded for MQTT 5,
	// 0x80 failure for 3.1.1; the others of the packet are decided as
	// usual.
	MaxSubscriptions, MaxFilters, MaxSubscriptionsTotal int
}

// Options configure an embedded broker.
type Options struct {
	// Addr is host:port to listen on; a bare port means loopback. Port 0
	// picks a free one. Empty means 127.0.0.1:DefaultPort.
	Addr string
	// Tokens logs in token clients; nil lets none in.
	Tokens Tokens
	// Audit, when set, records the refused takeovers of a client id or
	// a kept session by another identity.
	Audit auth.Auditor
	// Policy decides what sessions do; nil is Generic (viewers read,
	// admins write, the bridge both).
	Policy Policy
	// Gateway is the bridge's login; an empty Username lets no bridge in
	// by it.
	Gateway Credentials
	// Anonymous is the role of clients that give neither username nor
	// password; RoleNone refuses them.
	Anonymous auth.Role
	// AnonymousRemote lets anonymous clients in when Addr is not a
	// loopback address; without it Start refuses such options.
	AnonymousRemote bool
	Limits          Limits
	// RevokeEvery is how often sessions are checked against Tokens
	// (DefaultRevokeEvery).
	RevokeEvery time.Duration
	Clock       clock.Clock
	Log         *slog.Logger
}

// Stats are the broker's access counters.
type Stats struct {
	Clients         int    // connected now, the bridge included
	RefusedConnects uint64 // CONNECTs refused (credentials, will, limits, client id)
	RefusedPublish  uint64 // publications dropped (policy, retained limits)
	// RefusedSubscribe counts filters refused for the subscription limits.
	RefusedSubscribe uint64
	Revoked          uint64 // sessions ended because their token went
}

// Broker is a running embedded broker.
type Broker struct {
	srv  *mochi.Server
	tcp  *listener
	addr string
	h    *hook
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// ListenAddr turns a --mqtt-port value (a port, or host:port) into an
// address to listen on.
func ListenAddr(v string) string {
	if v == "" {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort))
	}
	if _, err := strconv.Atoi(v); err == nil {
		return net.JoinHostPort("127.0.0.1", v)
	}
	return v
}

// Loopback reports whether a listen address (as ListenAddr returns it)
// binds loopback only: a literal loopback IP. An empty host, 0.0.0.0, ::,
// a LAN address or a name is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start opens the listener and serves clients until Close.
func Start(o Options) (*Broker, error) {
	o.Log = defaults.Log(o.Log)
	o.Clock = defaults.Clock(o.Clock)
	if o.Policy == nil {
		o.Policy = Generic{}
	}
	o.RevokeEvery = defaults.Positive(o.RevokeEvery, DefaultRevokeEvery)
	l := &o.Limits
	defaults.Positives(map[*int]int{&l.MaxPacket: DefaultMaxPacket, &l.MaxClients: DefaultMaxClients,
		&l.MaxRetained: DefaultMaxRetained, &l.MaxRetainedSize: DefaultMaxRetainedSize,
		&l.MaxSubscriptions: DefaultMaxSubscriptions, &l.MaxFilters: DefaultMaxFilters,
		&l.MaxSubscriptionsTotal: DefaultMaxSubscriptionsTotal})
	addr := ListenAddr(o.Addr)
	if o.Anonymous < auth.RoleNone || o.Anonymous > auth.RoleAdmin {
		return nil, fmt.Errorf("%w: anonymous role %v", ErrConfig, o.Anonymous)
	}
	if o.Anonymous != auth.RoleNone && !Loopback(addr) {
		if !o.AnonymousRemote {
			return nil, fmt.Errorf("%w: anonymous clients on %s, which is not loopback only (AnonymousRemote not set)", ErrConfig, addr)
		}
		o.Log.Warn("mqtt broker: clients without credentials may connect from the network", "addr", addr, "role", o.Anonymous)
	}
	if o.Gateway.Username != "" && o.Gateway.Password == "" {
		return nil, fmt.Errorf("%w: the bridge's login has no password", ErrConfig)
	}
	caps := mochi.NewDefaultServerCapabilities()
	// The listener's guards bound every packet (listener.go); mochi's own
	// bound is the bridge's, for anything that reaches it otherwise.
	caps.MaximumPacketSize = GatewayMaxPacket + 5
	// One slot more than the clients: the bridge's. The hook counts
	// clients without it.
	caps.MaximumClients = int64(l.MaxClients) + 1
	caps.MaximumSessionExpiryInterval = uint32(SessionExpiry / time.Second)
	srv := mochi.New(&mochi.Options{Logger: o.Log, InlineClient: false, Capabilities: caps})
	h := &hook{o: o, srv: srv, sessions: map[string]*session{}, retained: map[string]bool{}, gwConns: map[*mochi.Client]bool{}}
	if err := srv.AddHook(h, nil); err != nil {
		return nil, fmt.Errorf("broker: auth: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrListen, addr, err)
	}
	tcp := &listener{id: "tcp", ln: ln, log: o.Log, maxConns: int64(l.MaxClients) + 1 + PendingLogins, connectTimeout: ConnectTimeout,
		cfg: guardConfig{maxPacket: l.MaxPacket, gateway: o.Gateway}}
	if err := srv.AddListener(tcp); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrListen, addr, err)
	}
	if err := srv.Serve(); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("broker: serve: %w", err)
	}
	b := &Broker{srv: srv, tcp: tcp, addr: tcp.Address(), h: h, stop: make(chan struct{}), done: make(chan struct{})}
	go b.sweep()
	return b, nil
}

// Addr is the address the broker listens on (with the port picked).
func (b *Broker) Addr() string { return b.addr }

// URL is the broker's address as a client URL (tcp://host:port); an
// unspecified host (0.0.0.0, ::) is given as loopback, where the gateway's
// own bridge reaches it.
func (b *Broker) URL() string {
	host, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		return "tcp://" + b.addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "tcp://" + net.JoinHostPort(host, port)
}

// Clients reports how many clients are connected now.
func (b *Broker) Clients() int {
	n := 0
	for _, cl := range b.srv.Clients.GetAll() {
		if !cl.Closed() && !cl.Net.Inline {
			n++
		}
	}
	return n
}

// Stats returns the access counters.
func (b *Broker) Stats() Stats {
	return Stats{Clients: b.Clients(), RefusedConnects: b.h.refusedConnects.Load(),
		RefusedPublish: b.h.refusedPublish.Load(), RefusedSubscribe: b.h.refusedSubscribe.Load(), Revoked: b.h.revoked.Load()}
}

// Close disconnects every client and stops listening.
func (b *Broker) Close() error {
	b.once.Do(func() { close(b.stop) })
	<-b.done
	b.tcp.shutdown(5 * time.Second)
	err := b.srv.Close()
	b.tcp.wg.Wait()
	return err
}

// sweep ends the sessions of revoked tokens, and forgets bridge
// connections that closed unseen (a CONNACK that could not be written),
// until Close.
func (b *Broker) sweep() {
	defer close(b.done)
	t := b.h.o.Clock.NewTicker(b.h.o.RevokeEvery)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C():
			if b.h.o.Tokens != nil {
				b.h.revokeGone()
			}
			b.h.pruneBridge()
		}
	}
}

// session is what the broker knows of a client id's login.
type session struct {
	cl      *mochi.Client // the connection that logged in
	id      auth.Identity
	remote  string // the connection's address (host:port), for the audit log
	gateway bool
	sha     string // the token's hash; "" for anonymous and the bridge
	revoked atomic.Bool
	lastLog atomic.Int64 // unix nanoseconds of the last refusal logged
}

func (s *session) same(o *session) bool {
	return s.gateway == o.gateway && s.id == o.id && s.sha == o.sha
}

// hook is the broker's access control, as a mochi hook.
type hook struct {
	mochi.HookBase
	o   Options
	srv *mochi.Server

	mu       sync.Mutex
	sessions map[string]*session    // by client id
	pending  sync.Map               // *mochi.Client -> *session, between OnConnect and OnConnectAuthenticate
	retained map[string]bool        // topics clients (not the bridge) keep a retained message on
	gwConns  map[*mochi.Client]bool // the bridge's connections now
	gwOnline atomic.Int32           // len(gwConns)

	refusedConnects, refusedPublish, refusedSubscribe, revoked atomic.Uint64

	// retainLock serialises storing retained messages with the scans of
	// new subscriptions for them (retainlock.go); retainHeld marks the
	// clients whose publication or will holds it for writing.
	retainLock sync.RWMutex
	retainHeld sync.Map // *mochi.Client -> struct{}
}

func (h *hook) ID() string { return "holo-access" }

func (h *hook) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnConnect, mochi.OnConnectAuthenticate, mochi.OnACLCheck, mochi.OnPublish,
		mochi.OnDisconnect, mochi.OnClientExpired, mochi.OnRetainMessage,
		mochi.OnSubscribe, mochi.OnSubscribed, mochi.OnPacketProcessed, mochi.OnWill, mochi.OnWillSent}, []byte{b})
}

func (h *hook) session(clientID string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[clientID]
}

// refuseConnect answers a CONNECT with a refusal (v5 code, or the 3.1.1
// return code) and returns the error that ends the connection.
func (h *hook) refuseConnect(cl *mochi.Client, v5 packets.Code, v3 byte, why string, args ...any) error {
	h.refusedConnects.Add(1)
	h.o.Log.Warn("mqtt broker: connection refused", append([]any{"client", cl.ID, "remote", cl.Net.Remote,
		"user", string(cl.Properties.Username), "why", why}, args...)...)
	if cl.Properties.ProtocolVersion < 5 {
		_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: v3})
	} else {
		_ = h.srv.SendConnack(cl, v5, false, nil)
	}
	return v5
}

// MQTT 3.1.1 CONNACK return codes.
const (
	v3BadIdentifier  = 0x02
	v3Unavailable    = 0x03
	v3BadCredentials = 0x04
	v3NotAuthorised  = 0x05
)

// OnConnect logs the client in: it decides who the client is, whether its
// will may be sent and whether there is room, and refuses it otherwise.
func (h *hook) OnConnect(cl *mochi.Client, pk packets.Packet) error {
	user := string(pk.Connect.Username)
	s := &session{remote: cl.Net.Remote}
	switch {
	case h.o.Gateway.Username != "" && user == h.o.Gateway.Username:
		if subtle.ConstantTimeCompare(pk.Connect.Password, []byte(h.o.Gateway.Password)) != 1 {
			return h.refuseConnect(cl, packets.ErrBadUsernameOrPassword, v3BadCredentials, "bad password for the bridge's login")
		}
		s.gateway, s.id = true, auth.Identity{Name: user, Role: auth.RoleNone}
	case user == "" && len(pk.Connect.Password) == 0:
		if h.o.Anonymous == auth.RoleNone {
			return h.refuseConnect(cl, packets.ErrNotAuthorized, v3NotAuthorised, "no credentials (log in with a token: username = its name, password = its secret)")
		}
		s.id = auth.Identity{Name: AnonymousName, Role: h.o.Anonymous}
	default:
		if h.o.Tokens == nil {
			return h.refuseConnect(cl, packets.ErrBadUsernameOrPassword, v3BadCredentials, "no token store")
		}
		tok, err := h.o.Tokens.Lookup(string(pk.Connect.Password))
		if err != nil || tok.Name != user {
			return h.refuseConnect(cl, packets.ErrBadUsernameOrPassword, v3BadCredentials, "unknown token, or its name is not the username")
		}
		s.id, s.sha = auth.Identity{Name: tok.Name, Role: tok.Role}, tok.SHA256
	}
	if pk.Connect.WillFlag {
		if h.o.Policy.Command(pk.Connect.WillTopic) {
			cl.Properties.Will.Retain = false // a command is never retained
		}
		if cl.Properties.Will.WillDelayInterval > 0 {
			// mochi stores a delayed will outside every hook, where
			// retainLock cannot guard it (retainlock.go).
			cl.Properties.Will.Retain = false
		}
		if code, why := h.mayPublish(s, pk.Connect.WillTopic, pk.Connect.WillPayload, cl.Properties.Will.Retain); code != packets.CodeSuccess {
			return h.refuseConnect(cl, packets.ErrNotAuthorized, v3NotAuthorised, "will: "+why, "topic", pk.Connect.WillTopic)
		}
	}
	if !s.gateway {
		if n := atomic.LoadInt64(&h.srv.Info.ClientsConnected) - int64(h.gwOnline.Load()); n >= int64(h.o.Limits.MaxClients) {
			return h.refuseConnect(cl, packets.ErrServerBusy, v3Unavailable, "too many clients", "max", h.o.Limits.MaxClients)
		}
	}
	if old := h.session(cl.ID); old != nil && !old.same(s) {
		if existing, ok := h.srv.Clients.Get(cl.ID); ok && !existing.Closed() {
			h.auditTakeover(s, cl.ID, "the client id is in use by another identity ("+old.id.Name+"): refused")
			return h.refuseConnect(cl, packets.ErrClientIdentifierNotValid, v3BadIdentifier,
				"the client id is in use by another identity", "holder", old.id.Name)
		}
	}
	h.pending.Store(cl, s)
	return nil
}

// OnConnectAuthenticate admits the clients OnConnect logged in.
func (h *hook) OnConnectAuthenticate(cl *mochi.Client, _ packets.Packet) bool {
	v, ok := h.pending.LoadAndDelete(cl)
	if !ok {
		return false
	}
	s := v.(*session)
	s.cl = cl
	h.mu.Lock()
	if old := h.sessions[cl.ID]; old != nil && !old.same(s) {
		// A kept session of another identity (OnConnect refused the id
		// while it is connected): it is not resumed. Forget what it holds
		// (subscriptions, queued messages) so this login starts clean
		// (session present 0) and reads nothing of it.
		if existing, ok := h.srv.Clients.Get(cl.ID); ok && existing != cl {
			h.srv.UnsubscribeClient(existing)
			existing.ClearInflights()
			h.srv.Clients.Delete(cl.ID)
		}
		h.o.Log.Warn("mqtt broker: a kept session of another identity was not resumed: clean start",
			"client", cl.ID, "holder", old.id.Name, "user", s.id.Name)
		h.auditTakeover(s, cl.ID, "the kept session of another identity ("+old.id.Name+") is not resumed: clean start")
	}
	h.sessions[cl.ID] = s
	if s.gateway {
		h.gwConns[cl] = true
		h.gwOnline.Store(int32(len(h.gwConns)))
	}
	h.mu.Unlock()
	return true
}

// OnDisconnect forgets a session that ends with its connection.
func (h *hook) OnDisconnect(cl *mochi.Client, _ error, expire bool) {
	h.mu.Lock()
	s := h.sessions[cl.ID]
	if s != nil && s.cl != cl {
		s = nil // a later login took the id (or the session was revoked)
	}
	if s != nil && expire && !cl.IsTakenOver() {
		delete(h.sessions, cl.ID)
	}
	if h.gwConns[cl] {
		delete(h.gwConns, cl)
		h.gwOnline.Store(int32(len(h.gwConns)))
	}
	h.mu.Unlock()
}

// OnClientExpired forgets a kept session that expired.
func (h *hook) OnClientExpired(cl *mochi.Client) {
	h.mu.Lock()
	delete(h.sessions, cl.ID)
	h.mu.Unlock()
}

// overQuota stands, in a SUBSCRIBE as OnSubscribe passes it on, for a
// filter refused by the subscription limits: it is not a valid filter, so
// mochi refuses it, and OnSubscribed answers it 0x97 for MQTT 5.
const overQuota = "#/subscription-limit"

// subscribeLimits applies the subscription limits to a client's SUBSCRIBE
// (the bridge's and inline ones are not limited): filters beyond
// MaxFilters in the packet, and new filters beyond MaxSubscriptions of
// the client or MaxSubscriptionsTotal of all clients, are refused.
func (h *hook) subscribeLimits(cl *mochi.Client, pk packets.Packet) packets.Packet {
	if cl.Net.Inline {
		return pk
	}
	if s := h.session(cl.ID); s != nil && s.gateway {
		return pk
	}
	l := h.o.Limits
	have := cl.State.Subscriptions.Len()
	total := atomic.LoadInt64(&h.srv.Info.Subscriptions) // the bridge's few included
	filters := slices.Clone(pk.Filters)
	seen := map[string]bool{}
	refused := 0
	for i, f := range filters {
		_, exists := cl.State.Subscriptions.Get(f.Filter)
		switch {
		case i >= l.MaxFilters:
		case exists || seen[f.Filter]:
			continue
		case have >= l.MaxSubscriptions:
		case total >= int64(l.MaxSubscriptionsTotal):
		default:
			seen[f.Filter] = true
			have++
			total++
			continue
		}
		filters[i].Filter = overQuota
		refused++
	}
	if refused > 0 {
		h.refusedSubscribe.Add(uint64(refused))
		now := h.o.Clock.Now().UnixNano()
		if s := h.session(cl.ID); s != nil {
			if last := s.lastLog.Load(); now-last >= int64(time.Second) && s.lastLog.CompareAndSwap(last, now) {
				h.o.Log.Warn("mqtt broker: subscriptions refused: limit", "client", cl.ID, "user", s.id.Name,
					"refused", refused, "filters", len(filters), "max_filters", l.MaxFilters,
					"max_subscriptions", l.MaxSubscriptions, "max_total", l.MaxSubscriptionsTotal)
			}
		}
	}
	pk.Filters = filters
	return pk
}

// OnSubscribed answers the filters refused for the limits "quota
// exceeded" for MQTT 5 (the SUBACK is written after it, with codes).
func (h *hook) OnSubscribed(cl *mochi.Client, pk packets.Packet, codes []byte) {
	if cl.Properties.ProtocolVersion != 5 {
		return
	}
	for i, f := range pk.Filters {
		if i < len(codes) && f.Filter == overQuota {
			codes[i] = packets.ErrQuotaExceeded.Code
		}
	}
}

// OnACLCheck decides subscriptions and deliveries; publications are
// decided with their payload in OnPublish.
func (h *hook) OnACLCheck(cl *mochi.Client, topic string, write bool) bool {
	if cl.Net.Inline {
		return true
	}
	s := h.session(cl.ID)
	if s == nil || s.revoked.Load() {
		return false
	}
	if write {
		return true
	}
	if s.gateway {
		return h.o.Policy.Gateway(topic, false)
	}
	return h.o.Policy.Subscribe(s.id, cl.Net.Remote, topic).Allowed
}

// OnPublish decides a publication: the policy, then the retained limits.
func (h *hook) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline {
		return pk, nil
	}
	s := h.session(cl.ID)
	if s == nil || s.revoked.Load() {
		return pk, h.dropped(cl, pk, packets.ErrNotAuthorized)
	}
	if code, why := h.mayPublish(s, pk.TopicName, pk.Payload, pk.FixedHeader.Retain); code != packets.CodeSuccess {
		h.logRefusal(s, cl, pk.TopicName, why)
		return pk, h.dropped(cl, pk, code)
	}
	if pk.FixedHeader.Retain && h.o.Policy.Command(pk.TopicName) {
		pk.FixedHeader.Retain = false
	}
	if pk.FixedHeader.Retain {
		h.holdRetain(cl) // until mochi has stored it (retainlock.go)
	}
	return pk, nil
}

// dropped returns what tells mochi to drop a publication: "not
// authorised" in PUBACK for MQTT 5 at QoS 1 or 2, else a normal ack.
func (h *hook) dropped(cl *mochi.Client, pk packets.Packet, code packets.Code) error {
	h.refusedPublish.Add(1)
	if cl.Properties.ProtocolVersion == 5 && pk.FixedHeader.Qos > 0 {
		return code
	}
	return packets.CodeSuccessIgnore
}

// mayPublish decides a publication (or a will) of session s: success,
// not authorised, or quota exceeded (the retained limits), and why.
func (h *hook) mayPublish(s *session, topic string, payload []byte, retain bool) (packets.Code, string) {
	if s.gateway {
		if !h.o.Policy.Gateway(topic, true) {
			return packets.ErrNotAuthorized, "the bridge's login publishes only what the gateway mirrors"
		}
		return packets.CodeSuccess, ""
	}
	if d := h.o.Policy.Publish(s.id, s.remote, topic, payload); !d.Allowed {
		return packets.ErrNotAuthorized, d.Reason
	}
	if retain && len(payload) > 0 && !h.o.Policy.Command(topic) {
		if len(payload) > h.o.Limits.MaxRetainedSize {
			return packets.ErrQuotaExceeded, fmt.Sprintf("retained message of %d bytes (at most %d)", len(payload), h.o.Limits.MaxRetainedSize)
		}
		h.mu.Lock()
		full := !h.retained[topic] && len(h.retained) >= h.o.Limits.MaxRetained
		h.mu.Unlock()
		if full {
			return packets.ErrQuotaExceeded, fmt.Sprintf("clients keep %d retained messages (at most %d)", h.o.Limits.MaxRetained, h.o.Limits.MaxRetained)
		}
	}
	return packets.CodeSuccess, ""
}

// OnRetainMessage keeps count of the topics clients retain messages on.
func (h *hook) OnRetainMessage(cl *mochi.Client, pk packets.Packet, r int64) {
	h.releaseRetain(cl) // stored: scans may look again (retainlock.go)
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[cl.ID]
	switch {
	case r < 0, s == nil, s.gateway, cl.Net.Inline:
		delete(h.retained, pk.TopicName)
	case r > 0:
		h.retained[pk.TopicName] = true
	}
}

// logRefusal logs a refused publication, at most once a second per
// session.
func (h *hook) logRefusal(s *session, cl *mochi.Client, topic, why string) {
	now := h.o.Clock.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(time.Second) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	h.o.Log.Warn("mqtt broker: publication refused", "client", cl.ID, "user", s.id.Name, "role", s.id.Role,
		"topic", topic, "why", why)
}

// pruneBridge forgets closed bridge connections.
func (h *hook) pruneBridge() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for cl := range h.gwConns {
		if cl.Closed() {
			delete(h.gwConns, cl)
		}
	}
	h.gwOnline.Store(int32(len(h.gwConns)))
}

// revokeGone ends every session whose token is gone (revoked, or made
// again with another secret).
func (h *hook) revokeGone() {
	live := map[string]string{}
	for _, t := range h.o.Tokens.List() {
		live[t.SHA256] = t.Name
	}
	var gone []string
	h.mu.Lock()
	for id, s := range h.sessions {
		if s.sha == "" || live[s.sha] == s.id.Name {
			continue
		}
		s.revoked.Store(true)
		delete(h.sessions, id)
		gone = append(gone, id)
	}
	h.mu.Unlock()
	for _, id := range gone {
		h.revoked.Add(1)
		cl, ok := h.srv.Clients.Get(id)
		if !ok {
			continue
		}
		h.o.Log.Warn("mqtt broker: token revoked, session ended", "client", id, "remote", cl.Net.Remote,
			"user", string(cl.Properties.Username))
		_ = h.srv.DisconnectClient(cl, packets.ErrNotAuthorized)
		// Forget what a kept session held: nothing of it may resume.
		h.srv.UnsubscribeClient(cl)
		if cur, ok := h.srv.Clients.Get(id); ok && cur == cl {
			h.srv.Clients.Delete(id)
		}
	}
}

// Generic is the policy of a broker that does not know the topic layout:
// viewers read every topic, admins also write, the bridge does both.
type Generic struct{}

// Publish needs admin.
func (Generic) Publish(who auth.Identity, _, _ string, _ []byte) auth.Decision {
	return auth.Authorize(auth.Attributes{Who: who, Surface: auth.SurfaceMQTT, Verb: auth.VerbAct, Resource: auth.ResBridge})
}

// Subscribe needs viewer.
func (Generic) Subscribe(who auth.Identity, _, _ string) auth.Decision {
	return auth.Authorize(auth.Attributes{Who: who, Surface: auth.SurfaceMQTT, Verb: auth.VerbWatch, Resource: auth.ResEvents})
}

// Gateway allows everything.
func (Generic) Gateway(string, bool) bool { return true }

// Command knows no commands.
func (Generic) Command(string) bool { return false }

// auditTakeover records a refused takeover of client id by session s.
func (h *hook) auditTakeover(s *session, clientID, why string) {
	if h.o.Audit == nil {
		return
	}
	h.o.Audit.Audit(auth.Record{Time: h.o.Clock.Now(), Attributes: auth.Attributes{Who: s.id, Surface: auth.SurfaceMQTT,
		Operation: "CONNECT client id " + clientID, Name: clientID, Client: s.remote}, Reason: why, Code: "PermissionDenied"})
}
