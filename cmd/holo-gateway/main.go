// Command holo-gateway bridges many boards to one control plane: it masters
// RS485 lines, follows LAN boards, keeps the registry in a bbolt store, and
// serves the fleet API (gRPC and REST under /v1/), the OpenAPI description,
// /metrics and the probes /healthz and /readyz on one address.
//
//	holo-gateway --data DIR [--listen ADDR] [--line URL]... [--board URL]... [--boards-file F]
//	             [--mqtt URL | --mqtt-port PORT] [--mqtt-base T] [--ha-prefix T] [--mdns] [--tls-cert F --tls-key F] [--insecure-lab]
//	             [--max-body N] [--http-*-timeout D] [--streams-per-token N] [--streams-total N] [--rate R] [--rate-burst N]
//	             [--metrics-auth] [--allow-host H]... [--audit-max-age D] [--audit-max-records N]
//	             [--log-format text|json] [-v]
//	holo-gateway demo [same flags]   also runs a simulated installation
//	holo-gateway token create --data DIR --name NAME [--role admin]
//	holo-gateway token list --data DIR
//	holo-gateway token revoke --data DIR NAME
//	holo-gateway cluster credentials|revoke|users --data DIR [NAME]   engine users of the embedded engine (docs/cluster.md)
//	holo-gateway health [--url URL] [--ready]   probe a running gateway (exit 0 on 200)
//
// Tokens: the API wants "Authorization: Bearer <token>". When the store
// holds no token at all, the first start creates an admin token named
// "admin" and prints its secret once in the banner (it is stored only as
// its SHA-256). `holo-gateway token create` makes more while the gateway
// is stopped (the store is locked while it runs); holoctl token makes them
// through the API. --insecure-lab serves everyone without a token; in demo
// mode, requests from loopback need none. Both then answer only requests
// addressed to localhost (--allow-host adds names) and only JSON changing
// requests, so no web page can drive them; neither must be exposed.
//
// Board passwords never need the command line: HOLO_BOARD_PASSWORD is the
// password of every --board URL without one, and --boards-file lists
// boards with their passwords (a file only its owner may read).
//
// Every change and every refusal, on every surface, goes to the audit log
// in the store (GET /v1/audit, holoctl audit).
//
// MQTT: the embedded broker logs clients in with the same tokens
// (username = the token's name, password = its secret) and gives them
// their role on every topic; clients without credentials get
// --mqtt-anonymous (operator in demo mode), on loopback only unless
// --mqtt-allow-anonymous-remote. With an external broker, --mqtt-accept
// caps what the bridge takes. See docs/mqtt-security.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/transport"
	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/audit"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/registry"
	"github.com/holofleet/holofleet/gateway/rs485"
	"github.com/holofleet/holofleet/store"
)

// StoreFile is the gateway's bbolt file under --data.
const StoreFile = "gateway.db"

// errUsage marks bad command lines (exit status 2).
var errUsage = errors.New("usage")

// errNoDemo is the answer of `holo-gateway demo` in a build without it
// (-tags nodemo, see demo.go).
var errNoDemo = fmt.Errorf("%w: this holo-gateway is built without the demo (-tags nodemo); use a default build for `holo-gateway demo`", errUsage)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) > 0 && args[0] == "token":
		err = runToken(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "cluster":
		err = runCluster(args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "health":
		err = runHealth(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "demo" && !demoBuilt:
		err = errNoDemo
	case len(args) > 0 && args[0] == "demo":
		err = runServe(ctx, args[1:], true, stdout, stderr)
	default:
		err = runServe(ctx, args, false, stdout, stderr)
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "holo-gateway: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "holo-gateway: %v\n", err)
		return 1
	}
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// options are the serve flags.
type options struct {
	data, listen      string
	adminTokenFile    string
	mqtt              string
	mq                mqttFlags
	lines, boards     listFlag
	mdns              bool
	tlsCert, tlsKey   string
	insecureLab       bool
	demoBoards, demoG int
	verbose           bool
	logFormat         string
	access            accessFlags
	keyFlags          keyFlags
	keys              trustKeys // read from keyFlags

	osc oscFlags
	cue cueFlags
	dmx dmxFlags

	cluster clusterFlags
}

func parseServe(args []string, isDemo bool, stderr io.Writer) (options, error) {
	name := "holo-gateway"
	if isDemo {
		name += " demo"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	defData, defListen := "", ":8480"
	if isDemo {
		defData, defListen = filepath.Join(os.TempDir(), "holo-gateway-demo"), "127.0.0.1:8480"
	}
	fs.StringVar(&o.data, "data", defData, "directory of the gateway's store (required outside demo)")
	fs.StringVar(&o.listen, "listen", defListen, "address of the API, REST, /metrics (host:port; port 0 picks one)")
	fs.StringVar(&o.adminTokenFile, "admin-token-file", "", "file (mode 0600) the first admin token is written to, when the store has no token yet (default DATA/"+AdminTokenFile+"); never printed")
	fs.StringVar(&o.mqtt, "mqtt", "", "external MQTT broker URL (tcp://, ssl://; no password in it: --mqtt-password-file or $HOLO_MQTT_PASSWORD); without it an embedded broker runs")
	addMQTTFlags(fs, &o.mq)
	fs.Var(&o.lines, "line", "RS485 line to master (serial device, pty, tcp or simline URL; ?baud=N); repeatable")
	fs.Var(&o.boards, "board", "LAN board base URL (http://host[:port]; password from $HOLO_BOARD_PASSWORD or --boards-file); repeatable")
	fs.BoolVar(&o.mdns, "mdns", false, "discover LAN boards by mDNS")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate file (PEM)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "TLS key file (PEM)")
	fs.BoolVar(&o.insecureLab, "insecure-lab", false, "serve the API without tokens (a lab only)")
	fs.BoolVar(&o.verbose, "v", false, "log debug messages")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json (slog)")
	addAccessFlags(fs, &o.access)
	addKeyFlags(fs, &o.keyFlags, isDemo)

	addOSCFlags(fs, &o.osc)
	addCueFlags(fs, &o.cue)
	addDMXFlags(fs, &o.dmx)
	addClusterFlags(fs, &o.cluster)
	if isDemo {
		addDemoFlags(fs, &o)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if o.data == "" {
		return o, fmt.Errorf("%w: --data DIR is required", errUsage)
	}
	if o.adminTokenFile == "" {
		o.adminTokenFile = filepath.Join(o.data, AdminTokenFile)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return o, fmt.Errorf("%w: --log-format is text or json, not %q", errUsage, o.logFormat)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, fmt.Errorf("%w: --tls-cert and --tls-key go together", errUsage)
	}
	// Every flag is checked here, before anything starts: a gateway must
	// never serve for a while and then fail (or quietly drop a feature)
	// over a flag it could have refused at once.
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return o, fmt.Errorf("%w: --listen %q: %v", errUsage, o.listen, err)
	}
	if _, err := oscRole(o.osc.access); err != nil {
		return o, err
	}
	if a := o.osc.addr.v; o.osc.addr.set && a != "off" {
		if err := checkOSCAddr(a); err != nil {
			return o, fmt.Errorf("%w: --osc %q: %v", errUsage, a, err)
		}
	}
	if err := o.dmx.check(); err != nil {
		return o, err
	}
	if err := o.cue.check(); err != nil {
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := o.mq.check(o.mqtt); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := o.cluster.check(); err != nil {
		return o, err
	}
	for _, l := range o.lines {
		if err := transport.Check(l); err != nil {
			return o, fmt.Errorf("%w: --line %s: %w", errUsage, l, err)
		}
	}
	for _, b := range o.boards {
		_, pw, err := splitPassword(b)
		if err != nil {
			return o, fmt.Errorf("%w: --board %s: %w", errUsage, redact(b), err)
		}
		if pw != "" {
			return o, fmt.Errorf("%w: --board %s: secrets are not taken on the command line (ps and shell history show them): put the password in --boards-file or $%s",
				errUsage, redact(b), boardPasswordEnv)
		}
	}
	var err error
	if o.keys, err = o.keyFlags.resolve(isDemo); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

func runServe(ctx context.Context, args []string, isDemo bool, stdout, stderr io.Writer) error {
	o, err := parseServe(args, isDemo, stderr)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if o.logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(handler)
	if err := os.MkdirAll(o.data, 0o700); err != nil {
		return err
	}
	db, err := store.Open(filepath.Join(o.data, StoreFile))
	if err != nil {
		return err
	}
	defer db.Close()
	tokens, err := auth.Open(db)
	if err != nil {
		return err
	}
	reg, err := registry.Open(db)
	if err != nil {
		return err
	}
	auditLog, err := audit.Open(audit.Options{DB: db, MaxAge: o.access.auditAge, MaxRecords: o.access.auditMax,
		Log: log.With("component", "audit")})
	if err != nil {
		return err
	}
	// The one door of every surface: the API, the MQTT bridge and the
	// others identify, decide and record through it.
	guard := &auth.Guard{Tokens: tokens, Insecure: o.insecureLab, LoopbackFree: isDemo, Audit: auditLog}
	var firstSecret string
	if tokens.Len() == 0 && !o.insecureLab {
		// In a cluster every gateway's tokens are shared: each names its
		// first admin after itself.
		first := "admin"
		if o.cluster.url != "" {
			first += "-" + o.cluster.name
		}
		if firstSecret, _, err = tokens.Create(first, auth.RoleAdmin); err != nil {
			return err
		}
		// The secret goes to a file only the gateway's user reads, never
		// to stdout (the journal, docker logs keep stdout).
		if err := writeSecretFile(o.adminTokenFile, firstSecret); err != nil {
			_ = tokens.Revoke(first)
			return fmt.Errorf("first admin token: %w", err)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := wire(ctx, o, isDemo, log)
	if err != nil {
		return err
	}
	defer w.close()
	fl := fleet.New(fleet.Options{Registry: reg, Drivers: w.drivers, Log: log})

	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		auditLog.Collector())
	e := &env{opts: o, demo: isDemo, db: db, tokens: tokens, fleet: fl, wiring: w, log: log, registerer: promReg, stdout: stdout,
		guard: guard, audit: auditLog}
	var comps []component
	for _, mk := range components {
		c, err := mk(ctx, e)
		if err != nil {
			return err
		}
		comps = append(comps, c)
	}

	var cues api.Cues
	if e.cues != nil {
		cues = e.cues
	}
	srv, err := api.New(api.Config{
		Fleet: e.service(), Tokens: tokens, InsecureLab: o.insecureLab, Demo: isDemo,
		TLSCert: o.tlsCert, TLSKey: o.tlsKey, Logger: log,
		Registerer: promReg, Gatherer: promReg, Extra: e.apiExtra, ExtraOpenAPI: e.apiDocs,
		Artifacts: e.artifacts, Rollouts: e.rollouts, Cluster: e.clusterAPI(), Installation: e.installation,
		Cues:  cues,
		Ready: readyChecks(db, w.states, comps),

		Guard: guard, Audit: auditLog, Limits: o.access.apiLimits(), MetricsAuth: o.access.metricsAuth,
		AllowHosts: o.access.allowHosts,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	if e.cluster != nil {
		e.cluster.SetAPI(ln.Addr().String())
	}
	var extra []string
	for _, c := range comps {
		extra = append(extra, c.banner...)
	}
	banner(stdout, o, isDemo, ln.Addr().String(), firstSecret, w, extra)

	// The audit log is written until everything else has stopped, so the
	// last requests' records are kept.
	auditCtx, auditStop := context.WithCancel(context.Background())
	auditDone := make(chan error, 1)
	go func() { auditDone <- auditLog.Run(auditCtx) }()

	var wg sync.WaitGroup
	var fleetErr, apiErr error
	compErrs := make([]error, len(comps))
	wg.Go(func() { fleetErr = fl.Run(ctx) })
	for i, c := range comps {
		if c.run != nil {
			wg.Go(func() { compErrs[i] = c.run(ctx) })
		}
	}
	wg.Go(func() {
		apiErr = srv.Serve(ctx, ln)
		cancel() // a dead listener stops the gateway
	})
	wg.Wait()
	auditStop()
	auditErr := <-auditDone
	fmt.Fprintln(stdout, "holo-gateway: stopped")
	return errors.Join(append([]error{apiErr, fleetErr, auditErr}, compErrs...)...)
}

// wiring holds what wire started: the drivers for the fleet core and what
// must be closed when the gateway stops.
type wiring struct {
	drivers []fleet.Driver
	states  *driverStates // the drivers' Run, for readiness
	lines   []string      // "name url" per RS485 line
	boards  []string
	demo    interface {
		Close() error
		Summary() string
	} // the simulated installation (demo.go), nil without one
	notes []string
	lan   *lan.LAN
}

func (w *wiring) close() {
	if w.demo != nil {
		_ = w.demo.Close()
	}
}

// wire builds the drivers: one RS485 master per --line (and the demo's
// line), one LAN driver with every --board (and the demo's boards).
func wire(ctx context.Context, o options, isDemo bool, log *slog.Logger) (*wiring, error) {
	w := &wiring{states: &driverStates{}}
	lanDrv := lan.New(lan.Options{Log: log.With("driver", "lan"),
		ReplayKept: o.cluster.url != ""}) // the cluster drops what its stream has (docs/cluster.md)
	w.lan = lanDrv
	if isDemo {
		if err := startDemo(ctx, o, w, lanDrv, log); err != nil {
			w.close()
			return nil, err
		}
	}
	for i, addr := range o.lines {
		name := fmt.Sprintf("line%d", i)
		baud := 0
		if u, err := url.Parse(addr); err == nil {
			if b := u.Query().Get("baud"); b != "" {
				baud, _ = strconv.Atoi(b)
			}
		}
		octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
		port, err := transport.Open(octx, addr)
		ocancel()
		if err != nil {
			w.close()
			return nil, fmt.Errorf("--line %s: %w", addr, err)
		}
		w.drivers = append(w.drivers, w.states.line(rs485.New(rs485.Options{Name: name, Port: port, Baud: baud,
			ReplayKept: o.cluster.url != "", // the cluster drops what its stream has (docs/cluster.md)
			Log:        log.With("driver", "rs485:"+name)})))
		w.lines = append(w.lines, name+" "+addr)
	}
	boards, notes, err := lanBoards(o)
	if err != nil {
		w.close()
		return nil, err
	}
	w.notes = append(w.notes, notes...)
	for _, b := range boards {
		if err := lanDrv.Add(b.url, b.password); err != nil {
			w.close()
			return nil, fmt.Errorf("board %s: %w", b.url, err)
		}
		w.boards = append(w.boards, b.url)
	}
	w.drivers = append(w.drivers, w.states.lan(lanDrv))
	return w, nil
}

// splitPassword takes a board URL's password out of its user info.
func splitPassword(raw string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	var pw string
	if u.User != nil {
		pw, _ = u.User.Password()
		if pw == "" {
			pw = u.User.Username()
		}
		u.User = nil
	}
	return u.String(), pw, nil
}

// errSecretOnArgv refuses a secret given on the command line, where ps,
// /proc and shell history show it to others: what names the form given,
// use the forms to give instead.
func errSecretOnArgv(what, use string) error {
	return fmt.Errorf("%w: %s: secrets are not taken on the command line (ps and shell history show it); use %s", errUsage, what, use)
}

// AdminTokenFile is the default name, in the data directory, of the file
// the first admin token is written to.
const AdminTokenFile = "admin-token"

// writeSecretFile writes secret and a newline to path, readable by the
// owner only (mode 0600, also when the file existed); the directory is
// made 0700 if missing. A symbolic link at path is refused.
func writeSecretFile(path, secret string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: refused for a secret", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func banner(out io.Writer, o options, isDemo bool, addr, firstSecret string, w *wiring, extra []string) {
	scheme := "http"
	if o.tlsCert != "" {
		scheme = "https"
	}
	host, port, _ := net.SplitHostPort(addr)
	exposed := !auth.IsLoopback(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	base := scheme + "://" + net.JoinHostPort(host, port)
	fmt.Fprintf(out, "holo-gateway %s\n", buildinfo.Version)
	fmt.Fprintf(out, "  API:      %s  (gRPC and REST /v1/boards on one address)\n", base)
	fmt.Fprintf(out, "  OpenAPI:  %s/v1/openapi.json\n", base)
	fmt.Fprintf(out, "  events:   %s/v1/events  (JSON lines; SSE with Accept: text/event-stream)\n", base)
	fmt.Fprintf(out, "  metrics:  %s/metrics\n", base)
	fmt.Fprintf(out, "  probes:   %s/healthz (alive), %s/readyz (ready)\n", base, base)
	fmt.Fprintf(out, "  data:     %s\n", o.data)
	for _, l := range w.lines {
		fmt.Fprintf(out, "  line:     %s\n", l)
	}
	for _, b := range w.boards {
		fmt.Fprintf(out, "  board:    %s\n", b)
	}
	switch {
	case o.insecureLab:
		fmt.Fprintln(out, "  auth:     OFF (--insecure-lab): anyone who reaches this address is admin (Host must be localhost or an --allow-host)")
	case isDemo:
		fmt.Fprintln(out, "  auth:     demo mode: requests from loopback need no token (Host localhost, JSON bodies); others need a bearer token")
		fmt.Fprintln(out, "  WARNING:  demo mode must not be exposed beyond this machine")
		if exposed {
			fmt.Fprintf(out, "  WARNING:  demo mode listens on %s, beyond loopback: use --listen 127.0.0.1:PORT\n", addr)
		}
	default:
		fmt.Fprintln(out, "  auth:     bearer tokens (Authorization: Bearer <token>)")
	}
	l := o.access.apiLimits()
	fmt.Fprintf(out, "  limits:   bodies %d bytes; %d streams per token, %d in all; %g changes/s per token (burst %d); public streams %d per source, %d in all, idle %v\n",
		l.MaxBody, l.StreamsPerToken, l.Streams, l.Rate, l.Burst, l.PublicStreamsPerSource, l.PublicStreams, l.PublicStreamIdle)
	fmt.Fprintf(out, "  audit:    every change and refusal: %s/v1/audit (holoctl audit); kept %v, at most %d records\n",
		base, o.access.auditAge, o.access.auditMax)
	if o.access.metricsAuth {
		fmt.Fprintln(out, "  metrics:  need a viewer token (--metrics-auth)")
	}
	if firstSecret != "" {
		fmt.Fprintf(out, "  first admin token: written to %s (mode 0600; stored hashed, printed nowhere)\n", o.adminTokenFile)
	}
	for _, n := range w.notes {
		fmt.Fprintf(out, "  note:     %s\n", n)
	}
	for _, line := range extra {
		fmt.Fprintln(out, "  "+line)
	}
	if w.demo != nil {
		fmt.Fprint(out, w.demo.Summary())
	}
	fmt.Fprintln(out, "Ctrl-C stops.")
}

// runToken manages tokens in the store while the gateway is stopped.
func runToken(args []string, stdout, stderr io.Writer) error {
	sub, fs, err := subcommand("token", "create|list|revoke --data DIR", []string{"create", "list", "revoke"}, args, stderr)
	if err != nil {
		return err
	}
	data := fs.String("data", "", "directory of the gateway's store")
	name := fs.String("name", "", "token name (create)")
	role := fs.String("role", "admin", "viewer, operator or admin (create)")
	if err := parseSubcommand(fs, args[1:]); err != nil {
		return err
	}
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	db, err := store.Open(filepath.Join(*data, StoreFile))
	if err != nil {
		return fmt.Errorf("%w (is the gateway running? stop it, or use holoctl token)", err)
	}
	defer db.Close()
	tokens, err := auth.Open(db)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if *name == "" && fs.NArg() == 1 {
			*name = fs.Arg(0)
		}
		r, err := auth.ParseRole(*role)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		secret, tok, err := tokens.Create(*name, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "token %q (%v) created; the secret is shown only now:\n", tok.Name, tok.Role)
		fmt.Fprintln(stdout, secret)
	case "list":
		fmt.Fprintf(stdout, "%-24s %-9s %s\n", "NAME", "ROLE", "CREATED")
		for _, t := range tokens.List() {
			fmt.Fprintf(stdout, "%-24s %-9s %s\n", t.Name, t.Role, t.Created.Format(time.RFC3339))
		}
	case "revoke":
		n := *name
		if n == "" && fs.NArg() == 1 {
			n = fs.Arg(0)
		}
		if err := tokens.Revoke(n); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token %q revoked\n", n)
	}
	return nil
}

// subcommand checks that args names one of subs of the command group
// (holo-gateway token, holo-gateway cluster) and returns it with the flag
// set its flags go in; usage is the group's synopsis for an empty args.
func subcommand(group, usage string, subs, args []string, stderr io.Writer) (string, *flag.FlagSet, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%w: %s %s", errUsage, group, usage)
	}
	if !slices.Contains(subs, args[0]) {
		return "", nil, fmt.Errorf("%w: unknown %s command %q (%s)", errUsage, group, args[0], strings.Join(subs, ", "))
	}
	fs := flag.NewFlagSet("holo-gateway "+group+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	return args[0], fs, nil
}

// parseSubcommand parses a subcommand's flags, which all take --data.
func parseSubcommand(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.Lookup("data").Value.String() == "" {
		return fmt.Errorf("%w: --data DIR is required", errUsage)
	}
	return nil
}
