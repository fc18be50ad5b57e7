package ota

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/ota/bootloader"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
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
	// Install returns the first image, the factory image (Config.Factory:
	// it boots without a signature); nil packs the running firmware's
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
		fl, err := flash.Open(c.DataDir)
		if err != nil {
			return err
		}
		fuses := efuse.Open(fl.Dir())
		st, err := fuses.Burn(c.Keys)
		if errors.Is(err, efuse.ErrBurned) {
			c.Log.Warn("ota: keys are burned already; the keys given now are not", "err", err)
		} else if err != nil {
			return err
		}
		if cfg.Fleet != nil {
			if err := fleetBoot(b, &c, fuses); err != nil {
				return err
			}
		}
		s, err := New(c)
		if err != nil {
			return err
		}
		app := b.App()
		app.SecureBoot = &buildinfo.SecureBoot{Enabled: st.Enabled(), Signers: hexKeys(c.Booted.Signers), Factory: c.Booted.Factory}
		if app.SecureBoot.Signers == nil {
			app.SecureBoot.Signers = []string{}
		}
		b.Firmware = &app
		b.OnClose(s.Close)
		b.AddFeature("ota", s.Routes()...)
		b.AddExtension(boardapi.ExtensionOTADelta)
		return nil
	}
}

// fleetStub is the payload of a fleet-mode board's factory image.
var fleetStub = []byte("fleet-mode board: no payload runs\n")

// fleetBoot chooses the slot of this boot and arranges its confirmation.
func fleetBoot(b *board.Boot, c *Config, fuses *efuse.Fuses) error {
	f := c.Fleet
	fl, err := flash.Open(c.DataDir)
	if err != nil {
		return err
	}
	install := f.Install
	if install == nil {
		install = func() ([]byte, error) {
			app := buildinfo.Running()
			return image.Pack(image.Desc{Project: app.Project, Version: app.Version, Date: app.Date, Time: app.Time, IDF: app.IDF}, fleetStub)
		}
	}
	factory, err := install()
	if err != nil {
		return err
	}
	c.Factory = sha256.Sum256(factory)
	install = func() ([]byte, error) { return factory, nil }
	bcfg := bootloader.Config{Flash: fl, Expect: c.Expect, Install: install, Log: c.Log, Fuses: fuses, Factory: c.Factory}
	choice, err := bootloader.Choose(bcfg)
	if err != nil {
		return err
	}
	c.Booted = Booted{Signers: choice.Signers, Factory: choice.Factory, SHA256: choice.Image.SHA256, Size: choice.Image.Size}
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
		if _, err := bootloader.ApplyRevocations(bcfg, choice.Slot); err != nil {
			c.Log.Error("ota: applying the image's revocations failed", "err", err)
		}
	})
	return nil
}
