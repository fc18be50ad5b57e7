package screen

import (
	"image"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/media"
)

// fallbackDelay stands in for a frame delay a file gives as 0.
const fallbackDelay = time.Second / 30

// player plays one clip. Its fields other than stop are guarded by the
// Controller's mutex.
type player struct {
	id       uint64
	path     string
	clip     media.Clip
	plays    int
	stop     chan struct{}
	stopped  bool
	timer    clock.Timer
	start    time.Time // when frame 0 was first drawn
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

// startLocked starts playing clip as content next and emits clip_started.
func (c *Controller) startLocked(clip media.Clip, next content) {
	p := &player{id: next.id, path: next.path, clip: clip, plays: next.plays, stop: make(chan struct{})}
	p.timer = c.clk.NewTimer(time.Hour)
	p.timer.Stop()
	p.counters = Clip{Width: clip.Width(), Height: clip.Height(), Frames: clip.Frames(), Plays: next.plays, FPS: clip.FPS()}
	c.player = p
	c.emitLocked(events.KindClipStarted, ClipStarted{Path: next.path, Loop: next.plays == 0, Plays: next.plays,
		Frames: clip.Frames(), FPS: clip.FPS()})
	c.wg.Add(1)
	go c.play(p)
}

// play is the player's goroutine: decode a frame ahead, wait until it is
// due, draw it; at the end of the last play, tell the watcher and end.
func (c *Controller) play(p *player) {
	defer c.wg.Done()
	defer p.clip.Close()
	img := canvas()
	defer p.timer.Stop()
	// wait arms the timer under the lock, so a halted player never has
	// one armed.
	wait := func(until time.Time) bool {
		c.mu.Lock()
		d := until.Sub(c.clk.Now())
		if p.stopped || d <= 0 {
			c.mu.Unlock()
			return !p.stoppedNow()
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
	frames := p.clip.Frames()
	var due time.Time
	i, pass := 0, 0
	for {
		fr, err := p.clip.Frame(i)
		if err != nil {
			c.failed(p, err)
			return
		}
		drawCentred(img, fr)
		if due.IsZero() {
			due = c.clk.Now()
		}
		if !wait(due) || !c.draw(p, img, due, i == 0 && pass > 0) {
			return
		}
		due = due.Add(delay(p.clip, i))
		i++
		if i < frames {
			continue
		}
		i = 0
		pass++
		if p.plays == 0 || pass < p.plays {
			continue
		}
		// The last frame stays for its delay; then the clip is done.
		if !wait(due) {
			return
		}
		c.finish(p, frames-1)
		return
	}
}

func delay(cl media.Clip, i int) time.Duration {
	if d := cl.Delay(i); d > 0 {
		return d
	}
	return fallbackDelay
}

// draw puts a decoded frame on the panel if p still plays, counting it.
func (c *Controller) draw(p *player, img *image.RGBA, due time.Time, newPass bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.player != p {
		return false
	}
	if err := c.disp.Show(img); err != nil {
		c.log.Warn("screen: drawing a frame failed", "path", p.path, "err", err)
	}
	now := c.clk.Now()
	if p.start.IsZero() {
		p.start = now
	}
	p.counters.Shown++
	if newPass {
		p.counters.Loops++
	}
	if now.Sub(due) > LateSlack {
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
	p.counters.Loops++
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
