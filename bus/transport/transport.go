// Package transport turns the link address a binary is given into an open
// byte stream, so holo-board, holo-gateway and holoctl accept the same
// spellings.
//
// Addresses:
//
//	tcp://HOST:PORT              listen; one TCP client at a time is the wire (bus/tcplink)
//	tcp+dial://HOST:PORT         connect to a board or ser2net listening there
//	pty                          make a pty pair; the slave path is PathName() (bus/pty)
//	/dev/ttyUSB0                 a serial device at 115200 8N1
//	serial:///dev/ttyUSB0?QUERY  a serial device with settings (bus/serialport)
//	simline:///PATH/hub.sock     join a simulated RS485 line through its hub (bus/simline)
//	simline:///PATH?name=b1      ... under a node name (also echo=1, silent=1)
//
// Serial query parameters, all optional: baud (default 115200), databits
// (5-8, default 8), parity (none, odd, even, mark, space), stopbits (1,
// 1.5, 2), timeout (read timeout, a Go duration such as 100ms), rs485 (1
// or true to ask for kernel RS485 mode), rs485_required (1: fail if the
// driver lacks it), rs485_before and rs485_after (driver-enable delays as
// Go durations), rs485_rx_during_tx (1), rs485_rts_low (1).
//
// A stream whose far end has a name that callers may need to learn (a
// pty's slave path, a listener's address, a device path) implements
// [Namer]. Unknown schemes fail with [ErrUnknownScheme]; malformed
// addresses and parameters with [ErrBadAddress].
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/pty"
	"github.com/holofleet/holofleet/bus/serialport"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/tcplink"
)

// Errors returned by Open, wrapping the underlying package's error.
var (
	// ErrUnknownScheme means the address names no transport this package
	// knows.
	ErrUnknownScheme = errors.New("transport: unknown scheme")
	// ErrBadAddress means the address or one of its parameters is
	// malformed.
	ErrBadAddress = errors.New("transport: bad address")
)

// Namer is implemented by streams whose far end has a name worth showing:
// the pty's slave path, the TCP listener's host:port, the device path.
type Namer interface {
	PathName() string
}

// Schemes the address may start with.
const (
	SchemeTCP     = "tcp"
	SchemeTCPDial = "tcp+dial"
	SchemePty     = "pty"
	SchemeSerial  = "serial"
	SchemeSimline = "simline"
)

// target is an address parsed and checked, ready to open.
type target struct {
	scheme string // SchemePty, SchemeTCP, SchemeTCPDial, SchemeSerial or SchemeSimline
	host   string // tcp, tcp+dial
	path   string // serial device, simline hub socket
	serial serialport.Config
	node   simline.NodeOptions
}

// parse reads addr into a target, or fails with ErrBadAddress or
// ErrUnknownScheme. It opens nothing.
func parse(addr string) (target, error) {
	switch {
	case addr == SchemePty || addr == "pty:" || addr == "pty://":
		return target{scheme: SchemePty}, nil
	case strings.HasPrefix(addr, "/"):
		cfg, err := serialConfig(url.Values{})
		return target{scheme: SchemeSerial, path: addr, serial: cfg}, err
	}
	u, err := url.Parse(addr)
	if err != nil {
		return target{}, fmt.Errorf("%w: %q: %w", ErrBadAddress, addr, err)
	}
	t := target{scheme: u.Scheme, host: u.Host, path: u.Path}
	switch u.Scheme {
	case SchemeTCP, SchemeTCPDial:
		if u.Host == "" || u.Path != "" || u.RawQuery != "" {
			return t, fmt.Errorf("%w: %q: want %s://HOST:PORT", ErrBadAddress, addr, u.Scheme)
		}
	case SchemeSerial:
		if u.Host != "" || u.Path == "" {
			return t, fmt.Errorf("%w: %q: want serial:///dev/NAME", ErrBadAddress, addr)
		}
		if t.serial, err = serialConfig(u.Query()); err != nil {
			return t, fmt.Errorf("%w: %q: %w", ErrBadAddress, addr, err)
		}
	case SchemeSimline:
		if u.Host != "" || u.Path == "" {
			return t, fmt.Errorf("%w: %q: want simline:///path/to/hub.sock", ErrBadAddress, addr)
		}
		if t.node, err = nodeOptions(u.Query()); err != nil {
			return t, fmt.Errorf("%w: %q: %w", ErrBadAddress, addr, err)
		}
	case "":
		return t, fmt.Errorf("%w: %q has no scheme", ErrUnknownScheme, addr)
	default:
		return t, fmt.Errorf("%w: %q", ErrUnknownScheme, u.Scheme)
	}
	return t, nil
}

// Check reports whether addr is an address Open would try, without
// opening anything: a bad spelling or parameter fails with ErrBadAddress
// or ErrUnknownScheme, so a command line can be refused before a binary
// starts. Whether the device, socket or port is there is Open's to find.
func Check(addr string) error {
	_, err := parse(addr)
	return err
}

// Open opens the stream addr names. ctx bounds the opening only (dialing,
// handshakes); the stream lives until it is closed.
func Open(ctx context.Context, addr string) (io.ReadWriteCloser, error) {
	t, err := parse(addr)
	if err != nil {
		return nil, err
	}
	switch t.scheme {
	case SchemePty:
		p, err := pty.Open()
		if err != nil {
			return nil, err
		}
		return p, nil
	case SchemeTCP:
		return tcplink.Listen(ctx, t.host)
	case SchemeTCPDial:
		c, err := tcplink.Dial(ctx, t.host)
		if err != nil {
			return nil, err
		}
		return namedConn{c, t.host}, nil
	case SchemeSerial:
		return serialport.Open(t.path, t.serial)
	default: // SchemeSimline
		r, err := simline.Dial(ctx, t.path, t.node)
		if err != nil {
			return nil, err
		}
		return namedRemote{r, t.path}, nil
	}
}

type namedConn struct {
	io.ReadWriteCloser
	name string
}

func (n namedConn) PathName() string { return n.name }

type namedRemote struct {
	*simline.Remote
	path string
}

func (n namedRemote) PathName() string { return n.path }

// params reads query parameters, remembering the first error.
type params struct {
	q   url.Values
	err error
}

func (p *params) fail(key string, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("parameter %s: %w", key, err)
	}
}

func (p *params) int(key string, def int) int {
	s := p.q.Get(key)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		p.fail(key, err)
	}
	return v
}

func (p *params) bool(key string) bool {
	s := p.q.Get(key)
	if s == "" {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		p.fail(key, err)
	}
	return v
}

func (p *params) duration(key string) time.Duration {
	s := p.q.Get(key)
	if s == "" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		p.fail(key, err)
	}
	return v
}

func (p *params) known(keys ...string) {
	for k := range p.q {
		found := false
		for _, want := range keys {
			found = found || k == want
		}
		if !found {
			p.fail(k, errors.New("unknown"))
		}
	}
}

func serialConfig(q url.Values) (serialport.Config, error) {
	p := &params{q: q}
	p.known("baud", "databits", "parity", "stopbits", "timeout", "rs485", "rs485_required",
		"rs485_before", "rs485_after", "rs485_rx_during_tx", "rs485_rts_low")
	cfg := serialport.Config{
		Baud:        p.int("baud", serialport.DefaultBaud),
		DataBits:    p.int("databits", 8),
		ReadTimeout: p.duration("timeout"),
		RS485: serialport.RS485{
			Enabled:           p.bool("rs485"),
			Required:          p.bool("rs485_required"),
			DelayBeforeSend:   p.duration("rs485_before"),
			DelayAfterSend:    p.duration("rs485_after"),
			ReceiveDuringSend: p.bool("rs485_rx_during_tx"),
			RTSActiveLow:      p.bool("rs485_rts_low"),
		},
	}
	cfg.RS485.Enabled = cfg.RS485.Enabled || cfg.RS485.Required
	var err error
	if cfg.Parity, err = serialport.ParseParity(q.Get("parity")); err != nil {
		p.fail("parity", err)
	}
	if cfg.StopBits, err = serialport.ParseStopBits(q.Get("stopbits")); err != nil {
		p.fail("stopbits", err)
	}
	return cfg, p.err
}

func nodeOptions(q url.Values) (simline.NodeOptions, error) {
	p := &params{q: q}
	p.known("name", "echo", "silent", "rxbuffer")
	opts := simline.NodeOptions{
		Name:     q.Get("name"),
		Echo:     p.bool("echo"),
		Silent:   p.bool("silent"),
		RxBuffer: p.int("rxbuffer", 0),
	}
	return opts, p.err
}
