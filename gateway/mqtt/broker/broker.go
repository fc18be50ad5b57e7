// Package broker is the gateway's embedded MQTT broker: a mochi-mqtt
// server on one TCP listener, used when no external broker is configured
// so that the MQTT bridge works on a machine without Mosquitto.
//
// It speaks MQTT 3.1.1 and 5 on plain TCP. Without a username every
// client may connect and use every topic; with one, clients must present
// that username and password. Retained messages and sessions live in
// memory only: a restart of the gateway empties them and the bridge
// publishes its retained topics again when it connects.
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// DefaultPort is the embedded broker's port: 1884, beside the 1883 an
// installed Mosquitto usually holds.
const DefaultPort = 1884

// Errors of the embedded broker.
var (
	// ErrListen: the listener could not be opened (port taken, bad address).
	ErrListen = errors.New("broker: cannot listen")
	// ErrClosed: the broker was used after Close.
	ErrClosed = errors.New("broker: closed")
)

// Options configure an embedded broker.
type Options struct {
	// Addr is host:port to listen on; a bare port means loopback. Port 0
	// picks a free one. Empty means 127.0.0.1:DefaultPort.
	Addr string
	// Username and Password, when Username is set, are required of every
	// client.
	Username, Password string
	Log                *slog.Logger
}

// Broker is a running embedded broker.
type Broker struct {
	srv  *mochi.Server
	tcp  *listeners.TCP
	addr string
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

// Start opens the listener and serves clients until Close.
func Start(o Options) (*Broker, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := mochi.New(&mochi.Options{Logger: log, InlineClient: false})
	var err error
	if o.Username != "" {
		err = srv.AddHook(new(auth.Hook), &auth.Options{Ledger: &auth.Ledger{
			Auth: auth.AuthRules{{Username: auth.RString(o.Username), Password: auth.RString(o.Password), Allow: true}},
			ACL:  auth.ACLRules{{Filters: auth.Filters{"#": auth.ReadWrite}}},
		}})
	} else {
		err = srv.AddHook(new(auth.AllowHook), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: auth: %w", err)
	}
	tcp := listeners.NewTCP(listeners.Config{Type: listeners.TypeTCP, ID: "tcp", Address: ListenAddr(o.Addr)})
	if err := srv.AddListener(tcp); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrListen, ListenAddr(o.Addr), err)
	}
	if err := srv.Serve(); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("broker: serve: %w", err)
	}
	return &Broker{srv: srv, tcp: tcp, addr: tcp.Address()}, nil
}

// Addr is the address the broker listens on (with the port picked).
func (b *Broker) Addr() string { return b.addr }

// URL is the broker's address as a client URL (tcp://host:port).
func (b *Broker) URL() string { return "tcp://" + b.addr }

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

// Close disconnects every client and stops listening.
func (b *Broker) Close() error { return b.srv.Close() }
