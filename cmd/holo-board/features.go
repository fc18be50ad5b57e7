package main

import (
	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/link"
)

// features lists the feature packages every boot installs, in order: the
// built-in set from firmware/assemble, then the ones below, one a line.
func features(o options) []board.Feature {
	ao := assemble.Options{Network: o.network, Port: o.port, VolumeSize: o.volumeSize,
		Extra: []board.Feature{otaFeature(o.dataDir)}}
	if o.linuxHAL {
		ao.NoI2CTarget = NoI2CTarget
	}
	return assemble.Features(ao)
}

// options are the command-line settings features may need.
type options struct {
	network assemble.NetworkOptions
	dataDir string
	// volumeSize is the storage volume's capacity in bytes.
	volumeSize int64
	port       *link.Port
	// linuxHAL is true on real parts (--hal linux): no I2C target mode.
	linuxHAL bool
}
