package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/defaults"
)

// Embedded is the --cluster value that runs a single-node engine inside
// this gateway.
const Embedded = "embedded"

// DefaultListen is where an embedded engine takes clients when
// EngineOptions.Listen is empty: loopback only. Gateways on other hosts
// join an engine told to listen on a reachable address (--cluster-listen),
// with TLS (--cluster-cert, --cluster-key) so their logins never cross
// the network in clear text.
const DefaultListen = "127.0.0.1:4222"

// oldTokenFile is where engines before per-gateway users kept their one
// shared token; a start removes it.
const oldTokenFile = "engine.token"

// DefaultReloadEvery is how often the embedded engine looks for changes
// of its users file.
const DefaultReloadEvery = 500 * time.Millisecond

// EngineOptions configure the connection to the engine.
type EngineOptions struct {
	// Name is this gateway's name in the cluster (Check tells a good
	// one).
	Name string
	// URL is Embedded or the engine's client URLs, comma-separated
	// (nats://host:port, tls:// for TLS), without credentials: those
	// come in Credentials.
	URL string
	// Credentials are the engine login and the cluster secret (from a
	// file: ReadCredentials). The embedded engine makes its own.
	Credentials Credentials
	// Listen is the embedded engine's client address (default
	// DefaultListen; port 0 picks one).
	Listen string
	// Cert and Key are the embedded engine's TLS certificate and key
	// (PEM files): with them it takes TLS clients only.
	Cert, Key string
	// Dir keeps the embedded engine's streams, users and cluster secret.
	Dir string
	// Replicas is how many copies of each bucket and stream the engine
	// keeps: 0 picks 3 on a clustered engine, else 1.
	Replicas int
	// CA is a PEM file of the authority that signed the engine servers'
	// certificates (tls:// URLs); empty uses the host's roots.
	CA string
	// ReloadEvery is how often the embedded engine looks for changes of
	// its users (default DefaultReloadEvery).
	ReloadEvery time.Duration
	Log         *slog.Logger
}

// Engine is this gateway's connection to the cluster's engine (NATS with
// JetStream), and the embedded server when it runs one.
type Engine struct {
	o        EngineOptions
	log      *slog.Logger
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	join     string // the URL others join with (embedded)
	secret   []byte // the cluster secret
	replicas int

	// The embedded engine: this gateway's own password (in memory
	// only), its TLS configuration, and the users file reloader.
	selfPassword string
	selfHash     string
	tls          *tls.Config
	stopReload   chan struct{}
	reloaded     sync.WaitGroup
	usersMu      sync.Mutex
	usersRaw     []byte
	reloads      atomic.Uint64

	// down is when the connection was lost (zero while connected).
	mu      sync.Mutex
	down    time.Time
	changed chan struct{} // closed and replaced at every connection change
	// reconnects counts connections regained.
	reconnects atomic.Uint64
}

// Check refuses a bad gateway name or engine URL before anything starts.
// An engine URL carrying credentials is refused: they would be on the
// command line, for any user of the host to read.
func Check(name, rawURL string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if rawURL == Embedded {
		return nil
	}
	for u := range strings.SplitSeq(rawURL, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.Host == "" {
			return fmt.Errorf("%w: engine URL %q: want %s or nats://host:port[,nats://...]", ErrConfig, redactURL(u), Embedded)
		}
		if _, hasPassword := p.User.Password(); p.User != nil && (p.User.Username() != "" || hasPassword) {
			return fmt.Errorf("%w: engine URL %s carries credentials: put them in a file named by --cluster-credentials (or $%s), never in the URL",
				ErrConfig, redactURL(u), CredentialsEnv)
		}
		switch p.Scheme {
		case "nats", "tls":
		default:
			return fmt.Errorf("%w: engine URL %q: scheme nats:// or tls://", ErrConfig, u)
		}
	}
	return nil
}

// checkName accepts names that fit in a subject token and a KV key.
func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: gateway name %q: 1-64 characters", ErrConfig, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: gateway name %q: letters, digits, '-' and '_' only", ErrConfig, name)
		}
	}
	return nil
}

// InboxPrefix is the prefix of gateway name's reply subjects: each
// gateway's own, so an engine user may read only its own replies.
func InboxPrefix(name string) string { return "_INBOX_" + name }

// publishAckWait bounds the wait for the engine's acknowledgement of an
// asynchronous publish (an event, a board record); the publish then
// fails and is tried again (its message id drops a repeat). Without it
// a publish whose acknowledgement never came (lost while an engine node
// died, the connection staying up) held its board's events for good:
// each board has one event in flight at a time (the soak's board whose
// happenings stopped reaching the stream after its gateway's restart).
var publishAckWait = 10 * time.Second

// OpenEngine starts the embedded engine (URL Embedded) or connects to the
// engine's servers. The connection reconnects forever; Partitioned and
// Changed tell its state.
func OpenEngine(ctx context.Context, o EngineOptions) (*Engine, error) {
	if err := Check(o.Name, o.URL); err != nil {
		return nil, err
	}
	o.Log = defaults.Log(o.Log)
	o.ReloadEvery = defaults.Positive(o.ReloadEvery, DefaultReloadEvery)
	e := &Engine{o: o, log: o.Log, changed: make(chan struct{})}
	opts := []nats.Option{
		nats.Name("holo-gateway " + o.Name),
		nats.CustomInboxPrefix(InboxPrefix(o.Name)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 100*time.Millisecond),
		nats.Timeout(3 * time.Second),
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.RetryOnFailedConnect(true),
		// A refused login is retried: the engine may not have loaded
		// this gateway's user yet.
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectBufSize(-1), // nothing is buffered blind: callers see the failure and retry
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { e.setDown(true, err) }),
		nats.ReconnectHandler(func(*nats.Conn) { e.setDown(false, nil) }),
		nats.ClosedHandler(func(*nats.Conn) { e.setDown(true, ErrClosed) }),
		// A refused subscription or publication (the engine user's
		// permissions) is said, not swallowed.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			e.log.Warn("cluster: engine", "subject", subject, "err", err)
		}),
	}
	servers := plainURLs(o.URL)
	if o.URL == Embedded {
		if err := e.startEmbedded(); err != nil {
			return nil, err
		}
		opts = append(opts, nats.InProcessServer(e.srv), nats.UserInfo(o.Name, e.selfPassword))
		// In process, the engine wants no TLS: a tls:// URL would make
		// the client insist on it.
		servers = strings.Replace(e.srv.ClientURL(), "tls://", "nats://", 1)
	} else {
		c := o.Credentials
		if c.Secret == "" {
			return nil, fmt.Errorf("%w: no cluster secret: the credentials file (--cluster-credentials or $%s) needs a secret= line, the same on every gateway",
				ErrConfig, CredentialsEnv)
		}
		switch {
		case c.User != "":
			opts = append(opts, nats.UserInfo(c.User, c.Password))
		case c.Token != "":
			opts = append(opts, nats.Token(c.Token))
		}
		e.secret = []byte(c.Secret)
		if o.CA != "" {
			opts = append(opts, nats.RootCAs(o.CA))
		}
	}
	nc, err := nats.Connect(servers, opts...)
	if err != nil {
		e.shutdown()
		return nil, fmt.Errorf("cluster: engine %s: %w", redactURL(servers), err)
	}
	e.nc = nc
	// The first connection is waited for (bounded by ctx): a gateway
	// joining a cluster it cannot reach says so instead of starting
	// partitioned.
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			why := ctx.Err()
			if last := nc.LastError(); last != nil {
				why = fmt.Errorf("%w (%v)", why, last)
			}
			e.Close()
			return nil, fmt.Errorf("cluster: engine %s: not reached: %w", redactURL(servers), why)
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.js, err = jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishAckWait))
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	e.replicas = o.Replicas
	if e.replicas <= 0 {
		e.replicas = 1
		if nc.ConnectedClusterName() != "" {
			e.replicas = 3
		}
	}
	return e, nil
}

// startEmbedded runs a single-node engine with JetStream under Dir: its
// users are this gateway (a password made for this run, in memory) and
// the gateways of Dir/UsersFile, reloaded when that file changes.
func (e *Engine) startEmbedded() error {
	if e.o.Dir == "" {
		return fmt.Errorf("%w: the embedded engine needs a directory", ErrConfig)
	}
	if err := os.MkdirAll(e.o.Dir, 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	_ = os.Remove(filepath.Join(e.o.Dir, oldTokenFile))
	secret, err := loadSecret(e.o.Dir)
	if err != nil {
		return err
	}
	e.secret = []byte(secret)
	if e.selfPassword, err = randomSecret(24); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if e.selfHash, err = hashPassword(e.selfPassword); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if (e.o.Cert == "") != (e.o.Key == "") {
		return fmt.Errorf("%w: the engine's TLS needs both a certificate and a key (--cluster-cert, --cluster-key)", ErrConfig)
	}
	if e.o.Cert != "" {
		e.tls, err = server.GenTLSConfig(&server.TLSConfigOpts{CertFile: e.o.Cert, KeyFile: e.o.Key})
		if err != nil {
			return fmt.Errorf("%w: the engine's TLS: %v", ErrConfig, err)
		}
	}
	listen := e.o.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("%w: engine listen address %q: %v", ErrConfig, listen, err)
	}
	p := 0
	if _, err := fmt.Sscan(port, &p); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%w: engine listen address %q: bad port", ErrConfig, listen)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	so, err := e.serverOptions(host, p)
	if err != nil {
		return err
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return fmt.Errorf("cluster: embedded engine: %w", err)
	}
	srv.SetLoggerV2(&serverLog{log: e.log.With("component", "engine")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("cluster: embedded engine did not start on %s", listen)
	}
	e.srv = srv
	addr := srv.Addr().(*net.TCPAddr)
	h := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if hn, err := os.Hostname(); err == nil {
			h = hn
		}
	}
	scheme := "nats"
	if e.tls != nil {
		scheme = "tls"
	}
	e.join = (&url.URL{Scheme: scheme, Host: net.JoinHostPort(h, fmt.Sprint(addr.Port))}).String()
	e.stopReload = make(chan struct{})
	e.reloaded.Go(func() { e.reloadLoop(host, addr.Port) })
	return nil
}

// serverOptions are the embedded engine's options with the users of the
// users file as it is now.
func (e *Engine) serverOptions(host string, port int) (*server.Options, error) {
	users, raw, err := readUsers(e.o.Dir)
	if err != nil {
		return nil, err
	}
	e.usersMu.Lock()
	e.usersRaw = raw
	e.usersMu.Unlock()
	list := []*server.User{{Username: e.o.Name, Password: e.selfHash, Permissions: GatewayPermissions(e.o.Name)}}
	for _, u := range users {
		if u.Name == e.o.Name || checkName(u.Name) != nil {
			continue
		}
		list = append(list, &server.User{Username: u.Name, Password: u.Bcrypt, Permissions: GatewayPermissions(u.Name)})
	}
	so := &server.Options{ServerName: e.o.Name, Host: host, Port: port, JetStream: true,
		StoreDir: filepath.Join(e.o.Dir, "jetstream"), Users: list, NoSigs: true}
	if e.tls != nil {
		so.TLSConfig, so.TLS, so.TLSTimeout = e.tls, true, 2
	}
	return so, nil
}

// reloadLoop reloads the engine's users when the users file changes,
// until the engine stops. A removed user's connections are closed.
func (e *Engine) reloadLoop(host string, port int) {
	t := time.NewTicker(e.o.ReloadEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stopReload:
			return
		case <-t.C:
		}
		raw, err := os.ReadFile(filepath.Join(e.o.Dir, UsersFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
		e.usersMu.Lock()
		same := bytes.Equal(raw, e.usersRaw)
		e.usersMu.Unlock()
		if same {
			continue
		}
		so, err := e.serverOptions(host, port)
		if err == nil {
			err = e.srv.ReloadOptions(so)
		}
		if err != nil {
			e.log.Warn("cluster: reloading the engine's users", "err", err)
			continue
		}
		e.reloads.Add(1)
		e.log.Info("cluster: engine users reloaded", "users", len(so.Users))
	}
}

// GatewayPermissions are what gateway name's engine user may do: publish
// what a gateway publishes (but never delete a stream, nor touch the
// system account), and subscribe only to its own routed requests, the
// rollout coordinator's subject and its own replies (InboxPrefix).
// Another gateway's routed requests and replies are out of its reach.
func GatewayPermissions(name string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.DELETE.>", "$SYS.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{gwSubject(name), subjectRollouts, InboxPrefix(name) + ".>"}},
	}
}

// Secret is the cluster secret (signs routed requests and token records).
func (e *Engine) Secret() []byte { return e.secret }

// JoinURL is the URL other gateways join an embedded engine with (no
// credentials: each gateway has its own file, MintCredentials); "" when
// this gateway runs none.
func (e *Engine) JoinURL() string { return e.join }

// Name is this gateway's name.
func (e *Engine) Name() string { return e.o.Name }

// Replicas is how many copies of each bucket and stream are kept.
func (e *Engine) Replicas() int { return e.replicas }

// Conn is the engine connection.
func (e *Engine) Conn() *nats.Conn { return e.nc }

// JetStream is the JetStream context over the connection.
func (e *Engine) JetStream() jetstream.JetStream { return e.js }

// Where names the engine for banners and logs, without credentials.
func (e *Engine) Where() string {
	if e.srv != nil {
		return "embedded engine " + redactURL(e.join)
	}
	return "engine " + redactURL(e.o.URL)
}

func (e *Engine) setDown(down bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case down && e.down.IsZero():
		e.down = time.Now()
		e.log.Warn("cluster: engine connection lost", "err", err)
	case !down && !e.down.IsZero():
		e.down = time.Time{}
		e.reconnects.Add(1)
		e.log.Info("cluster: engine connection back")
	default:
		return
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// Connected reports whether the engine is reachable now, and the channel
// that is closed at the next change.
func (e *Engine) Connected() (bool, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.down.IsZero(), e.changed
}

// Close closes the connection and stops the embedded engine.
func (e *Engine) Close() {
	if e.nc != nil {
		_ = e.nc.Drain()
		deadline := time.Now().Add(2 * time.Second)
		for !e.nc.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		e.nc.Close()
	}
	e.shutdown()
}

func (e *Engine) shutdown() {
	if e.stopReload != nil {
		close(e.stopReload)
		e.reloaded.Wait()
		e.stopReload = nil
	}
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
}

// plainURLs drops an empty userinfo ("nats://@host") from engine URLs:
// the client would log in with it rather than with the credentials.
func plainURLs(raw string) string {
	if raw == Embedded {
		return raw
	}
	var out []string
	for u := range strings.SplitSeq(raw, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			out = append(out, u)
			continue
		}
		p.User = nil
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

// redactURL hides the credentials of engine URLs.
func redactURL(raw string) string {
	var out []string
	for u := range strings.SplitSeq(raw, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			out = append(out, "(unparsable URL)")
			continue
		}
		if p.User != nil {
			p.User = url.User("xxxxx")
		}
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

// serverLog sends the embedded server's log to slog: notices at debug,
// warnings and errors as such.
type serverLog struct{ log *slog.Logger }

func (l *serverLog) Noticef(f string, v ...any) { l.log.Debug(fmt.Sprintf(f, v...)) }
func (l *serverLog) Warnf(f string, v ...any)   { l.log.Warn(fmt.Sprintf(f, v...)) }
func (l *serverLog) Fatalf(f string, v ...any)  { l.log.Error(fmt.Sprintf(f, v...)) }
func (l *serverLog) Errorf(f string, v ...any)  { l.log.Error(fmt.Sprintf(f, v...)) }
func (l *serverLog) Debugf(string, ...any)      {}
func (l *serverLog) Tracef(string, ...any)      {}
