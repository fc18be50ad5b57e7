package main

import (
	"github.com/holofleet/holofleet/firmware/board"
)

// features lists the feature packages every boot installs, in order.
// Each entry is one line; keep them sorted by feature.
func features(o options) []board.Feature {
	return []board.Feature{}
}

// options are the command-line settings features may need.
type options struct {
	dataDir string
}
