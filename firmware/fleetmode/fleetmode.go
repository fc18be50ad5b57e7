// Package fleetmode runs many simulated boards in one process, for scale
// tests and demos. Every board is the whole firmware (board.Open with
// every feature of assemble), with its own data directory, its own HTTP
// listener on the loopback, and, when a simulated RS485 line is given, its
// own node on that line with the link set to RS485 at bus address i+1.
//
// Boards cost what their firmware costs and no more: fleet mode adds one
// goroutine per board (the board's Run) and nothing that ticks; the line
// node's receive buffer is cut to RxBuffer bytes (a board's UART buffer is
// 2 KB), because the simulated line's default suits a bus master.
//
// Board i (0-based) lives in BaseDir/board-NNNN (NNNN = i+1). Before its
// start its saved link settings get mode rs485, address i+1, the groups
// Options.Groups gives and the line's baud; the other link settings stay
// as saved, so a fleet restarted on the same BaseDir keeps its boards'
// identities and settings.
package fleetmode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/store"
)

// Errors of fleet mode.
var (
	// ErrOptions: N, BaseDir or the groups are out of range.
	ErrOptions = errors.New("fleetmode: bad options")
	// ErrIndex: no board has that index.
	ErrIndex = errors.New("fleetmode: no such board")
	// ErrStopped: the fleet was stopped.
	ErrStopped = errors.New("fleetmode: stopped")
	// ErrStart: a board did not start in StartTimeout.
	ErrStart = errors.New("fleetmode: board did not start")
)

// Defaults and limits.
const (
	// MaxOnLine is how many boards one RS485 line addresses (1-223).
	MaxOnLine = int(frame.MaxBoard)
	// RxBuffer is the receive buffer of a board's node on the line.
	RxBuffer = 4 << 10
	// StartTimeout bounds one board's start.
	StartTimeout = 30 * time.Second
	// DefaultParallel is how many boards start at once.
	DefaultParallel = 8
)

// Options configure a fleet.
type Options struct {
	// N is how many boards to run (at least 1; at most 223 on a line).
	N int
	// BaseDir holds the boards' data directories.
	BaseDir string
	// Line, when set, is the simulated RS485 line the boards join.
	Line *simline.Line
	// Groups gives board i's link groups (nil: none).
	Groups func(i int) []int
	// HTTPHost is the address the boards listen on (default 127.0.0.1).
	HTTPHost string
	Clock    clock.Clock
	// ClockPPM, when set, gives board i a simulated crystal that many
	// parts per million fast (negative: slow) against Clock
	// (clock.Skewed), as holo-board's --clock-ppm: boards drift apart as
	// real ones do.
	ClockPPM func(i int) float64
	Log      *slog.Logger
	// Parallel is how many boards start at once (default 8).
	Parallel int
	// VolumeSize is each board's storage volume in bytes (0: the
	// firmware's default, fs.DefaultCapacity), as holo-board's
	// --volume-size; the spec leaves the size to the board.
	VolumeSize int64
	// OTA, when set, gives every board the firmware update service in
	// fleet mode (ota.Fleet): each board boots from its own slots in its
	// data directory, so staged rollouts can be tested. Nil leaves the
	// boards without /ota.
	OTA *OTAOptions
}

// OTAOptions configure the boards' update service.
type OTAOptions struct {
	// FailTrial is the fault hook: true makes board i fail the trial of
	// the image it boots (never confirms, restarts, rolls back).
	FailTrial func(i int, app ota.App) bool
	// OnBoot is told each boot's image description of board i.
	OnBoot func(i int, app ota.App)
	// PullRoots are the certificate authorities the boards trust when
	// they fetch over https (POST /ota/pull, GET /ota/check); nil trusts
	// the host's roots. A gateway serving images under its own CA gives
	// it here, as an installer would flash it into real boards.
	PullRoots *x509.CertPool
	// ChannelBase is where the boards find release channels' manifests
	// (<ChannelBase>/<channel>.json, for example a gateway's
	// https://host/firmware/channels/); empty: the boards know none.
	ChannelBase string
	// Keys, when set, gives board i the key digests it burns into its
	// eFuses at its first start (secure boot on: it then takes only images
	// signed by one of them); nil or an empty answer leaves it open. A
	// board whose keys are burned keeps them (ota.Config.Keys).
	Keys func(i int) []image.KeyDigest
}

// otaFeature is board sb's update service and the transport of its
// pulls, or nils without Options.OTA.
func (f *Fleet) otaFeature(sb *simBoard) ([]board.Feature, *http.Transport) {
	o := f.o.OTA
	if o == nil {
		return nil, nil
	}
	i := sb.info.Index
	fl := &ota.Fleet{}
	if o.FailTrial != nil {
		fl.FailTrial = func(a ota.App) bool { return o.FailTrial(i, a) }
	}
	if o.OnBoot != nil {
		fl.OnBoot = func(a ota.App) { o.OnBoot(i, a) }
	}
	// Fleet boards are wired to the host: the station link is the
	// loopback, always up. Each board has its own client, as a real board
	// has its own connections; stop drops its idle ones.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.PullRoots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 1, IdleConnTimeout: 10 * time.Second}
	pull := ota.PullConfig{BaseURL: o.ChannelBase, Client: &http.Client{Transport: tr}, Online: func() bool { return true }}
	var keys []image.KeyDigest
	if o.Keys != nil {
		keys = o.Keys(i)
	}
	return []board.Feature{ota.Feature(ota.Config{Fleet: fl, Pull: pull, Keys: keys})}, tr
}

// Info describes one running board.
type Info struct {
	Index   int    `json:"index"`
	ID      string `json:"id"`
	URL     string `json:"url"`     // HTTP base URL, e.g. http://127.0.0.1:41234
	Address int    `json:"address"` // bus address on the line, 0 without a line
	Groups  []int  `json:"groups"`
	Dir     string `json:"dir"`
	Running bool   `json:"running"`
}

// Fleet is a set of boards running in this process.
type Fleet struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	boards []*simBoard
	closed bool
}

// simBoard is one board and what it runs on.
type simBoard struct {
	info Info
	addr string // host:port its listener had, reused on power-on

	b      *board.Board
	node   *simline.Node
	port   *link.Port
	cancel context.CancelFunc
	done   chan error
	pull   *http.Transport // the update service's client, nil without OTA
}

// Start starts the boards and returns once every one serves HTTP. ctx
// bounds the boards' life as Stop does.
func Start(ctx context.Context, o Options) (*Fleet, error) {
	if o.N < 1 {
		return nil, fmt.Errorf("%w: N %d", ErrOptions, o.N)
	}
	if o.Line != nil && o.N > MaxOnLine {
		return nil, fmt.Errorf("%w: %d boards on one line (at most %d)", ErrOptions, o.N, MaxOnLine)
	}
	if o.BaseDir == "" {
		return nil, fmt.Errorf("%w: no BaseDir", ErrOptions)
	}
	if o.HTTPHost == "" {
		o.HTTPHost = "127.0.0.1"
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	f := &Fleet{o: o}
	f.ctx, f.cancel = context.WithCancel(ctx)
	for i := range o.N {
		var groups []int
		if o.Groups != nil {
			groups = slices.Clone(o.Groups(i))
		}
		if groups == nil {
			groups = []int{}
		}
		s := link.DefaultSettings()
		s.Groups = groups
		s.Address = i + 1
		if err := link.ValidateSettings(s, board.DefaultLEDGPIO); err != nil && o.Line != nil {
			return nil, fmt.Errorf("%w: board %d: %v", ErrOptions, i, err)
		}
		sb := &simBoard{info: Info{Index: i, Groups: groups, Dir: filepath.Join(o.BaseDir, fmt.Sprintf("board-%04d", i+1))}}
		if o.Line != nil {
			sb.info.Address = i + 1
		}
		f.boards = append(f.boards, sb)
	}
	errs := make([]error, o.N)
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i, sb := range f.boards {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f.start(sb)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

// presetLink writes the link settings board sb needs into its store.
func (f *Fleet) presetLink(sb *simBoard) error {
	db, err := store.Open(filepath.Join(sb.info.Dir, "settings.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	bk := db.Bucket("link")
	s := link.DefaultSettings()
	if _, err := bk.Get("link", &s); err != nil {
		return err
	}
	s.Mode, s.Address, s.Groups = link.ModeRS485, sb.info.Address, slices.Clone(sb.info.Groups)
	if baud := f.o.Line.Baud(); slices.Contains(link.Bauds, baud) {
		s.Baud = baud
	}
	return bk.Put("link", s)
}

// start opens and runs one board and waits until it serves.
func (f *Fleet) start(sb *simBoard) error {
	if err := os.MkdirAll(sb.info.Dir, 0o755); err != nil {
		return fmt.Errorf("fleetmode: board %d: %w", sb.info.Index, err)
	}
	var port *link.Port
	if f.o.Line != nil {
		if err := f.presetLink(sb); err != nil {
			return fmt.Errorf("fleetmode: board %d: %w", sb.info.Index, err)
		}
		node, err := f.o.Line.Attach(simline.NodeOptions{Name: fmt.Sprintf("board-%d", sb.info.Address), RxBuffer: RxBuffer})
		if err != nil {
			return fmt.Errorf("fleetmode: board %d: %w", sb.info.Index, err)
		}
		sb.node = node
		port = link.NewPort(node, node.Name())
	}
	cleanup := func() {
		if port != nil {
			port.Close() // closes the node too
		}
		sb.node, sb.port = nil, nil
	}
	ready := make(chan struct{})
	extra, pull := f.otaFeature(sb)
	clk := f.o.Clock
	if f.o.ClockPPM != nil {
		clk = clock.Skewed(clk, f.o.ClockPPM(sb.info.Index))
	}
	b, err := board.Open(board.Config{DataDir: sb.info.Dir, Clock: clk,
		Log:      f.o.Log.With("board", sb.info.Index+1),
		Features: assemble.Features(assemble.Options{Port: port, Extra: extra, VolumeSize: f.o.VolumeSize}),
		OnReady:  func(net.Addr) { close(ready) }})
	if err != nil {
		cleanup()
		return fmt.Errorf("fleetmode: board %d: %w", sb.info.Index, err)
	}
	addr := sb.addr
	if addr == "" {
		addr = net.JoinHostPort(f.o.HTTPHost, "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil && sb.addr != "" {
		ln, err = net.Listen("tcp", net.JoinHostPort(f.o.HTTPHost, "0"))
	}
	if err != nil {
		b.DB().Close()
		cleanup()
		return fmt.Errorf("fleetmode: board %d: %w", sb.info.Index, err)
	}
	sb.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, ln) }()
	t := time.NewTimer(StartTimeout)
	defer t.Stop()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		cleanup()
		return fmt.Errorf("fleetmode: board %d: %w", sb.info.Index, err)
	case <-t.C:
		cancel()
		<-done
		cleanup()
		return fmt.Errorf("%w: board %d", ErrStart, sb.info.Index)
	}
	f.mu.Lock()
	sb.b, sb.port, sb.cancel, sb.done, sb.pull = b, port, cancel, done, pull
	sb.info.ID = b.Identity().ID
	sb.info.URL = "http://" + sb.addr
	sb.info.Running = true
	f.mu.Unlock()
	return nil
}

// stop ends one board and waits for it.
func (f *Fleet) stop(sb *simBoard) error {
	f.mu.Lock()
	cancel, done, port, pull := sb.cancel, sb.done, sb.port, sb.pull
	sb.cancel, sb.done, sb.port, sb.node, sb.b, sb.pull = nil, nil, nil, nil, nil, nil
	sb.info.Running = false
	f.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	err := <-done
	if port != nil {
		port.Close()
	}
	if pull != nil {
		pull.CloseIdleConnections()
	}
	return err
}

// Len is the number of boards.
func (f *Fleet) Len() int { return len(f.boards) }

// Boards describes every board, in index order.
func (f *Fleet) Boards() []Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Info, len(f.boards))
	for i, sb := range f.boards {
		out[i] = sb.info
		out[i].Groups = slices.Clone(sb.info.Groups)
	}
	return out
}

// Board returns board i's firmware while it runs (nil when powered off).
func (f *Fleet) Board(i int) (*board.Board, error) {
	if i < 0 || i >= len(f.boards) {
		return nil, fmt.Errorf("%w: %d", ErrIndex, i)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boards[i].b, nil
}

// Restart restarts board i in place, as POST /restart does: a new boot
// from its saved state, the HTTP listener and line node staying.
func (f *Fleet) Restart(i int) error {
	b, err := f.Board(i)
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("%w: board %d is off", ErrStopped, i)
	}
	b.Restart(0)
	return nil
}

// PowerOff stops board i as if unplugged: its listener closes and it
// leaves the line.
func (f *Fleet) PowerOff(i int) error {
	if i < 0 || i >= len(f.boards) {
		return fmt.Errorf("%w: %d", ErrIndex, i)
	}
	return f.stop(f.boards[i])
}

// PowerOn starts board i again from its data directory, on the same line
// address and (when the port is still free) the same HTTP address.
func (f *Fleet) PowerOn(i int) error {
	if i < 0 || i >= len(f.boards) {
		return fmt.Errorf("%w: %d", ErrIndex, i)
	}
	f.mu.Lock()
	closed, running := f.closed, f.boards[i].info.Running
	f.mu.Unlock()
	if closed {
		return ErrStopped
	}
	if running {
		return nil
	}
	return f.start(f.boards[i])
}

// Stop stops every board and waits for them.
func (f *Fleet) Stop() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, sb := range f.boards {
		wg.Go(func() {
			if err := f.stop(sb); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
