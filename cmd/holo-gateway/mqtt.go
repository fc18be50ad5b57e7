package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/holofleet/holofleet/firmware/buildinfo"
	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
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
	user, password string
	ca, cert, key  string
	clientID       string
	channel        string // release channel the HA update entities offer
	off            bool
}

// portFlag records whether --mqtt-port was given.
type portFlag struct{ f *mqttFlags }

func (p portFlag) String() string {
	if p.f == nil {
		return ""
	}
	return p.f.port
}
func (p portFlag) Set(v string) error { p.f.port, p.f.portSet = v, true; return nil }

func addMQTTFlags(fs *flag.FlagSet, f *mqttFlags) {
	f.port = fmt.Sprint(defaultBrokerPort)
	fs.StringVar(&f.base, "mqtt-base", mqtt.DefaultBase, "MQTT topic root")
	fs.StringVar(&f.haPrefix, "ha-prefix", mqtt.DefaultHAPrefix, "Home Assistant discovery prefix")
	fs.Var(portFlag{f}, "mqtt-port", fmt.Sprintf("embedded broker port, or host:port (default %d on loopback; 0 picks one); used without --mqtt", defaultBrokerPort))
	fs.StringVar(&f.user, "mqtt-user", "", "MQTT username (the embedded broker then requires it)")
	fs.StringVar(&f.password, "mqtt-password", "", "MQTT password (or $HOLO_MQTT_PASSWORD)")
	fs.StringVar(&f.ca, "mqtt-ca", "", "CA certificate (PEM) that signed the broker's certificate")
	fs.StringVar(&f.cert, "mqtt-cert", "", "client certificate (PEM) for the broker")
	fs.StringVar(&f.key, "mqtt-key", "", "client key (PEM) for the broker")
	fs.StringVar(&f.clientID, "mqtt-client-id", "", "MQTT client id (default holo-gateway-<base>-<random>)")
	fs.StringVar(&f.channel, "mqtt-update-channel", mqtt.DefaultUpdateChannel, "release channel the Home Assistant update entities offer and install")
	fs.BoolVar(&f.off, "no-mqtt", false, "run without the MQTT bridge")
}

// check refuses bad MQTT flags before anything starts.
func (f mqttFlags) check(brokerURL string) error {
	if f.off {
		return nil
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
	if f.password == "" {
		f.password = os.Getenv("HOLO_MQTT_PASSWORD")
	}
	if f.channel == "" {
		f.channel = mqtt.DefaultUpdateChannel
	}
	if err := artifact.CheckChannel(f.channel); err != nil {
		return component{}, fmt.Errorf("%w: mqtt: --mqtt-update-channel: %w", errUsage, err)
	}
	brokerURL := e.opts.mqtt
	var br *broker.Broker
	var lines []string
	if brokerURL == "" {
		var err error
		br, err = broker.Start(broker.Options{Addr: broker.ListenAddr(f.port), Username: f.user, Password: f.password,
			Log: e.log.With("component", "mqtt-broker")})
		if err != nil {
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
	} else {
		lines = append(lines, "mqtt:     broker "+redact(brokerURL)+"  (topics under "+f.base+"/, HA discovery under "+f.haPrefix+"/)")
	}
	o := mqtt.Options{Fleet: e.fleet, Broker: brokerURL, Username: f.user, Password: f.password,
		CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, ClientID: f.clientID, Base: f.base, HAPrefix: f.haPrefix,
		DB: e.db, Version: buildinfo.Version, Log: e.log.With("component", "mqtt"), Registerer: e.registerer,
		UpdateChannel: f.channel}
	// The rollouts component ran first: the bridge follows its engine
	// and installs from its store.
	if e.rollouts != nil {
		o.Rollouts = e.rollouts
		lines = append(lines, "mqtt:     rollouts on "+f.base+"/bridge/rollout/<id>; HA update entities offer channel "+
			o.UpdateChannel+" (MQTT commands are trusted as far as the broker's ACLs allow)")
	}
	if e.artifacts != nil {
		o.Firmware = e.artifacts
	}
	b, err := mqtt.New(o)
	if err != nil {
		if br != nil {
			_ = br.Close()
		}
		return component{}, fmt.Errorf("%w: mqtt: %w", errUsage, err)
	}
	run := func(ctx context.Context) error {
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

// redact hides a password in a broker URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
