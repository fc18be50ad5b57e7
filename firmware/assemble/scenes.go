package assemble

import (
	"errors"

	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/scenes"
)

// Scenes installs the saved scenes over the screen, LEDs and holo
// (installed before it): the boot_scene check of the settings, the scene
// and remaining bytes of the status block, the scene state every 5 s
// while one runs to its end, and, last, the boot scene.
func Scenes(b *board.Boot) error {
	sc, strip, h := ScreenOf(b), LEDsOf(b), HoloOf(b)
	if sc == nil || strip == nil || h == nil {
		return errors.New("assemble: scenes need the screen, LEDs and holo installed first")
	}
	m, err := scenes.New(scenes.Options{Clock: b.Clock, Store: b.Board.DB().Bucket("scenes"),
		Screen: sc, LEDs: strip, Holo: h, Publisher: b.Hub,
		Logger: b.Log.With("part", "scenes"), OnDelete: b.Settings.ClearBootScene,
		Start: clipStartOf(b)})
	if err != nil {
		return err
	}
	b.OnClose(m.Close)
	b.Settings.SetSceneChecker(m.Exists)
	b.AddFeature("scenes", m.Routes()...)
	b.AddStatus(m.Status)
	stop := b.Hub.Every(events.KindScene, events.PlayingPeriod, func() (any, bool) {
		r := m.Running()
		return r, r != nil
	})
	b.OnClose(stop)
	if name := b.Settings.Get().BootScene; name != nil {
		if _, err := m.ApplyName(*name); err != nil {
			b.Log.Warn("boot scene not applied", "scene", *name, "err", err)
		}
	}
	return nil
}
