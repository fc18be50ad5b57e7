package assemble

import (
	"net/http"
	"time"

	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/fs"
	"github.com/holofleet/holofleet/firmware/media"
	"github.com/holofleet/holofleet/firmware/screen"
)

type screenKey struct{}

// ScreenOf returns the boot's screen controller.
func ScreenOf(b *board.Boot) *screen.Controller {
	c, _ := b.Value(screenKey{}).(*screen.Controller)
	return c
}

// Screen installs the panel: the saved backlight applied at start, files
// from the storage volume (installed before it; without one every path
// is not_found), the volume's guard, the screen state every 5 s while a
// clip plays, and the showing and backlight bytes of the status block.
func Screen(b *board.Boot) error {
	vol := fs.VolumeOf(b)
	var open screen.Opener
	if vol != nil {
		open = func(p string) (media.Clip, error) { return media.OpenPath(vol, p) }
	}
	c, err := screen.New(screen.Options{Clock: b.Clock, Display: b.Board.Hardware().Display, Open: open,
		Publisher: b.Hub, Logger: b.Log.With("part", "screen"), Backlight: b.Settings.Get().Screen.Backlight,
		Aligned: b.Align, Moment: func(r *http.Request) (time.Time, bool) {
			// The moment a timed show names (fire_at, at_ms), on the
			// board's clock; a malformed one is refused by the scheduler.
			_, at, ok, err := b.Fire.When(r.URL.Query())
			if !ok || err != nil {
				return time.Time{}, false
			}
			return b.BoardClock.Time(at), true
		}})
	if err != nil {
		return err
	}
	if vol != nil {
		vol.SetGuard(c)
		b.OnClose(func() { vol.SetGuard(nil) })
	}
	b.OnClose(c.Close)
	b.Set(screenKey{}, c)
	b.AddFeature("screen", c.Routes()...)
	b.AddStatus(c.Status)
	stop := b.Hub.Every(events.KindScreen, events.PlayingPeriod, func() (any, bool) {
		st := c.State()
		return st, st.Showing == screen.ShowingClip
	})
	b.OnClose(stop)
	return nil
}
