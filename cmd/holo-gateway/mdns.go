package main

import (
	"context"

	"github.com/holofleet/holofleet/gateway/lan"
)

// newMDNS browses the LAN for boards (`_holofleet._tcp`) when --mdns is
// given and adds each one to the LAN driver.
func newMDNS(_ context.Context, e *env) (component, error) {
	if !e.opts.mdns || e.wiring.lan == nil {
		return component{name: "mdns"}, nil
	}
	return component{
		name:   "mdns",
		banner: []string{"mDNS:     browsing _holofleet._tcp every 30 s for LAN boards"},
		run: func(ctx context.Context) error {
			return e.wiring.lan.Discover(ctx, lan.DiscoverOptions{Log: e.log.With("part", "mdns")})
		},
	}, nil
}
