package assemble

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
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
		Aligned: b.Align, Start: clipStartOf(b)})
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

// clipStartOf reads a request's clipStart: the screen's and the scenes'
// Start.
func clipStartOf(b *board.Boot) func(r *http.Request) (time.Time, bool, error) {
	return func(r *http.Request) (time.Time, bool, error) { return clipStart(b, r.URL.Query()) }
}

// clipStart is the moment a show request names for its clip's start on
// the boot's clock: clip_start on the aligned clock when the board is
// aligned (extension clip-sync), else the change's own moment (fire_at,
// at_ms; a malformed one is the scheduler's to refuse).
func clipStart(b *board.Boot, q url.Values) (time.Time, bool, error) {
	if q.Has(boardapi.QueryClipStart) {
		v := q.Get(boardapi.QueryClipStart)
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false, api.Errorf(api.ErrBadRequest, "clip_start must be an integer (Unix µs on the aligned clock), not %q", v)
		}
		if epoch, ok := b.Align.Epoch(); ok {
			now := b.BoardClock.Micros()
			d := us - epoch - now
			switch {
			case d > boardapi.MaxFireLead.Microseconds():
				return time.Time{}, false, api.Errorf(api.ErrBadRequest, "clip_start %d is %d ms ahead of the aligned clock; at most %d ms", us, d/1000, boardapi.MaxFireLead.Milliseconds())
			case d < -boardapi.MaxFireLate.Microseconds():
				return time.Time{}, false, api.Errorf(api.ErrBadRequest, "clip_start %d is %d ms behind the aligned clock; at most %d ms", us, -d/1000, boardapi.MaxFireLate.Milliseconds())
			}
			return b.BoardClock.Time(us - epoch), true, nil
		}
	}
	_, at, ok, err := b.Fire.When(q)
	if !ok || err != nil {
		return time.Time{}, false, nil
	}
	return b.BoardClock.Time(at), true, nil
}
