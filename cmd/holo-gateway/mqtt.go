package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
	"github.com/holofleet/holofleet/gateway/mqtt/policy"
	"github.com/holofleet/holofleet/gateway/mqtt/spool"
)

// defaultBrokerPort is the embedded broker's port when --mqtt-port is not
// given: broker.DefaultPort (tests point it at a port they hold, so no test
// binds a fixed port).
var defaultBrokerPort = broker.DefaultPort

// mqttFlags are the MQTT bridge's options.
type mqttFlags struct {
	base, haPrefix string
	port           string // the embedded broker: a port or host:port
	portSet        bool
	user           string
	passwordFile   string
	argvPassword   bool // --mqtt-password was given (refused in check)
	ca, cert, key  string
	clientID       string
	channel        string // release channel the HA update entities offer
	spoolMax       int    // most messages waiting for the broker (0: the spool's defaults)
	off            bool
	// Access control.
	anonymous       setString // none|viewer|operator|admin: the embedded broker's clients without credentials
	anonymousRemote bool
	accept          setString // none|viewer|operator|admin: what the bridge takes from MQTT
	limits          broker.Limits
}

// setString is a string flag that records whether it was given.
type setString struct {
	v   string
	set bool
}

func (s *setString) String() string     { return s.v }
func (s *setString) Set(v string) error { s.v, s.set = v, true; return nil }

// portFlag records whether --mqtt-port was given.
type portFlag struct{ f *mqttFlags }

func (p portFlag) String() string {
	if p.f == nil {
		return ""
	}
	return p.f.port
}
func (p portFlag) Set(v string) error { p.f.port, p.f.portSet = v, true; return nil }

// gatewayUser is the bridge's login on the embedded broker: '@' is not
// allowed in token names, so no token can take it.
const gatewayUser = "@holo-gateway"

func addMQTTFlags(fs *flag.FlagSet, f *mqttFlags) {
	f.port = fmt.Sprint(defaultBrokerPort)
	fs.StringVar(&f.base, "mqtt-base", layout.DefaultBase, "MQTT topic root")
	fs.StringVar(&f.haPrefix, "ha-prefix", layout.DefaultHAPrefix, "Home Assistant discovery prefix")
	fs.Var(portFlag{f}, "mqtt-port", fmt.Sprintf("embedded broker port, or host:port (default %d on loopback; 0 picks one); used without --mqtt", defaultBrokerPort))
	fs.StringVar(&f.user, "mqtt-user", "", "username on the external broker (--mqtt)")
	// Refused in check, not here: the flag package would repeat the
	// value (the secret) in its error, and so in the journal.
	fs.Func("mqtt-password", "removed: a password on the command line shows in ps and shell history; use --mqtt-password-file or $HOLO_MQTT_PASSWORD", func(string) error {
		f.argvPassword = true
		return nil
	})
	fs.StringVar(&f.passwordFile, "mqtt-password-file", "", "file holding the password on the external broker (mode 0600; a trailing newline is ignored); or $HOLO_MQTT_PASSWORD")
	fs.StringVar(&f.ca, "mqtt-ca", "", "CA certificate (PEM) that signed the broker's certificate")
	fs.StringVar(&f.cert, "mqtt-cert", "", "client certificate (PEM) for the broker")
	fs.StringVar(&f.key, "mqtt-key", "", "client key (PEM) for the broker")
	fs.StringVar(&f.clientID, "mqtt-client-id", "", "MQTT client id (default holo-gateway-<base>-<random>)")
	fs.StringVar(&f.channel, "mqtt-update-channel", mqtt.DefaultUpdateChannel, "release channel the Home Assistant update entities offer and install")
	fs.IntVar(&f.spoolMax, "mqtt-spool-max", 0, fmt.Sprintf("most messages waiting for the broker, in memory and spilled under --data (default %d: %d in memory, %d on disk); beyond it new ones are dropped and counted in holo_mqtt_dropped_total",
		spool.DefaultMem+spool.DefaultDisk, spool.DefaultMem, spool.DefaultDisk))
	fs.BoolVar(&f.off, "no-mqtt", false, "run without the MQTT bridge")
	fs.Var(&f.anonymous, "mqtt-anonymous", "role of embedded-broker clients without credentials: none, viewer, operator or admin (default none; operator in demo mode, admin with --insecure-lab); loopback only unless --mqtt-allow-anonymous-remote")
	fs.BoolVar(&f.anonymousRemote, "mqtt-allow-anonymous-remote", false, "let clients without credentials in when the embedded broker listens beyond loopback (warns)")
	fs.Var(&f.accept, "mqtt-accept", "commands the bridge takes from MQTT, as the role their publisher is taken to have: none, viewer, operator or admin (default operator with --mqtt; admin with the embedded broker, which checks every client's token)")
	fs.IntVar(&f.limits.MaxPacket, "mqtt-max-packet", broker.DefaultMaxPacket, "embedded broker: largest MQTT packet a client may send, in bytes after the fixed header (CONNECT: 64 KiB; the gateway's own bridge: 64 MiB)")
	fs.IntVar(&f.limits.MaxClients, "mqtt-max-clients", broker.DefaultMaxClients, "embedded broker: most clients connected at once (the gateway's bridge not counted)")
	fs.IntVar(&f.limits.MaxRetained, "mqtt-max-retained", broker.DefaultMaxRetained, "embedded broker: most retained messages clients may leave (the bridge's not counted)")
	fs.IntVar(&f.limits.MaxRetainedSize, "mqtt-max-retained-size", broker.DefaultMaxRetainedSize, "embedded broker: largest retained payload a client may leave, in bytes")
	fs.IntVar(&f.limits.MaxSubscriptions, "mqtt-max-subscriptions", broker.DefaultMaxSubscriptions, "embedded broker: most subscriptions of one client (the gateway's bridge not counted)")
	fs.IntVar(&f.limits.MaxFilters, "mqtt-max-filters", broker.DefaultMaxFilters, "embedded broker: most topic filters in one SUBSCRIBE")
	fs.IntVar(&f.limits.MaxSubscriptionsTotal, "mqtt-max-subscriptions-total", broker.DefaultMaxSubscriptionsTotal, "embedded broker: most subscriptions of all clients together")
}

// anonymousRole is the embedded broker's role for clients without
// credentials, and a note for the banner when the default was dropped.
func (f *mqttFlags) anonymousRole(isDemo, insecureLab bool, addr string) (auth.Role, string, error) {
	if f.anonymous.set {
		if f.anonymous.v == "none" {
			return auth.RoleNone, "", nil
		}
		r, err := auth.ParseRole(f.anonymous.v)
		if err != nil {
			return 0, "", fmt.Errorf("%w: --mqtt-anonymous: %v (or none)", errUsage, err)
		}
		if !broker.Loopback(addr) && !f.anonymousRemote {
			return 0, "", fmt.Errorf("%w: --mqtt-anonymous %s on %s, which is not loopback: add --mqtt-allow-anonymous-remote to mean it", errUsage, r, addr)
		}
		return r, "", nil
	}
	var r auth.Role
	switch {
	case insecureLab:
		r = auth.RoleAdmin
	case isDemo:
		r = auth.RoleOperator
	default:
		return auth.RoleNone, "", nil
	}
	if !broker.Loopback(addr) && !f.anonymousRemote {
		return auth.RoleNone, fmt.Sprintf("clients without credentials refused: the broker listens on %s, beyond loopback (--mqtt-allow-anonymous-remote lets them in as %v)", addr, r), nil
	}
	return r, "", nil
}

// bridgePassword is the external broker's password: the file, or
// $HOLO_MQTT_PASSWORD (never a flag's value: argv is public).
func (f *mqttFlags) bridgePassword(e *env) (string, error) {
	if f.passwordFile != "" {
		if os.Getenv("HOLO_MQTT_PASSWORD") != "" {
			return "", fmt.Errorf("%w: --mqtt-password-file and $HOLO_MQTT_PASSWORD: give one", errUsage)
		}
		st, err := os.Stat(f.passwordFile)
		if err != nil {
			return "", fmt.Errorf("%w: --mqtt-password-file: %v", errUsage, err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			e.log.Warn("mqtt: the password file is readable by others; chmod 0600 it", "file", f.passwordFile, "mode", st.Mode().Perm())
		}
		raw, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return "", fmt.Errorf("%w: --mqtt-password-file: %v", errUsage, err)
		}
		p := strings.TrimRight(string(raw), "\r\n")
		if p == "" || strings.ContainsAny(p, "\r\n") {
			return "", fmt.Errorf("%w: --mqtt-password-file %s: want one line holding the password", errUsage, f.passwordFile)
		}
		return p, nil
	}
	return os.Getenv("HOLO_MQTT_PASSWORD"), nil
}

// check refuses bad MQTT flags before anything starts.
func (f mqttFlags) check(brokerURL string) error {
	if f.argvPassword {
		return errSecretOnArgv("--mqtt-password", "--mqtt-password-file FILE or $HOLO_MQTT_PASSWORD")
	}
	if f.off {
		return nil
	}
	if f.spoolMax < 0 {
		return fmt.Errorf("%w: --mqtt-spool-max %d: give a number of messages above 0 (or 0 for the default)", errUsage, f.spoolMax)
	}
	if u, err := url.Parse(brokerURL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return errSecretOnArgv("a password in --mqtt's URL", "--mqtt-user with --mqtt-password-file FILE or $HOLO_MQTT_PASSWORD")
		}
	}
	if err := mqtt.Check(mqtt.Options{Broker: brokerURL, Base: f.base, HAPrefix: f.haPrefix,
		CAFile: f.ca, CertFile: f.cert, KeyFile: f.key}); err != nil {
		return fmt.Errorf("mqtt: %w", err)
	}
	if f.channel != "" {
		if err := artifact.CheckChannel(f.channel); err != nil {
			return fmt.Errorf("mqtt: --mqtt-update-channel: %w", err)
		}
	}
	if brokerURL == "" {
		host, port, err := net.SplitHostPort(broker.ListenAddr(f.port))
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 0 || n > 65535 || (host != "" && net.ParseIP(strings.Trim(host, "[]")) == nil && host != "localhost") {
			return fmt.Errorf("mqtt: --mqtt-port %q: want a port or host:port", f.port)
		}
	}
	return nil
}

// newMQTT starts the embedded broker unless --mqtt names one, and builds
// the bridge: the fleet mirrored into MQTT with Home Assistant discovery.
func newMQTT(_ context.Context, e *env) (component, error) {
	f := e.opts.mq
	if f.off {
		return component{name: "mqtt", banner: []string{"mqtt:     off (--no-mqtt)"}}, nil
	}
	if f.channel == "" {
		f.channel = mqtt.DefaultUpdateChannel
	}
	if err := artifact.CheckChannel(f.channel); err != nil {
		return component{}, fmt.Errorf("%w: mqtt: --mqtt-update-channel: %w", errUsage, err)
	}
	accept := f.accept.v
	if f.accept.set {
		if _, err := mqtt.ParseAccept(accept); err != nil || accept == "" {
			return component{}, fmt.Errorf("%w: --mqtt-accept %q: none, viewer, operator or admin", errUsage, accept)
		}
	}
	brokerURL := e.opts.mqtt
	var br *broker.Broker
	var lines []string
	user, password := f.user, ""
	if brokerURL == "" {
		if f.user != "" || f.passwordFile != "" || os.Getenv("HOLO_MQTT_PASSWORD") != "" {
			return component{}, fmt.Errorf("%w: --mqtt-user, --mqtt-password-file and $HOLO_MQTT_PASSWORD are for an external broker (--mqtt); "+
				"the embedded broker logs clients in with gateway tokens (username = token name, password = its secret)", errUsage)
		}
		addr := broker.ListenAddr(f.port)
		anon, note, err := f.anonymousRole(e.demo, e.opts.insecureLab, addr)
		if err != nil {
			return component{}, err
		}
		var raw [32]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return component{}, err
		}
		user, password = gatewayUser, base64.RawURLEncoding.EncodeToString(raw[:])
		pol, err := policy.New(f.base, f.haPrefix)
		if err != nil {
			return component{}, fmt.Errorf("%w: mqtt: %w", errUsage, err)
		}
		pol.Guard = e.guard // refusals and commands go to the audit log
		o := broker.Options{Addr: addr, Policy: pol, Anonymous: anon,
			AnonymousRemote: f.anonymousRemote, Limits: f.limits,
			Gateway: broker.Credentials{Username: user, Password: password},
			Log:     e.log.With("component", "mqtt-broker")}
		if e.tokens != nil {
			o.Tokens = e.tokens
		}
		if e.audit != nil {
			o.Audit = e.audit
		}
		br, err = broker.Start(o)
		if err != nil {
			if errors.Is(err, broker.ErrConfig) {
				return component{}, fmt.Errorf("%w: mqtt: %w", errUsage, err)
			}
			if f.portSet {
				return component{}, fmt.Errorf("--mqtt-port %s: %w", f.port, err)
			}
			// The default port is taken (another gateway, a broker). A
			// gateway that quietly ran without MQTT would surprise its
			// operator: say what to do instead.
			return component{}, fmt.Errorf("mqtt: the embedded broker cannot listen on its default address %s (%w): "+
				"give --mqtt-port PORT (0 picks a free one), --mqtt URL for another broker, or --no-mqtt", broker.ListenAddr(f.port), err)
		}
		brokerURL = br.URL()
		lines = append(lines, "mqtt:     embedded broker "+brokerURL+"  (topics under "+f.base+"/, HA discovery under "+f.haPrefix+"/)")
		lines = append(lines, "mqtt:     logins: gateway tokens (username = token name, password = its secret); "+anonymousLine(anon, addr))
		if anon != auth.RoleNone && !broker.Loopback(addr) {
			w := fmt.Sprintf("WARNING: anyone who reaches %s may use MQTT as %v without credentials (--mqtt-allow-anonymous-remote)", addr, anon)
			lines = append(lines, "mqtt:     "+w)
			e.log.Warn("mqtt: "+w, "addr", addr, "role", anon)
		}
		if note != "" {
			lines = append(lines, "mqtt:     "+note)
		}
		if !f.accept.set {
			accept = "admin" // the broker decides each client's commands
		}
	} else {
		if f.anonymous.set || f.anonymousRemote {
			return component{}, fmt.Errorf("%w: --mqtt-anonymous and --mqtt-allow-anonymous-remote are for the embedded broker; "+
				"with --mqtt the broker's own settings decide (docs/mqtt-security.md)", errUsage)
		}
		var err error
		if password, err = f.bridgePassword(e); err != nil {
			return component{}, err
		}
		if !f.accept.set {
			accept = "operator"
		}
		lines = append(lines, "mqtt:     broker "+redact(brokerURL)+"  (topics under "+f.base+"/, HA discovery under "+f.haPrefix+"/)")
		lines = append(lines, "mqtt:     commands taken as "+accept+" (--mqtt-accept): the broker's ACLs decide who may publish them")
	}
	// The embedded broker records each client's commands under its real
	// identity; the bridge's own check (Accept) records only when it
	// decides something of its own: always with an external broker, and
	// with the embedded one only when --mqtt-accept was given.
	guard := e.guard
	if br != nil && !f.accept.set {
		guard = nil
	}
	o := mqtt.Options{Fleet: e.fleet, Guard: guard, Broker: brokerURL, Username: user, Password: password,
		CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, ClientID: f.clientID, Base: f.base, HAPrefix: f.haPrefix,
		DB: e.db, Version: buildinfo.Version, Log: e.log.With("component", "mqtt"), Registerer: e.registerer,
		UpdateChannel: f.channel, Accept: accept, InstallationStates: e.installStates}
	o.SpoolMem, o.SpoolDisk = spool.Split(f.spoolMax)
	// The rollouts component ran first: the bridge follows its engine
	// and installs from its store.
	if e.rollouts != nil {
		o.Rollouts = e.rollouts
		lines = append(lines, "mqtt:     rollouts on "+f.base+"/bridge/rollout/<id>; HA update entities offer channel "+
			o.UpdateChannel)
	}
	if e.artifacts != nil {
		o.Firmware = e.artifacts
	}
	if e.cluster != nil {
		// One of the cluster's bridges under the shared base: it mirrors
		// this gateway's own boards, and answers requests for the whole
		// installation when it leads (gateway/mqtt/cluster.go).
		own := e.cluster.Own()
		o.Fleet, o.Cluster, o.Installation = own, own, e.cluster
		lines = append(lines, "mqtt:     gateway "+own.Name()+" of a cluster: its state on "+f.base+"/bridge/gateway/"+own.Name()+
			"/state; it mirrors its own boards; gateways sharing this broker share "+f.base+"/")
	}
	if e.cues != nil {
		o.Cues = e.cues
	}
	b, err := mqtt.New(o)
	if err != nil {
		if br != nil {
			_ = br.Close()
		}
		return component{}, fmt.Errorf("%w: mqtt: %w", errUsage, err)
	}
	run := func(ctx context.Context) error {
		cueButtons := make(chan struct{})
		go func() { defer close(cueButtons); mqttCueButtons(ctx, e.cues, b) }() // cue.go
		defer func() { <-cueButtons }()
		err := b.Run(ctx)
		if br != nil {
			err = errors.Join(err, br.Close())
		}
		return err
	}
	where := "the embedded broker"
	if e.opts.mqtt != "" {
		where = "the broker " + redact(e.opts.mqtt)
	}
	ready := api.ReadyFunc(func(context.Context) error {
		if !b.Stats().Connected {
			return errors.New("not connected to " + where)
		}
		return nil
	})
	return component{name: "mqtt", run: run, banner: lines, ready: ready}, nil
}

// anonymousLine tells the banner who may connect without credentials.
func anonymousLine(r auth.Role, addr string) string {
	switch {
	case r == auth.RoleNone:
		return "no anonymous clients"
	case broker.Loopback(addr):
		return fmt.Sprintf("clients without credentials are %v (loopback only)", r)
	}
	return fmt.Sprintf("clients without credentials are %v", r)
}

// redact hides a password in a broker URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
