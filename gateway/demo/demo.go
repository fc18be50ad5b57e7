// Package demo starts the simulated installation `holo-gateway demo` runs
// against: one simulated RS485 line with a hub socket (so separate
// holo-board processes and holoctl can join it as
// simline:///DIR/line.sock), and a fleet-mode set of boards on that line,
// in groups, each also reachable over HTTP on the loopback, each with the
// firmware update service (fleet mode: A/B slots under its data dir) and,
// given Options.Keys, secure boot: the boards burn the keys at their first
// start and take only firmware signed by one of them.
//
// Board i (0-based) has bus address i+1 and is in group i%Groups+1, so
// eight boards in two groups are 1,3,5,7 in group 1 and 2,4,6,8 in group 2.
// The boards' data lives under DIR/boards and survives a restart of the
// demo, so their identities stay the same.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/defaults"
)

// Errors of the demo.
var (
	// ErrOptions: Dir is missing or a count is out of range.
	ErrOptions = errors.New("demo: bad options")
)

// Defaults.
const (
	DefaultBoards = 8
	DefaultGroups = 2
	DefaultBaud   = 115200
	// HubSocket is the hub's socket file name under Dir.
	HubSocket = "line.sock"
	// MasterName is the node name of the gateway's master on the line.
	MasterName = "gateway"
	// LineName is the line's name for the gateway (its driver is
	// "rs485:" + LineName).
	LineName = "demo"
)

// Options configure the installation.
type Options struct {
	// Dir holds the hub socket and the boards' data.
	Dir string
	// Boards is how many boards run (default 8, at most 223).
	Boards int
	// Groups is how many groups they are spread over (default 2, at
	// most 31).
	Groups int
	// Baud is the line's baud rate (default 115200).
	Baud int
	// Keys are the key digests every board burns into its eFuses at its
	// first start: the boards then run only firmware one of them signed
	// (secure boot). Empty leaves new boards open. Boards started before
	// keep what they burned then.
	Keys  []image.KeyDigest
	Clock clock.Clock
	Log   *slog.Logger
}

// Installation is a running demo installation.
type Installation struct {
	// Line is the simulated RS485 line.
	Line *simline.Line
	// Master is the node the gateway's RS485 master drives the line with.
	Master *simline.Node
	// HubPath is the hub's Unix socket; HubURL is the same as a transport
	// address (simline:///...).
	HubPath, HubURL string
	// Fleet runs the boards.
	Fleet *fleetmode.Fleet
	// URLs are the boards' HTTP base URLs, in address order.
	URLs []string

	opts   Options
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Start builds and starts the installation; Close stops it (as does the
// end of ctx, for the boards and the hub).
func Start(ctx context.Context, o Options) (*Installation, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("%w: no Dir", ErrOptions)
	}
	if o.Boards == 0 {
		o.Boards = DefaultBoards
	}
	if o.Groups == 0 {
		o.Groups = DefaultGroups
	}
	if o.Baud == 0 {
		o.Baud = DefaultBaud
	}
	if o.Boards < 1 || o.Boards > fleetmode.MaxOnLine {
		return nil, fmt.Errorf("%w: %d boards (1-%d)", ErrOptions, o.Boards, fleetmode.MaxOnLine)
	}
	if o.Groups < 1 || o.Groups > frame.MaxGroup {
		return nil, fmt.Errorf("%w: %d groups (1-%d)", ErrOptions, o.Groups, frame.MaxGroup)
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	line, err := simline.New(simline.Config{Baud: o.Baud, Clock: o.Clock})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	in := &Installation{Line: line, opts: o, cancel: cancel}
	in.HubPath = filepath.Join(o.Dir, HubSocket)
	in.HubURL = "simline://" + in.HubPath
	fail := func(err error) (*Installation, error) {
		in.Close()
		return nil, err
	}
	_ = os.Remove(in.HubPath) // a socket left by a demo that was killed
	ln, err := net.Listen("unix", in.HubPath)
	if err != nil {
		return fail(fmt.Errorf("demo: hub: %w", err))
	}
	in.wg.Go(func() {
		if err := simline.ServeHub(ctx, line, ln); err != nil {
			o.Log.Error("demo: hub stopped", "err", err)
		}
	})
	in.Master, err = line.Attach(simline.NodeOptions{Name: MasterName})
	if err != nil {
		return fail(fmt.Errorf("demo: %w", err))
	}
	in.Fleet, err = fleetmode.Start(ctx, fleetmode.Options{N: o.Boards, BaseDir: filepath.Join(o.Dir, "boards"),
		Line: line, Groups: func(i int) []int { return []int{i%o.Groups + 1} }, Clock: o.Clock, Log: o.Log,
		// Every board updates its firmware (A/B slots in its data
		// directory), so rollouts and the HA update entities work.
		OTA: &fleetmode.OTAOptions{Keys: func(int) []image.KeyDigest { return o.Keys }}})
	if err != nil {
		return fail(err)
	}
	for _, b := range in.Fleet.Boards() {
		in.URLs = append(in.URLs, b.URL)
	}
	return in, nil
}

// Boards describes the boards.
func (in *Installation) Boards() []fleetmode.Info { return in.Fleet.Boards() }

// Summary is a few lines for the gateway's banner: the line, its hub, and
// each board with its address, group and URL.
func (in *Installation) Summary() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "simulated installation: %d boards in %d groups on RS485 line %q at %d baud\n",
		in.opts.Boards, in.opts.Groups, LineName, in.opts.Baud)
	fmt.Fprintf(&sb, "  line hub: %s (holo-board --uart %s, holoctl --line %s)\n", in.HubPath, in.HubURL, in.HubURL)
	if len(in.opts.Keys) > 0 {
		names := make([]string, 0, len(in.opts.Keys))
		for _, k := range in.opts.Keys {
			names = append(names, k.Short())
		}
		fmt.Fprintf(&sb, "  secure boot: new boards burn %s and run only images it signed (GET /api/v1/ota shows each board's keys)\n", strings.Join(names, ", "))
	}
	for _, b := range in.Fleet.Boards() {
		fmt.Fprintf(&sb, "  board %-3d id %s  group %v  %s\n", b.Address, b.ID, b.Groups, b.URL)
	}
	return sb.String()
}

// Close stops the boards, the hub and the line, and waits for them.
func (in *Installation) Close() error {
	var err error
	in.once.Do(func() {
		if in.Fleet != nil {
			err = in.Fleet.Stop()
		}
		in.cancel()
		in.wg.Wait()
		if in.Master != nil {
			in.Master.Close()
		}
		in.Line.Close()
		_ = os.Remove(in.HubPath)
	})
	return err
}
