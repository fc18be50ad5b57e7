// Package board assembles the firmware: it opens the board's flash and
// settings under the data directory, builds every feature on top of the
// HAL, serves the API, and restarts in place.
//
// A Board lives as long as its data directory is in use; each start (the
// first, and every restart) builds a fresh boot: the now-state (screen,
// LEDs, holo, running scene, event numbering) begins anew from the saved
// state, exactly as a power cycle would. The HTTP listener stays bound
// across restarts; requests during the switch see the new boot.
package board

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/hal/sim"
	"github.com/holofleet/holofleet/firmware/web"
	"github.com/holofleet/holofleet/store"
)

// Errors of the board's lifecycle.
var (
	// ErrDataDir means the data directory could not be created or used.
	ErrDataDir = errors.New("board: data directory unusable")
)

// Config is what a board needs to start.
type Config struct {
	// DataDir holds the settings store, flash partitions and the storage
	// volume; created on first start.
	DataDir string
	// Password, when set, replaces the saved password at start (unless it
	// is the saved one already), as holo-board --password-file does.
	Password string
	// Hostname, when set, replaces the saved hostname at start (and is
	// saved), as --hostname does.
	Hostname string
	Clock    clock.Clock
	Log      *slog.Logger
	// Features adds feature packages to every boot; the board calls each
	// with the boot under construction. Tests and later issues plug in
	// here without the board importing them.
	Features []Feature
	// OnRestart, when set, replaces the in-place restart: process mode
	// exits so the bootloader can pick the boot slot.
	OnRestart func()
	// OnReady, when set, is called once the first boot serves requests.
	OnReady func(addr net.Addr)
	// Hardware is the board's devices; they outlive restarts, as real
	// hardware does. Nil means a new simulated set.
	Hardware *Hardware
	// StallTimeout is how long an upload, a pull or a download may wait
	// for its client (or release site) to send or take a byte before it
	// is cut and the long-operation lock given back
	// (longop.DefaultIdle, 30 s, when 0).
	StallTimeout time.Duration
	// MinRate and RateWindow: an upload, pull or download averaging
	// fewer than MinRate bytes a second over a RateWindow of waiting on
	// its client is cut too (longop.DefaultMinRate, 1 KiB/s, and
	// longop.DefaultRateWindow, 30 s, when 0; MinRate < 0: no rate cut).
	MinRate    int64
	RateWindow time.Duration
	// HeaderTimeout bounds the reading of a request's headers and
	// IdleTimeout how long a keep-alive connection may sit idle between
	// requests (HTTPHeaderTimeout and HTTPIdleTimeout when 0).
	HeaderTimeout time.Duration
	IdleTimeout   time.Duration
}

// Timeouts of the board's HTTP server: a client that sends its headers
// slower than this, or keeps a connection open with no request, is
// dropped (a board has few sockets to spare).
const (
	HTTPHeaderTimeout = 10 * time.Second
	HTTPIdleTimeout   = 60 * time.Second
)

// NewHTTPServer is an HTTP server for the board's API with its header and
// idle timeouts; the API server and the access point's use it.
func NewHTTPServer(h http.Handler, header, idle time.Duration) *http.Server {
	if header <= 0 {
		header = HTTPHeaderTimeout
	}
	if idle <= 0 {
		idle = HTTPIdleTimeout
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: header, IdleTimeout: idle}
}

// Hardware is the set of devices a board drives.
type Hardware struct {
	Display hal.Display
	Touch   hal.Touch
	Strip   hal.LEDStrip
	Pan     hal.Servo
	Tilt    hal.Servo
	// LEDGPIO is the pin the strip is wired to.
	LEDGPIO int
	// Attn is the host link's ATTN output.
	Attn hal.Pin
}

// Feature installs one feature into a boot.
type Feature func(b *Boot) error

// Board is one board: its saved state and its current boot.
type Board struct {
	cfg      Config
	log      *slog.Logger
	clk      clock.Clock
	db       *store.DB
	identity Identity

	current atomic.Pointer[Boot]
	restart chan time.Duration
	closed  chan struct{}
}

// Identity is the board's fixed identity, made on first start.
type Identity struct {
	// ID is twelve hex digits, like a MAC address.
	ID string `json:"id"`
}

// DefaultHostname is holo- plus the last four hex digits of the identity.
func (id Identity) DefaultHostname() string { return "holo-" + id.ID[len(id.ID)-4:] }

// Open prepares the data directory and opens the saved state.
func Open(cfg Config) (*Board, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Hardware == nil {
		cfg.Hardware = SimHardware(cfg.Clock)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	db, err := store.Open(filepath.Join(cfg.DataDir, "settings.db"))
	if err != nil {
		return nil, err
	}
	b := &Board{cfg: cfg, log: cfg.Log, clk: cfg.Clock, db: db,
		restart: make(chan time.Duration, 1), closed: make(chan struct{})}
	if err := b.loadIdentity(); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.Password != "" {
		ws, err := web.Load(db.Bucket("web"), b.identity.DefaultHostname())
		if err != nil {
			db.Close()
			return nil, err
		}
		if !ws.HasPassword() || !ws.CheckPassword(cfg.Password) {
			pw, _ := json.Marshal(cfg.Password)
			if _, err := ws.Apply(web.Patch{Password: pw}); err != nil {
				db.Close()
				return nil, fmt.Errorf("board: --password-file: %w", err)
			}
		}
	}
	if cfg.Hostname != "" {
		ws, err := web.Load(db.Bucket("web"), b.identity.DefaultHostname())
		if err != nil {
			db.Close()
			return nil, err
		}
		if ws.Hostname() != cfg.Hostname {
			if _, err := ws.Apply(web.Patch{Hostname: []byte(fmt.Sprintf("%q", cfg.Hostname))}); err != nil {
				db.Close()
				return nil, fmt.Errorf("board: --hostname: %w", err)
			}
		}
	}
	return b, nil
}

func (b *Board) loadIdentity() error {
	bk := b.db.Bucket("board")
	ok, err := bk.Get("identity", &b.identity)
	if err != nil {
		return err
	}
	if ok && len(b.identity.ID) == 12 {
		return nil
	}
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	raw[0] = raw[0]&^1 | 2 // locally administered unicast, as a MAC
	b.identity = Identity{ID: hex.EncodeToString(raw[:])}
	return bk.Put("identity", b.identity)
}

// SimHardware returns a new set of simulated devices.
func SimHardware(clk clock.Clock) *Hardware {
	d := sim.NewDisplay()
	return &Hardware{Display: d, Touch: d, Strip: sim.NewLEDStrip(), Pan: sim.NewServo(clk), Tilt: sim.NewServo(clk), LEDGPIO: DefaultLEDGPIO, Attn: sim.NewPin()}
}

// DefaultLEDGPIO is the pin the simulated board's LED strip hangs on.
const DefaultLEDGPIO = 48

// Hardware returns the board's devices.
func (b *Board) Hardware() *Hardware { return b.cfg.Hardware }

// Identity returns the board's identity.
func (b *Board) Identity() Identity { return b.identity }

// DB returns the board's settings store.
func (b *Board) DB() *store.DB { return b.db }

// DataDir returns the board's data directory.
func (b *Board) DataDir() string { return b.cfg.DataDir }

// Current returns the running boot.
func (b *Board) Current() *Boot { return b.current.Load() }

// ServeHTTP serves the current boot's API. During a restart a request
// waits (up to RestartWait) for the new boot, as a client's connect
// attempts would while a real board reboots.
func (b *Board) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	deadline := time.Now().Add(RestartWait)
	for {
		if boot := b.current.Load(); boot != nil && boot.serve(w, r) {
			return
		}
		if time.Now().After(deadline) || r.Context().Err() != nil {
			api.WriteError(w, api.Errorf(ErrRestarting, "the board is restarting"))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// RestartWait bounds how long a request waits for a restarting board.
const RestartWait = 10 * time.Second

// ErrRestarting is the reply to a request that found the board still
// restarting after RestartWait.
var ErrRestarting = &api.Error{Status: http.StatusServiceUnavailable, Code: "restarting", Message: "the board is restarting"}

// Restart asks the board to restart after delay. It returns at once.
func (b *Board) Restart(delay time.Duration) {
	select {
	case b.restart <- delay:
	default:
	}
}

// Run boots the board and serves ln until ctx ends, restarting in place
// when asked. It closes the store before returning.
func (b *Board) Run(ctx context.Context, ln net.Listener) error {
	defer close(b.closed)
	defer b.db.Close()
	srv := NewHTTPServer(b, b.cfg.HeaderTimeout, b.cfg.IdleTimeout)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	srvErr := make(chan error, 1)
	started := false
	defer func() {
		if !started {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	for {
		boot, err := newBoot(b, ln.Addr())
		if err != nil {
			return err
		}
		b.current.Store(boot)
		b.log.Info("board started", "hostname", boot.Web.Hostname(), "http", ln.Addr().String(), "id", b.identity.ID)
		if !started {
			started = true
			go func() { srvErr <- srv.Serve(ln) }()
			if b.cfg.OnReady != nil {
				b.cfg.OnReady(ln.Addr())
			}
		}
		var delay time.Duration
		select {
		case <-ctx.Done():
			boot.Close()
			return nil
		case err := <-srvErr:
			boot.Close()
			return fmt.Errorf("board: http: %w", err)
		case delay = <-b.restart:
		}
		t := b.clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			boot.Close()
			return nil
		case <-t.C():
		}
		b.log.Info("board restarting")
		if b.cfg.OnRestart != nil {
			boot.Close()
			b.cfg.OnRestart()
			return nil
		}
		b.current.Store(nil)
		boot.Close()
	}
}
