//go:build nodemo

package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/lan"
)

// demoBuilt is false in a holo-gateway built with -tags nodemo: it has no
// simulated installation and links no firmware package.
const demoBuilt = false

func addDemoFlags(*flag.FlagSet, *options) {}

func startDemo(context.Context, options, *wiring, *lan.LAN, *slog.Logger) error {
	return errNoDemo
}

func demoShow() (cue.List, bool) { return cue.List{}, false }

func demoDMXPatch(options) *dmx.Patch { return &dmx.Patch{} }
