package ota

import (
	"context"
	"time"

	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/buildinfo"
	"github.com/holofleet/holofleet/firmware/ota/bootloader"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/image"
)

// Fleet makes the feature the board's bootloader too, for fleet mode:
// many boards in one process, each restarting in place. At every boot the
// feature runs bootloader.Choose on the board's flash (the first boot
// installs a small image described as the running firmware), reports the
// booted description, and confirms a trial image once the boot serves, as
// process mode's firmware does.
type Fleet struct {
	// FailTrial is the fault hook: asked at each trial boot, true makes
	// the image fail its trial (the boot never confirms and restarts at
	// once), so the next boot rolls back.
	FailTrial func(App) bool
	// OnBoot is told the description of the image each boot runs, to
	// show in the board's /info.
	OnBoot func(App)
	// Install returns the first image; nil packs the running firmware's
	// description around a stub payload (fleet boards run no payload).
	Install func() ([]byte, error)
}

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
		if cfg.Fleet != nil {
			if err := fleetBoot(b, &c); err != nil {
				return err
			}
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

// fleetBoot chooses the slot of this boot and arranges its confirmation.
func fleetBoot(b *board.Boot, c *Config) error {
	f := c.Fleet
	fl, err := flash.Open(c.DataDir)
	if err != nil {
		return err
	}
	install := f.Install
	if install == nil {
		install = func() ([]byte, error) {
			app := buildinfo.Running()
			return image.Pack(image.Desc{Project: app.Project, Version: app.Version, Date: app.Date, Time: app.Time, IDF: app.IDF},
				[]byte("fleet-mode board: no payload runs\n"))
		}
	}
	choice, err := bootloader.Choose(bootloader.Config{Flash: fl, Expect: c.Expect, Install: install, Log: c.Log})
	if err != nil {
		return err
	}
	c.Running = choice.Slot
	app := *appOf(choice.Image.Desc)
	c.Pull.Current = app.Version
	b.Firmware = &app
	if f.OnBoot != nil {
		f.OnBoot(app)
	}
	if choice.RolledBack != "" {
		c.Log.Warn("ota: booted after a rollback", "rolled_back", choice.RolledBack, "slot", choice.Label)
	}
	if !choice.Trial {
		return nil
	}
	if f.FailTrial != nil && f.FailTrial(app) {
		c.Log.Error("ota: fault hook: failing the trial", "slot", choice.Label, "version", app.Version)
		b.Board.Restart(0)
		return nil
	}
	b.Go(func(ctx context.Context) {
		// Up means this boot is the one serving.
		for b.Board.Current() != b {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		if _, err := bootloader.Confirm(fl, choice.Slot); err != nil {
			c.Log.Error("ota: confirming the image failed", "err", err)
			return
		}
		c.Log.Info("ota: image confirmed", "slot", choice.Label, "version", app.Version)
	})
	return nil
}
