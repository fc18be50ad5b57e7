package screen

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/hal"
	"github.com/holofleet/holofleet/firmware/media"
)

// Errors of the package.
var (
	// ErrConfig means New was given unusable options.
	ErrConfig = errors.New("screen: bad configuration")
	// ErrClosed means the controller was closed.
	ErrClosed = errors.New("screen: closed")
)

// What the panel shows: the values of State.Showing.
const (
	ShowingNothing     = "nothing"
	ShowingColour      = "colour"
	ShowingCalibration = "calibration"
	ShowingImage       = "image"
	ShowingClip        = "clip"
)

// LateSlack is how long after its due time a frame may reach the panel
// and still count as on time: it covers the wake-up delay of a timer on a
// host, well under a 60 Hz panel's refresh.
const LateSlack = 5 * time.Millisecond

// DefaultBacklight is the backlight when Options.Backlight is out of range.
const DefaultBacklight = 80

// State is the screen's now-state, as GET /screen returns it. When
// nothing is shown only powered, backlight and showing are present.
type State struct {
	Powered   bool   `json:"powered" doc:"false while the panel sleeps"`
	Backlight int    `json:"backlight" doc:"percent, 0-100"`
	Showing   string `json:"showing" doc:"nothing, colour, calibration, image or clip"`
	Colour    string `json:"colour,omitempty" doc:"#rrggbb while showing a colour"`
	Path      string `json:"path,omitempty" doc:"the file shown (image or clip)"`
	Loop      *bool  `json:"loop,omitempty" doc:"while a clip plays: it loops forever"`
	Clip      *Clip  `json:"clip,omitempty" doc:"while a clip plays"`
}

// Clip holds the counters of the clip playing.
type Clip struct {
	Width     int     `json:"width"`
	Height    int     `json:"height"`
	Frames    int     `json:"frames" doc:"frames in one play"`
	Shown     int     `json:"shown" doc:"frames drawn since the clip started, across loops"`
	Loops     int     `json:"loops" doc:"plays completed"`
	Plays     int     `json:"plays" doc:"plays asked for; 0 forever"`
	Late      int     `json:"late" doc:"frames drawn more than 5 ms after their due time"`
	ElapsedMS int64   `json:"elapsed_ms" doc:"since the first frame was drawn"`
	FPS       float64 `json:"fps"`

	// Extension clip-sync (docs/spec-decisions.md, "Clips that stay
	// together"): where the clip is on its timeline.

	// Frame is the number of the frame on the panel, counted from the
	// clip's start across plays (frame i of play k is k*frames+i): boards
	// playing the same clip from the same moment show the same number.
	Frame int `json:"frame" doc:"extension clip-sync: the frame on the panel, numbered from the clip's start across plays (play k, frame i: k*frames+i)"`
	// Dropped counts frames skipped because they were due before the
	// player could draw them (it fell behind, or the aligned clock moved
	// on); Held counts frames kept longer than their time because the
	// aligned clock was put back.
	Dropped int `json:"dropped" doc:"extension clip-sync: frames skipped because they were already past when the player came to them"`
	Held    int `json:"held" doc:"extension clip-sync: frames kept on the panel past their time because a new alignment put the clock back"`
	// Synced tells that the clip plays on the clock aligned with the
	// gateway's (PUT /time); StartUS is then its start on that clock.
	Synced  bool   `json:"synced" doc:"extension clip-sync: the clip plays on the clock aligned with the gateway's (PUT /time)"`
	StartUS *int64 `json:"start_us,omitempty" doc:"extension clip-sync: when synced, the clip's start on the aligned clock (the gateway's time, Unix µs)"`
}

// ClipStarted is the clip_started happening.
type ClipStarted struct {
	Path   string  `json:"path"`
	Loop   bool    `json:"loop"`
	Plays  int     `json:"plays"`
	Frames int     `json:"frames"`
	FPS    float64 `json:"fps"`
}

// ClipEnded is the clip_ended happening.
type ClipEnded struct {
	Path     string `json:"path"`
	Finished bool   `json:"finished"`
}

// Publisher receives state changes and happenings (the event hub).
type Publisher interface {
	SetState(kind string, state any)
	Emit(kind string, fields any) events.Happening
}

// Watcher hears what happens to what is shown. Each show gets an id (see
// Present); ids are never 0.
type Watcher interface {
	// Stopping is called with the screen locked when the content id
	// stops being shown for any reason but a clip finishing its plays (a
	// new show, DELETE /screen, its file changing, a decoding failure).
	// It must not call the Controller.
	Stopping(id uint64)
	// Finished is called from the clip's player, with nothing locked,
	// when clip id has played all its plays and before it ends (before
	// clip_ended). It may call the Controller.
	Finished(id uint64)
}

// Aligned is the board's clock as aligned with the gateway's (package
// timesync's Aligner): AlignedAt gives a moment of the Controller's clock
// on the aligned clock, Unix µs, ok false while the board is not aligned.
type Aligned interface {
	AlignedAt(t time.Time) (us int64, ok bool)
}

// Opener opens a volume path for playing; errors are API errors
// (bad_path, not_found, is_a_directory, not_playable).
type Opener func(path string) (media.Clip, error)

// Options configure a Controller.
type Options struct {
	Clock   clock.Clock // required
	Display hal.Display // required
	// Open opens files to show; nil refuses every path with not_found.
	Open      Opener
	Publisher Publisher // may be nil
	Logger    *slog.Logger
	// Backlight is the saved backlight applied at start, 0-100.
	Backlight int
	// Aligned, when set, is the board's alignment with the gateway's
	// clock: a clip started while the board is aligned plays on it.
	Aligned Aligned
	// Start, when set, reads the moment a POST /screen/show request names
	// for its clip's start on Clock (clip_start on the aligned clock, or
	// the change's own fire_at, at_ms); ok is false when it names none,
	// an error refuses the request. A clip so started starts at that
	// moment on its timeline, however late the change is made.
	Start func(r *http.Request) (at time.Time, ok bool, err error)
}

// Controller owns the panel. Its methods are safe for concurrent use.
type Controller struct {
	clk   clock.Clock
	disp  hal.Display
	open  Opener
	pub   Publisher
	log   *slog.Logger
	align Aligned
	start func(r *http.Request) (time.Time, bool, error)

	wg sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	watcher Watcher
	powered bool
	level   int // the backlight when lit
	light   int // the backlight now
	cur     content
	nextID  uint64
	player  *player
}

// content is what is on the panel, enough to show it again.
type content struct {
	id      uint64
	showing string
	colour  color.RGBA
	path    string
	plays   int // clip: 0 forever
	frame   int // image: the frame of the file shown (a clip's last)
}

// New applies the saved backlight, wakes the panel and clears it.
func New(o Options) (*Controller, error) {
	if o.Clock == nil || o.Display == nil {
		return nil, fmt.Errorf("%w: clock and display are required", ErrConfig)
	}
	lvl := o.Backlight
	if lvl < 0 || lvl > 100 {
		lvl = DefaultBacklight
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	open := o.Open
	if open == nil {
		open = func(p string) (media.Clip, error) {
			return nil, api.Errorf(api.ErrNotFound, "%s: the board has no storage volume", p)
		}
	}
	c := &Controller{clk: o.Clock, disp: o.Display, open: open, pub: o.Publisher, log: log, level: lvl,
		align: o.Aligned, start: o.Start}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.wakeLocked(); err != nil {
		return nil, err
	}
	c.nextID++
	c.cur = content{id: c.nextID, showing: ShowingNothing}
	if err := c.disp.Fill(color.RGBA{A: 0xff}); err != nil {
		return nil, err
	}
	return c, nil
}

// SetWatcher installs the watcher (nil: none).
func (c *Controller) SetWatcher(w Watcher) {
	c.mu.Lock()
	c.watcher = w
	c.mu.Unlock()
}

// Close stops the clip playing and waits for its player.
func (c *Controller) Close() {
	c.mu.Lock()
	c.closed = true
	if p := c.player; p != nil {
		c.player = nil
		p.halt()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// State returns what the screen does now.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateLocked()
}

func (c *Controller) stateLocked() State {
	s := State{Powered: c.powered, Backlight: c.light, Showing: c.cur.showing}
	switch c.cur.showing {
	case ShowingColour:
		s.Colour = boardapi.FormatColour(c.cur.colour)
	case ShowingImage:
		s.Path = c.cur.path
	case ShowingClip:
		s.Path = c.cur.path
		loop := c.cur.plays == 0
		s.Loop = &loop
		if p := c.player; p != nil {
			cl := p.counters
			if !p.start.IsZero() {
				cl.ElapsedMS = c.clk.Since(p.start).Milliseconds()
			}
			s.Clip = &cl
		}
	}
	return s
}

// Status fills the screen's bytes of the native status block: showing
// and backlight.
func (c *Controller) Status(sb *frame.StatusBlock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.cur.showing {
	case ShowingColour:
		sb.Showing = frame.ShowingColour
	case ShowingCalibration:
		sb.Showing = frame.ShowingCalibration
	case ShowingImage:
		sb.Showing = frame.ShowingImage
	case ShowingClip:
		sb.Showing = frame.ShowingClip
	default:
		sb.Showing = frame.ShowingNothing
	}
	sb.Backlight = uint8(c.light)
}

// Playing reports whether a clip plays (the board sends the screen state
// every 5 s while it does).
func (c *Controller) Playing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur.showing == ShowingClip
}

// Prepared is a checked show request waiting to be presented: its file
// (if any) is open. Present it or Discard it.
type Prepared struct {
	req   boardapi.ShowRequest
	kind  string // one of the Showing values
	col   color.RGBA
	clip  media.Clip
	plays int
	frame int
	at    time.Time // a clip's start on its timeline; zero: when presented
}

// StartAt anchors a clip's timeline at the moment at of the Controller's
// clock (the moment a timed request named): frame 0 is due then, and a
// clip presented after it starts at the frame due when it is presented.
func (p *Prepared) StartAt(at time.Time) { p.at = at }

// Kind is what the panel will show: colour, calibration, image or clip
// (an animated GIF is a clip).
func (p *Prepared) Kind() string { return p.kind }

// Plays is how many times the clip will play, 0 for forever.
func (p *Prepared) Plays() int { return p.plays }

// Discard closes the file of a Prepared that will not be presented.
func (p *Prepared) Discard() {
	if p != nil && p.clip != nil {
		_ = p.clip.Close()
		p.clip = nil
	}
}

// Prepare checks r and opens its file; nothing on the panel changes. A
// clip with neither loop nor loops plays once when onceByDefault, else
// forever.
func (c *Controller) Prepare(r boardapi.ShowRequest, onceByDefault bool) (*Prepared, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	p := &Prepared{req: r}
	switch {
	case r.Colour != nil:
		p.kind = ShowingColour
		p.col, _ = boardapi.ParseColour(*r.Colour)
	case r.Calibration != nil:
		p.kind = ShowingCalibration
	default:
		cl, err := c.open(*r.Path)
		if err != nil {
			return nil, err
		}
		p.clip = cl
		// What the file is decides, not how many frames it has: a MOV
		// holding one frame is a clip like any other and plays (and
		// loops) as asked; a one-frame GIF is an image.
		if kind := cl.Info().Kind; kind == media.KindClip || kind == media.KindAnimation {
			p.kind = ShowingClip
			p.plays = r.Plays(onceByDefault)
		} else {
			p.kind = ShowingImage
		}
	}
	return p, nil
}

// Show checks r and shows it: the reply of POST /screen/show.
func (c *Controller) Show(r boardapi.ShowRequest) (State, error) {
	p, err := c.Prepare(r, false)
	if err != nil {
		return State{}, err
	}
	st, _, err := c.Present(p)
	return st, err
}

// Present shows a Prepared and returns the new state and the show's id.
// A still image is decoded here; a failure leaves the panel as it was.
func (c *Controller) Present(p *Prepared) (State, uint64, error) {
	var still *image.RGBA
	if p.kind == ShowingImage {
		img, err := p.clip.Frame(0)
		if err != nil {
			p.Discard()
			return State{}, 0, api.Errorf(api.ErrNotPlayable, "%s: %v", *p.req.Path, err)
		}
		still = canvas()
		drawCentred(still, img)
		p.Discard()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		p.Discard()
		return State{}, 0, ErrClosed
	}
	c.replaceLocked()
	if err := c.wakeLocked(); err != nil {
		c.log.Warn("screen: waking the panel failed", "err", err)
	}
	c.nextID++
	next := content{id: c.nextID, showing: p.kind}
	var err error
	switch p.kind {
	case ShowingColour:
		next.colour = p.col
		err = c.disp.Fill(p.col)
	case ShowingCalibration:
		err = c.disp.Show(Calibration())
	case ShowingImage:
		next.path = *p.req.Path
		err = c.disp.Show(still)
	case ShowingClip:
		next.path, next.plays = *p.req.Path, p.plays
		c.startLocked(p.clip, next, p.at)
		p.clip = nil
	}
	if err != nil {
		c.log.Warn("screen: drawing failed", "err", err)
	}
	c.cur = next
	c.publishLocked()
	return c.stateLocked(), next.id, nil
}

// replaceLocked ends what is shown before something else is: the watcher
// hears of it and a playing clip stops (clip_ended).
func (c *Controller) replaceLocked() {
	if c.watcher != nil {
		c.watcher.Stopping(c.cur.id)
	}
	if pl := c.player; pl != nil {
		c.player = nil
		pl.halt()
		c.emitLocked(events.KindClipEnded, ClipEnded{Path: pl.path, Finished: pl.finished})
	}
}

func (c *Controller) wakeLocked() error {
	if !c.powered {
		if err := c.disp.SetPower(true); err != nil {
			return err
		}
		c.powered = true
	}
	if c.light != c.level {
		if err := c.disp.SetBacklight(c.level); err != nil {
			return err
		}
		c.light = c.level
	}
	return nil
}

// Off stops what is shown, puts the panel to sleep and turns the
// backlight off: DELETE /screen. The backlight level is kept for the next
// show.
func (c *Controller) Off() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offLocked()
	return c.stateLocked()
}

func (c *Controller) offLocked() {
	if c.closed {
		return
	}
	c.replaceLocked()
	c.nextID++
	c.cur = content{id: c.nextID, showing: ShowingNothing}
	if err := errors.Join(c.disp.Fill(color.RGBA{A: 0xff}), c.disp.SetBacklight(0), c.disp.SetPower(false)); err != nil {
		c.log.Warn("screen: turning the panel off failed", "err", err)
	}
	c.powered, c.light = false, 0
	c.publishLocked()
}

// clearLocked shows nothing on a panel left awake.
func (c *Controller) clearLocked() {
	c.replaceLocked()
	c.nextID++
	c.cur = content{id: c.nextID, showing: ShowingNothing}
	if err := c.disp.Fill(color.RGBA{A: 0xff}); err != nil {
		c.log.Warn("screen: clearing failed", "err", err)
	}
	c.publishLocked()
}

// SetBacklight sets the backlight in percent (PATCH /screen) until the
// next start. A sleeping panel keeps sleeping and lights at this level
// when something is shown.
func (c *Controller) SetBacklight(percent int) (State, error) {
	if percent < 0 || percent > 100 {
		return State{}, api.Errorf(api.ErrBadRequest, "backlight must be 0-100, not %d", percent)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.level = percent
	if c.powered && c.light != percent {
		if err := c.disp.SetBacklight(percent); err != nil {
			return State{}, err
		}
		c.light = percent
		c.publishLocked()
	}
	return c.stateLocked(), nil
}

// Release is the volume's screen guard: before the file at path (or a
// directory holding it) is moved, replaced or deleted, the clip or image
// shown from it stops and the panel shows nothing.
func (c *Controller) Release(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.cur.path == "" || !under(c.cur.path, path) {
		return
	}
	c.clearLocked()
}

func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// Snapshot is what the screen does, for Restore.
type Snapshot struct {
	powered bool
	cur     content
}

// Snapshot returns what the screen does now.
func (c *Controller) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Snapshot{powered: c.powered, cur: c.cur}
}

// Restore shows a Snapshot again: asleep stays asleep, a clip plays again
// from its start with the plays it had, an image is drawn again (for a
// clip's last frame, that frame). When the file can no longer be shown
// the panel shows nothing and the error says why.
func (c *Controller) Restore(s Snapshot) error {
	if !s.powered {
		c.Off()
		return nil
	}
	var r boardapi.ShowRequest
	switch s.cur.showing {
	case ShowingColour:
		col := boardapi.FormatColour(s.cur.colour)
		r.Colour = &col
	case ShowingCalibration:
		t := true
		r.Calibration = &t
	case ShowingImage, ShowingClip:
		path := s.cur.path
		r.Path = &path
		if s.cur.showing == ShowingClip {
			if s.cur.plays == 0 {
				t := true
				r.Loop = &t
			} else {
				r.Loops = &s.cur.plays
			}
		}
	default:
		c.mu.Lock()
		if !c.closed {
			c.clearLocked()
		}
		c.mu.Unlock()
		return nil
	}
	p, err := c.Prepare(r, false)
	if err == nil && s.cur.showing == ShowingImage && p.kind == ShowingClip {
		// A clip's last frame, left when it ended: that frame again, as
		// an image (also for a clip of one frame).
		p.kind, p.frame = ShowingImage, min(s.cur.frame, p.clip.Frames()-1)
	}
	if err == nil {
		_, _, err = c.presentFrame(p)
	}
	if err != nil {
		c.mu.Lock()
		if !c.closed {
			c.clearLocked()
		}
		c.mu.Unlock()
	}
	return err
}

// presentFrame is Present for an image that is frame p.frame of its file.
func (c *Controller) presentFrame(p *Prepared) (State, uint64, error) {
	if p.kind != ShowingImage || p.frame == 0 {
		return c.Present(p)
	}
	img, err := p.clip.Frame(min(p.frame, p.clip.Frames()-1))
	if err != nil {
		p.Discard()
		return State{}, 0, api.Errorf(api.ErrNotPlayable, "%s: %v", *p.req.Path, err)
	}
	still := canvas()
	drawCentred(still, img)
	p.Discard()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return State{}, 0, ErrClosed
	}
	c.replaceLocked()
	if err := c.wakeLocked(); err != nil {
		c.log.Warn("screen: waking the panel failed", "err", err)
	}
	c.nextID++
	c.cur = content{id: c.nextID, showing: ShowingImage, path: *p.req.Path, frame: p.frame}
	if err := c.disp.Show(still); err != nil {
		c.log.Warn("screen: drawing failed", "err", err)
	}
	c.publishLocked()
	return c.stateLocked(), c.cur.id, nil
}

func (c *Controller) publishLocked() {
	if c.pub != nil {
		c.pub.SetState(events.KindScreen, c.stateLocked())
	}
}

func (c *Controller) emitLocked(kind string, fields any) {
	if c.pub != nil {
		c.pub.Emit(kind, fields)
	}
}
