//go:build !nodemo

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/demo"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
)

// demoBuilt tells whether this binary carries `holo-gateway demo`, the
// simulated installation. It is the only part of holo-gateway that links
// the firmware (gateway/demo runs simulated boards); `go build -tags
// nodemo` leaves it out, and `make deps` checks that such a build links
// no firmware package.
const demoBuilt = true

// addDemoFlags adds the flags of the demo subcommand.
func addDemoFlags(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.demoBoards, "demo-boards", demo.DefaultBoards, "boards in the simulated installation")
	fs.IntVar(&o.demoG, "demo-groups", demo.DefaultGroups, "groups they are spread over")
}

// startDemo starts the simulated installation and wires its RS485 line
// and its boards' LAN addresses into w.
func startDemo(ctx context.Context, o options, w *wiring, lanDrv *lan.LAN, log *slog.Logger) error {
	inst, err := demo.Start(ctx, demo.Options{Dir: filepath.Join(o.data, "demo"),
		Boards: o.demoBoards, Groups: o.demoG, Keys: o.keys.boardKeys(), Log: log.With("part", "demo")})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	w.demo = inst
	w.drivers = append(w.drivers, w.states.line(rs485.New(rs485.Options{Name: demo.LineName, Port: inst.Master,
		Log: log.With("driver", "rs485:"+demo.LineName)})))
	w.lines = append(w.lines, demo.LineName+" "+inst.HubURL)
	for _, u := range inst.URLs {
		if err := lanDrv.Add(u, ""); err != nil {
			return fmt.Errorf("demo board %s: %w", u, err)
		}
	}
	return nil
}

// demoShow is the demo's cue list (docs/show.md), loaded in demo mode.
func demoShow() (cue.List, bool) { return demo.Show(), true }

// demoDMXPatch is the demo's DMX patch: its groups and boards (by their
// address on the demo's line).
func demoDMXPatch(o options) *dmx.Patch { return dmx.DemoPatch(o.demoG, o.demoBoards, demo.LineName) }
