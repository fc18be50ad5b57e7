// Package serialport opens a real serial device (a USB UART, an on-board
// UART, an RS485 adapter, or the slave side of a pty) as the host link's
// byte stream.
//
// It sits on go.bug.st/serial: the port is opened in raw mode with the
// line settings of a [Config] (baud rate, data bits, parity, stop bits).
// On Linux, when the config asks for RS485, the kernel's RS485 mode is set
// with the TIOCSRS485 ioctl so the UART driver itself drives the
// transceiver's DE/RE pin around each transmission, with the configured
// delays. Not every driver offers that: then the port still opens and
// [Port.RS485Err] tells why RS485 is off, unless [RS485.Required] is set,
// in which case Open fails with [ErrRS485Unsupported].
//
// Reads block until bytes arrive, Close is called, or the read timeout
// passes; a timeout is reported as [ErrTimeout] with no bytes, so a reader
// loop can check a context between reads and stop promptly.
//
// The kernel's struct serial_rs485, as passed to TIOCSRS485 (all fields
// native-endian u32):
//
//	offset 0   flags                  ENABLED=1<<0 RTS_ON_SEND=1<<1 RTS_AFTER_SEND=1<<2 RX_DURING_TX=1<<4
//	offset 4   delay_rts_before_send  milliseconds
//	offset 8   delay_rts_after_send   milliseconds
//	offset 12  padding                5 x u32, zero
package serialport

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.bug.st/serial"
)

// Errors returned by this package.
var (
	// ErrConfig means a Config field is out of range.
	ErrConfig = errors.New("serialport: bad configuration")
	// ErrOpen means the device could not be opened or configured.
	ErrOpen = errors.New("serialport: cannot open")
	// ErrRS485Unsupported means the device or operating system offers no
	// kernel RS485 mode. Open returns it only when RS485.Required is set;
	// otherwise Port.RS485Err reports it.
	ErrRS485Unsupported = errors.New("serialport: RS485 mode not supported by this device")
	// ErrTimeout is returned by Read, with no bytes, when nothing arrived
	// within Config.ReadTimeout. The port stays usable.
	ErrTimeout = errors.New("serialport: read timeout")
	// ErrClosed is returned by Read and Write after Close.
	ErrClosed = errors.New("serialport: port closed")
)

// Parity of each character.
type Parity int

// Parity settings.
const (
	ParityNone Parity = iota
	ParityOdd
	ParityEven
	ParityMark
	ParitySpace
)

// ParseParity accepts none, odd, even, mark and space (or n, o, e, m, s).
func ParseParity(s string) (Parity, error) {
	switch s {
	case "", "none", "n", "N":
		return ParityNone, nil
	case "odd", "o", "O":
		return ParityOdd, nil
	case "even", "e", "E":
		return ParityEven, nil
	case "mark", "m", "M":
		return ParityMark, nil
	case "space", "s", "S":
		return ParitySpace, nil
	}
	return 0, fmt.Errorf("%w: parity %q", ErrConfig, s)
}

// StopBits after each character.
type StopBits int

// Stop bit settings.
const (
	StopBits1 StopBits = iota
	StopBits1Half
	StopBits2
)

// ParseStopBits accepts 1, 1.5 and 2.
func ParseStopBits(s string) (StopBits, error) {
	switch s {
	case "", "1":
		return StopBits1, nil
	case "1.5":
		return StopBits1Half, nil
	case "2":
		return StopBits2, nil
	}
	return 0, fmt.Errorf("%w: stop bits %q", ErrConfig, s)
}

// RS485 asks the kernel driver to switch the transceiver around each send.
type RS485 struct {
	// Enabled turns kernel RS485 mode on.
	Enabled bool
	// Required makes Open fail when RS485 mode cannot be set; otherwise
	// the port opens without it and Port.RS485Err says why.
	Required bool
	// RTSActiveLow drives RTS low (instead of high) while sending; most
	// adapters want the default.
	RTSActiveLow bool
	// DelayBeforeSend and DelayAfterSend hold the driver enabled before the
	// first and after the last bit; the kernel counts in milliseconds, so
	// they are rounded up to whole milliseconds.
	DelayBeforeSend, DelayAfterSend time.Duration
	// ReceiveDuringSend keeps the receiver on while sending, so the port
	// hears its own bytes (useful to detect collisions).
	ReceiveDuringSend bool
}

// Config holds the line settings. The zero value of each field means its
// default: 115200 baud, 8 data bits, no parity, 1 stop bit, no timeout.
type Config struct {
	Baud     int
	DataBits int // 5, 6, 7 or 8
	Parity   Parity
	StopBits StopBits
	RS485    RS485
	// ReadTimeout bounds each Read; 0 blocks until data or Close.
	ReadTimeout time.Duration
}

// DefaultBaud is the baud rate used when Config.Baud is 0.
const DefaultBaud = 115200

func (c Config) withDefaults() (Config, error) {
	if c.Baud == 0 {
		c.Baud = DefaultBaud
	}
	if c.DataBits == 0 {
		c.DataBits = 8
	}
	switch {
	case c.Baud < 0:
		return c, fmt.Errorf("%w: baud %d", ErrConfig, c.Baud)
	case c.DataBits < 5 || c.DataBits > 8:
		return c, fmt.Errorf("%w: data bits %d", ErrConfig, c.DataBits)
	case c.Parity < ParityNone || c.Parity > ParitySpace:
		return c, fmt.Errorf("%w: parity %d", ErrConfig, c.Parity)
	case c.StopBits < StopBits1 || c.StopBits > StopBits2:
		return c, fmt.Errorf("%w: stop bits %d", ErrConfig, c.StopBits)
	case c.ReadTimeout < 0:
		return c, fmt.Errorf("%w: read timeout %v", ErrConfig, c.ReadTimeout)
	case c.RS485.DelayBeforeSend < 0 || c.RS485.DelayAfterSend < 0:
		return c, fmt.Errorf("%w: negative RS485 delay", ErrConfig)
	}
	return c, nil
}

// Port is an open serial device.
type Port struct {
	port     serial.Port
	path     string
	cfg      Config
	rs485Err error

	mu     sync.Mutex
	closed bool
}

// Open opens the device at path with cfg.
func Open(path string, cfg Config) (*Port, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	mode := &serial.Mode{
		BaudRate: cfg.Baud,
		DataBits: cfg.DataBits,
		Parity:   serial.Parity(cfg.Parity),     // same order as the library's
		StopBits: serial.StopBits(cfg.StopBits), // same order as the library's
	}
	sp, err := serial.Open(path, mode)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrOpen, path, err)
	}
	p := &Port{port: sp, path: path, cfg: cfg}
	if cfg.ReadTimeout > 0 {
		if err := sp.SetReadTimeout(cfg.ReadTimeout); err != nil {
			sp.Close()
			return nil, fmt.Errorf("%w %s: read timeout: %w", ErrOpen, path, err)
		}
	}
	if cfg.RS485.Enabled {
		if err := setRS485(path, cfg.RS485); err != nil {
			if cfg.RS485.Required {
				sp.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			p.rs485Err = fmt.Errorf("%s: %w", path, err)
		}
	}
	return p, nil
}

// Path is the device path the port was opened with.
func (p *Port) Path() string { return p.path }

// PathName is Path under the name bus/transport looks for.
func (p *Port) PathName() string { return p.path }

// Config is the configuration in force, defaults filled in.
func (p *Port) Config() Config { return p.cfg }

// RS485Err is nil when RS485 mode was asked for and set, or not asked for;
// otherwise it tells why the port runs without it (it matches
// ErrRS485Unsupported when the driver lacks the mode).
func (p *Port) RS485Err() error { return p.rs485Err }

// Read reads received bytes. It returns ErrTimeout when Config.ReadTimeout
// passed with nothing received, and ErrClosed once the port is closed
// (including when Close is called during the Read).
func (p *Port) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := p.port.Read(b)
		if err != nil {
			return n, p.mapErr(err)
		}
		if n > 0 {
			return n, nil
		}
		// The library reports a timeout as 0, nil.
		if p.cfg.ReadTimeout > 0 {
			return 0, ErrTimeout
		}
		if p.isClosed() {
			return 0, ErrClosed
		}
	}
}

// Write sends bytes; it returns once the kernel has taken them all.
func (p *Port) Write(b []byte) (int, error) {
	if p.isClosed() {
		return 0, ErrClosed
	}
	total := 0
	for total < len(b) {
		n, err := p.port.Write(b[total:])
		total += n
		if err != nil {
			return total, p.mapErr(err)
		}
	}
	return total, nil
}

// Drain waits until every written byte has left the UART.
func (p *Port) Drain() error { return p.mapErr(p.port.Drain()) }

func (p *Port) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Port) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var pe *serial.PortError
	if errors.As(err, &pe) && pe.Code() == serial.PortClosed || p.isClosed() {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("serialport %s: %w", p.path, err)
}

// Close closes the port and unblocks a Read in progress. It is idempotent.
func (p *Port) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	return p.port.Close()
}
