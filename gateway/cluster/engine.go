package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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
)

// Embedded is the --cluster value that runs a single-node engine inside
// this gateway.
const Embedded = "embedded"

// DefaultListen is where an embedded engine takes clients when
// EngineOptions.Listen is empty: every interface, NATS's usual port, so
// gateways on other hosts can join (with the token in the join URL).
const DefaultListen = ":4222"

// TokenFile is the file under EngineOptions.Dir that keeps the embedded
// engine's client token across restarts (mode 0600).
const TokenFile = "engine.token"

// EngineOptions configure the connection to the engine.
type EngineOptions struct {
	// Name is this gateway's name in the cluster (Check tells a good
	// one).
	Name string
	// URL is Embedded or the engine's client URLs, comma-separated
	// (nats://[user:password@|token@]host:port, tls:// for TLS).
	URL string
	// Listen is the embedded engine's client address (default
	// DefaultListen; port 0 picks one).
	Listen string
	// Dir keeps the embedded engine's streams and its token.
	Dir string
	// Replicas is how many copies of each bucket and stream the engine
	// keeps: 0 picks 3 on a clustered engine, else 1.
	Replicas int
	// CA is a PEM file of the authority that signed the engine servers'
	// certificates (tls:// URLs); empty uses the host's roots.
	CA  string
	Log *slog.Logger
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
	replicas int

	// down is when the connection was lost (zero while connected).
	mu      sync.Mutex
	down    time.Time
	changed chan struct{} // closed and replaced at every connection change
	// reconnects counts connections regained.
	reconnects atomic.Uint64
}

// Check refuses a bad gateway name or engine URL before anything starts.
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
			return fmt.Errorf("%w: engine URL %q: want %s or nats://host:port[,nats://...]", ErrConfig, u, Embedded)
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

// OpenEngine starts the embedded engine (URL Embedded) or connects to the
// engine's servers. The connection reconnects forever; Partitioned and
// Changed tell its state.
func OpenEngine(ctx context.Context, o EngineOptions) (*Engine, error) {
	if err := Check(o.Name, o.URL); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{o: o, log: o.Log, changed: make(chan struct{})}
	opts := []nats.Option{
		nats.Name("holo-gateway " + o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 100*time.Millisecond),
		nats.Timeout(3 * time.Second),
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(-1), // nothing is buffered blind: callers see the failure and retry
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { e.setDown(true, err) }),
		nats.ReconnectHandler(func(*nats.Conn) { e.setDown(false, nil) }),
		nats.ClosedHandler(func(*nats.Conn) { e.setDown(true, ErrClosed) }),
	}
	servers := o.URL
	if o.URL == Embedded {
		token, err := e.startEmbedded()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.InProcessServer(e.srv), nats.Token(token))
		servers = e.srv.ClientURL()
	} else if o.CA != "" {
		opts = append(opts, nats.RootCAs(o.CA))
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
			e.Close()
			return nil, fmt.Errorf("cluster: engine %s: not reached: %w", redactURL(servers), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.js, err = jetstream.New(nc)
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

// startEmbedded runs a single-node engine with JetStream under Dir,
// requiring the token kept in Dir/TokenFile (made on first start).
func (e *Engine) startEmbedded() (string, error) {
	if e.o.Dir == "" {
		return "", fmt.Errorf("%w: the embedded engine needs a directory", ErrConfig)
	}
	if err := os.MkdirAll(e.o.Dir, 0o700); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	token, err := loadToken(filepath.Join(e.o.Dir, TokenFile))
	if err != nil {
		return "", err
	}
	listen := e.o.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%w: engine listen address %q: %v", ErrConfig, listen, err)
	}
	p := 0
	if _, err := fmt.Sscan(port, &p); err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("%w: engine listen address %q: bad port", ErrConfig, listen)
	}
	if p == 0 {
		p = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	so := &server.Options{ServerName: e.o.Name, Host: host, Port: p, JetStream: true,
		StoreDir: filepath.Join(e.o.Dir, "jetstream"), Authorization: token, NoSigs: true}
	srv, err := server.NewServer(so)
	if err != nil {
		return "", fmt.Errorf("cluster: embedded engine: %w", err)
	}
	srv.SetLoggerV2(&serverLog{log: e.log.With("component", "engine")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return "", fmt.Errorf("cluster: embedded engine did not start on %s", listen)
	}
	e.srv = srv
	addr := srv.Addr().(*net.TCPAddr)
	h := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if hn, err := os.Hostname(); err == nil {
			h = hn
		}
	}
	e.join = (&url.URL{Scheme: "nats", User: url.User(token), Host: net.JoinHostPort(h, fmt.Sprint(addr.Port))}).String()
	return token, nil
}

// loadToken reads the embedded engine's token, making it on first use.
func loadToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		if t := strings.TrimSpace(string(raw)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cluster: %w", err)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	t := base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return t, nil
}

// JoinURL is the URL other gateways join an embedded engine with (it
// holds the engine's token: treat it as a secret); "" when this gateway
// runs none.
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
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
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
