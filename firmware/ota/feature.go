package ota

import (
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/buildinfo"
)

// Feature installs the update service into every boot. cfg's Clock, Log,
// Events, Long and Restart are taken from the boot; Pull.Online defaults
// to the boot's station link and Pull.Current to the running version.
func Feature(cfg Config) board.Feature {
	return func(b *board.Boot) error {
		c := cfg
		c.Clock, c.Log, c.Events, c.Long, c.Restart = b.Clock, b.Log.With("part", "ota"), b.Hub, b.Long, b.Board.Restart
		if c.DataDir == "" {
			c.DataDir = b.Board.DataDir()
		}
		if c.Expect.Project == "" {
			c.Expect = HostExpect()
		}
		if c.Pull.Online == nil {
			c.Pull.Online = func() bool { return b.Network.Station().Connected }
		}
		if c.Pull.Current == "" {
			c.Pull.Current = buildinfo.Running().Version
		}
		s, err := New(c)
		if err != nil {
			return err
		}
		b.OnClose(s.Close)
		b.AddFeature("ota", s.Routes()...)
		return nil
	}
}
