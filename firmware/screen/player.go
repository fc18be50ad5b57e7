package screen

import (
	"image"
	"sort"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/media"
)

// fallbackDelay stands in for a frame delay a file gives as 0.
const fallbackDelay = time.Second / 30

// holdSlack is how much later than a frame's due time the aligned clock
// may put it before the wait counts as a hold: it covers the µs rounding
// of the aligned clock.
const holdSlack = 100 * time.Microsecond

// player plays one clip. Its fields other than stop are guarded by the
// Controller's mutex, except the timeline (anchor, startUS, synced, cum),
// which is set before the player's goroutine starts or by it alone.
type player struct {
	id      uint64
	path    string
	clip    media.Clip
	plays   int
	stop    chan struct{}
	stopped bool
	timer   clock.Timer
	start   time.Time // when the first frame was drawn
	// The timeline: position 0 is anchor on the board's clock, or, when
	// synced, startUS on the aligned clock (the gateway's time, Unix µs).
	anchor   time.Time
	startUS  int64
	synced   bool
	cum      []time.Duration // cum[i]: frame i's due time in one play; cum[frames]: a play
	counters Clip
	finished bool // every play done
}

// halt stops the player; the Controller's mutex is held.
func (p *player) halt() {
	if !p.stopped {
		p.stopped = true
		close(p.stop)
		p.timer.Stop()
	}
}

func (p *player) stoppedNow() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// startLocked starts playing clip as content next, its timeline anchored
// at at (zero: now), and emits clip_started.
func (c *Controller) startLocked(clip media.Clip, next content, at time.Time) {
	p := &player{id: next.id, path: next.path, clip: clip, plays: next.plays, stop: make(chan struct{})}
	p.timer = c.clk.NewTimer(time.Hour)
	p.timer.Stop()
	p.counters = Clip{Width: clip.Width(), Height: clip.Height(), Frames: clip.Frames(), Plays: next.plays, FPS: clip.FPS()}
	frames := clip.Frames()
	p.cum = make([]time.Duration, frames+1)
	for i := range frames {
		p.cum[i+1] = p.cum[i] + delay(clip, i)
	}
	if at.IsZero() {
		at = c.clk.Now() // started now: frame 0 is due now
	}
	c.anchor(p, at)
	c.player = p
	c.emitLocked(events.KindClipStarted, ClipStarted{Path: next.path, Loop: next.plays == 0, Plays: next.plays,
		Frames: clip.Frames(), FPS: clip.FPS()})
	c.wg.Add(1)
	go c.play(p)
}

// anchor sets p's timeline to start at at on the board's clock, and on
// the aligned clock when the board is aligned now.
func (c *Controller) anchor(p *player, at time.Time) {
	p.anchor = at
	if c.align != nil {
		p.startUS, p.synced = c.align.AlignedAt(at)
	}
	p.counters.Synced = p.synced
	if p.synced {
		s := p.startUS
		p.counters.StartUS = &s
	}
}

// pos is the clip's position at now on its timeline: the aligned clock's
// time since the start when synced (a new alignment moves it), else the
// board clock's.
func (c *Controller) pos(p *player, now time.Time) time.Duration {
	if p.synced {
		if us, ok := c.align.AlignedAt(now); ok {
			return time.Duration(us-p.startUS) * time.Microsecond
		}
	}
	return now.Sub(p.anchor)
}

// frameAt is the frame number (counted from the start, across plays) due
// at position d; before the start it is frame 0.
func (p *player) frameAt(d time.Duration) int {
	frames := len(p.cum) - 1
	if d <= 0 {
		return 0
	}
	play := p.cum[frames]
	pass := int(d / play)
	within := d - time.Duration(pass)*play
	i := sort.Search(frames, func(i int) bool { return p.cum[i+1] > within })
	return pass*frames + i
}

// dueAt is the position at which frame number n is due.
func (p *player) dueAt(n int) time.Duration {
	frames := len(p.cum) - 1
	return time.Duration(n/frames)*p.cum[frames] + p.cum[n%frames]
}

// play is the player's goroutine. Which frame is on the panel is derived
// from the clip's position on its timeline, never from counting frames:
// it decodes the frame due next (or, when it fell behind, the one due
// now, dropping those in between), waits until its position comes, and
// draws it; a timeline put back by a new alignment holds the frame on the
// panel until it is due again. At the end of the last play it tells the
// watcher and ends.
func (c *Controller) play(p *player) {
	defer c.wg.Done()
	defer p.clip.Close()
	img := canvas()
	defer p.timer.Stop()
	// sleep arms the timer under the lock, so a halted player never has
	// one armed.
	sleep := func(d time.Duration) bool {
		c.mu.Lock()
		if p.stopped {
			c.mu.Unlock()
			return false
		}
		p.timer.Reset(d)
		c.mu.Unlock()
		select {
		case <-p.stop:
			return false
		case <-p.timer.C():
			return true
		}
	}
	// until waits until position due; held reports that the timeline was
	// put back while it waited, slept that it waited at all.
	until := func(due time.Duration) (ok, held, slept bool) {
		for ; ; slept = true {
			d := due - c.pos(p, c.clk.Now())
			if d <= 0 {
				return !p.stoppedNow(), held, slept
			}
			if slept && d > holdSlack {
				held = true
			}
			if !sleep(d) {
				return false, held, slept
			}
		}
	}
	frames := p.clip.Frames()
	end := -1 // the frame number past the last play
	if p.plays > 0 {
		end = p.plays * frames
	}
	next := 0
	for {
		target := max(next, p.frameAt(c.pos(p, c.clk.Now())))
		if end >= 0 && target >= end {
			// The last frame stays for its delay; then the clip is done.
			if ok, _, _ := until(p.dueAt(end)); !ok {
				return
			}
			c.finish(p, c.shownFrame(p)%frames)
			return
		}
		fr, err := p.clip.Frame(target % frames)
		if err != nil {
			c.failed(p, err)
			return
		}
		drawCentred(img, fr)
		due := p.dueAt(target)
		ok, held, slept := until(due)
		if !ok {
			return
		}
		pos := c.pos(p, c.clk.Now())
		if slept && p.frameAt(pos) > target {
			// Woken past a later frame's time (the aligned clock was put
			// on, or the wake came late): that frame instead. A decoder
			// slower than the clip never sleeps, so this never chases.
			continue
		}
		if !c.draw(p, img, target, target-next, held, pos-due) {
			return
		}
		next = target + 1
	}
}

// shownFrame is the frame number on the panel.
func (c *Controller) shownFrame(p *player) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return p.counters.Frame
}

func delay(cl media.Clip, i int) time.Duration {
	if d := cl.Delay(i); d > 0 {
		return d
	}
	return fallbackDelay
}

// draw puts frame number n, decoded in img, on the panel if p still plays,
// counting it: dropped frames were skipped before it, held tells that it
// waited longer than its due time, late how long after its due time it
// is drawn.
func (c *Controller) draw(p *player, img *image.RGBA, n, dropped int, held bool, late time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.player != p {
		return false
	}
	if err := c.disp.Show(img); err != nil {
		c.log.Warn("screen: drawing a frame failed", "path", p.path, "err", err)
	}
	if p.start.IsZero() {
		p.start = c.clk.Now()
	}
	p.counters.Shown++
	p.counters.Frame = n
	p.counters.Loops = n / len(p.cum[1:])
	p.counters.Dropped += dropped
	if held {
		p.counters.Held++
	}
	if late > LateSlack {
		p.counters.Late++
	}
	return true
}

// finish ends a clip that played all its plays: the watcher hears first
// (a scene may end and restore, replacing the clip), then, unless
// replaced, the last frame stays as an image and clip_ended is emitted.
func (c *Controller) finish(p *player, last int) {
	c.mu.Lock()
	if c.player != p {
		c.mu.Unlock()
		return
	}
	p.finished = true
	p.counters.Loops = p.plays
	w := c.watcher
	c.mu.Unlock()
	if w != nil {
		w.Finished(p.id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.player != p {
		return
	}
	c.player = nil
	p.halt()
	c.cur = content{id: c.cur.id, showing: ShowingImage, path: p.path, frame: last}
	c.emitLocked(events.KindClipEnded, ClipEnded{Path: p.path, Finished: true})
	c.publishLocked()
}

// failed stops a clip whose frame could not be decoded: the panel shows
// nothing.
func (c *Controller) failed(p *player, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.player != p {
		return
	}
	c.log.Warn("screen: clip stopped: a frame did not decode", "path", p.path, "err", err)
	c.clearLocked()
}

// Timeline is where the clip playing is on its timeline, for diagnostics
// and tests (the same figures as the state's clip-sync fields, with the
// board clock's view beside the aligned one).
type Timeline struct {
	// Anchor is the clip's start on the Controller's clock.
	Anchor time.Time
	// Synced and StartUS: the clip follows the aligned clock and started
	// at StartUS on it (Unix µs).
	Synced  bool
	StartUS int64
	// Position is the clip's position now on the clock it follows;
	// OwnPosition the same on the board's own clock alone (what a player
	// without alignment would show).
	Position, OwnPosition time.Duration
	// Frame is the frame number on the panel, FrameDue the one due now.
	Frame, FrameDue int
}

// ClipTimeline returns the timeline of the clip playing; ok is false when
// none plays.
func (c *Controller) ClipTimeline() (tl Timeline, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.player
	if p == nil {
		return Timeline{}, false
	}
	now := c.clk.Now()
	pos := c.pos(p, now)
	return Timeline{Anchor: p.anchor, Synced: p.synced, StartUS: p.startUS, Position: pos,
		OwnPosition: now.Sub(p.anchor), Frame: p.counters.Frame, FrameDue: p.frameAt(pos)}, true
}
