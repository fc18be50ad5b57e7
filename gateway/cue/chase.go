package cue

import (
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/timecode"
)

// Timecode chase. Every list with a cue carrying a timecode follows the
// incoming timecode:
//
//	incoming frame                          the list
//	the first, or after the chase stopped   chases: fires the last cue at or before it
//	forward by at most one second           fires, in order, every cue passed since the
//	                                        frame before (after it, up to this one)
//	back, or forward by more than a second  chases (a jump): fires the last cue at or
//	                                        before the new position, none in between
//	the same frame again                    nothing
//	back by at most the frames the chase    the source catching up: the chase locks
//	ran on by itself (freewheeling)         again where it is, firing nothing, until
//	                                        the source reaches its position
//
// After each frame the standby is the cue after the last one at or
// before the position. When frames stop coming for one and a half frame
// times the chase freewheels: it moves on one frame per frame time on the
// gateway's clock, firing what it passes, for Options.Freewheel frames,
// then stops (the next frame chases, unless it is the source catching up
// with where the chase ran on to: a sender the host kept off the
// processor, whose late frames must not fire the cue before the one the
// chase passed, then that one again). A cue fired by timecode fires at
// once (its pre-wait and follow are not used): the frame that passes it
// is its moment.

// Chase states.
const (
	ChaseLocked    = "locked"
	ChaseFreewheel = "freewheel"
	ChaseStopped   = "stopped"
)

// Chase is a list's view of the timecode it follows.
type Chase struct {
	// Source names where it comes from ("artnet", "osc").
	Source string `json:"source"`
	// Rate is the source's rate: "24", "25", "29.97df", "30".
	Rate     string `json:"rate"`
	Position string `json:"position"`
	Status   string `json:"status"`
}

type chase struct {
	have   bool
	tc     timecode.Timecode
	source string
	status string
	frames int // frames freewheeled since the last one received
	// ahead is how many frames the position is ahead of the source's
	// last frame (the frames freewheeled past it, or left to catch up).
	ahead int
	timer clock.Timer
}

func (c *chase) stop() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

func (c *chase) view() *Chase {
	if !c.have {
		return nil
	}
	return &Chase{Source: c.source, Rate: c.tc.Rate.String(), Position: c.tc.String(), Status: c.status}
}

// chases reports whether a list follows timecode.
func (l *List) chases() bool {
	for _, c := range l.Cues {
		if c.Timecode != "" {
			return true
		}
	}
	return false
}

// Timecode takes one frame of timecode from source: every list with
// timecoded cues follows it (see above). A timecode that does not Check
// is refused with its error.
func (e *Engine) Timecode(source string, t timecode.Timecode) error {
	if err := t.Check(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	for _, ls := range e.lists {
		if ls.l.chases() {
			e.follow(ls, source, t, false)
		}
	}
	e.yieldToFire()
	return nil
}

// follow moves ls's chase to t. e.mu is held.
func (e *Engine) follow(ls *list, source string, t timecode.Timecode, freewheel bool) {
	c := &ls.chase
	before := ls.standby
	had := c.have && c.status != ChaseStopped
	ahead := 0
	if !freewheel {
		ahead = c.ahead
	}
	step := decideChase(ls.l.Cues, c.tc, had, ahead, t)
	if step.same || step.behind > 0 {
		if !freewheel {
			// The same frame, or a late one catching up: the position
			// stays, the chase is locked to the source again.
			c.frames, c.ahead, c.source = 0, step.behind, source
			changed := c.status != ChaseLocked
			c.status = ChaseLocked
			e.armFreewheel(ls, t.Rate.FrameDuration()*3/2)
			if changed {
				e.publish(ls, EventTimecode, e.standbyNumber(ls))
			}
		}
		return
	}
	now := e.clk.Now()
	for _, i := range step.fire {
		e.schedule(ls, ls.l.Cues[i], now, now, false)
	}
	if step.standby >= 0 {
		ls.standby = step.standby
	}
	if ls.standby != before {
		e.touch(ls.l.Name)
	}
	c.have, c.tc, c.source = true, t, source
	if freewheel {
		c.status = ChaseFreewheel
		c.ahead++
		return
	}
	c.frames, c.ahead = 0, 0
	changed := c.status != ChaseLocked
	c.status = ChaseLocked
	e.armFreewheel(ls, t.Rate.FrameDuration()*3/2)
	if changed || !had || len(ls.runs) > 0 {
		e.publish(ls, EventTimecode, e.standbyNumber(ls))
	}
}

// chaseStep is what one frame does to a list: the cues to fire, in
// order, and the standby after (-1: unchanged); same for a repeated frame;
// behind, the frames a late frame of the source is behind the position
// (catching up: nothing fires, the position stays).
type chaseStep struct {
	fire    []int
	standby int
	same    bool
	behind  int
}

// decideChase decides a frame t for cues after the frame prev (had: the
// chase is running; ahead: how many frames prev is ahead of the source's
// last frame, having freewheeled), as the table at the top of this file
// says. It is pure: follow does what it decides.
func decideChase(cues []Cue, prev timecode.Timecode, had bool, ahead int, t timecode.Timecode) chaseStep {
	k := tcKey(t)
	switch {
	case had && prev == t:
		return chaseStep{same: true, standby: -1}
	case ahead > 0 && prev.Rate == t.Rate && t.Count() < prev.Count() && prev.Count()-t.Count() <= int64(ahead):
		return chaseStep{standby: -1, behind: int(prev.Count() - t.Count())}
	case had && prev.Rate == t.Rate && t.Count() > prev.Count() && t.Count()-prev.Count() <= int64(t.Rate.FPS()):
		step := chaseStep{standby: -1}
		lo := tcKey(prev)
		for i, c := range cues {
			if ck, ok := cueKey(c); ok && ck > lo && ck <= k {
				step.fire = append(step.fire, i)
				step.standby = i + 1
			}
		}
		return step
	}
	// A jump, or the first frame: chase to the last timecoded cue at or
	// before the position; the standby is the cue after it (the first
	// cue when none is).
	at := -1
	for i, c := range cues {
		if ck, ok := cueKey(c); ok && ck <= k {
			at = i
		}
	}
	step := chaseStep{standby: at + 1}
	if at >= 0 {
		step.fire = []int{at}
	}
	return step
}

// cueKey is the order of a cue's timecode label.
func cueKey(c Cue) (int64, bool) {
	if c.Timecode == "" {
		return 0, false
	}
	t, err := timecode.Parse(c.Timecode, timecode.SMPTE)
	if err != nil {
		return 0, false
	}
	return tcKey(t), true
}

// armFreewheel (re)starts the timer that moves the chase on by itself
// when frames stop. e.mu is held.
func (e *Engine) armFreewheel(ls *list, d time.Duration) {
	c := &ls.chase
	c.stop()
	name := ls.l.Name
	var tm clock.Timer
	tm = e.clk.AfterFunc(d, func() {
		e.mu.Lock()
		cur := e.lists[name]
		if e.closed || cur == nil || cur.chase.timer != tm {
			e.mu.Unlock()
			return // a frame came, or the list went
		}
		e.freewheel(cur)
		e.yieldToFire()
	})
	c.timer = tm
}

// freewheel moves the chase one frame on, or stops it. e.mu is held.
func (e *Engine) freewheel(ls *list) {
	c := &ls.chase
	if c.frames >= e.o.Freewheel {
		c.timer = nil
		c.status = ChaseStopped
		e.publish(ls, EventTimecode, e.standbyNumber(ls))
		return
	}
	c.frames++
	next := timecode.FromCount(c.tc.Count()+1, c.tc.Rate)
	wasFreewheeling := c.status == ChaseFreewheel
	e.follow(ls, c.source, next, true)
	if !wasFreewheeling {
		e.publish(ls, EventTimecode, e.standbyNumber(ls))
	}
	e.armFreewheel(ls, c.tc.Rate.FrameDuration())
}
