package dmx

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// The line is slow: a 115200-baud RS485 line moves 11.5 KB/s, and a
// change sent to one board costs more than its bytes (the reply, the
// turnaround, the re-read of the state that changed). A desk sends each
// universe up to 44 times a second. So the engine never queues looks:
//
//   - each target holds at most one look not yet sent; a newer one
//     replaces it (counted as coalesced);
//   - a target whose look did not change sends nothing; a group fixture
//     is one group frame per line;
//   - DMX sends take at most LineShare of each RS485 line's time, kept by
//     a token bucket of line time per line that refills at LineShare
//     seconds a second, with a burst of burstTime's share. A board called
//     alone on a line costs more than its bytes (the reply, the
//     turnaround, the re-read of what changed), so such sends go one at a
//     time per line and each is charged the time it took (measured:
//     whatever a change costs on that line is what it is charged). A
//     group frame has no reply and takes the line for its wire time: it
//     is charged that (its bytes at the line's baud rate) and group
//     fixtures go out together. A line in debt takes no DMX send until it
//     is repaid; its targets wait with their newest look, while polls and
//     events use the line.
//
// Targets reached over the LAN only are not held back.
const burstTime = 100 * time.Millisecond

// RetryAfter is how long a look whose send did not reach its target waits
// before it is sent again (a newer look replaces it meanwhile).
const RetryAfter = 250 * time.Millisecond

// bucket is one line's DMX budget in seconds of line time; tokens go
// below zero after a send longer than what is left (a send is never
// split), then the line waits until they are back.
type bucket struct {
	rate   float64 // seconds of line time a second: the share
	burst  float64
	tokens float64
	at     time.Time
	busy   bool // a DMX send is on the line
}

func (b *bucket) fill(now time.Time) {
	if !b.at.IsZero() && now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.at).Seconds()*b.rate)
	}
	b.at = now
}

// wait is how long until the bucket is not in debt.
func (b *bucket) wait() time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

func (e *Engine) bucket(line string, now time.Time) *bucket {
	b := e.buckets[line]
	if b == nil {
		burst := e.o.LineShare * burstTime.Seconds()
		b = &bucket{rate: e.o.LineShare, burst: burst, tokens: burst, at: now}
		e.buckets[line] = b
	}
	b.fill(now)
	return b
}

// route is where a fixture's target is: its selector and the lines it
// is on.
func route(f Fixture, boards []fleet.BoardView) (sel fleet.Selector, lines []string, ok bool) {
	onLine := func(v fleet.BoardView) {
		if v.Address > 0 && v.Line != "" && !slices.Contains(lines, v.Line) {
			lines = append(lines, v.Line)
		}
	}
	switch {
	case f.Group != 0:
		sel = fleet.Selector{Groups: []int{f.Group}}
		for _, v := range boards {
			if slices.Contains(v.Groups, f.Group) {
				onLine(v)
			}
		}
	case f.Board != "":
		sel = fleet.Selector{Boards: []string{f.Board}}
		for _, v := range boards {
			if v.ID == f.Board {
				onLine(v)
			}
		}
	case f.Line != "":
		for _, v := range boards {
			if v.Line == f.Line && v.Address == f.LineAddress {
				sel = fleet.Selector{Boards: []string{v.ID}}
				onLine(v)
			}
		}
		if len(sel.Boards) == 0 {
			return sel, nil, false
		}
	default:
		k, v, _ := strings.Cut(f.Label, "=")
		sel = fleet.Selector{Labels: map[string]string{k: v}}
		for _, b := range boards {
			if b.Labels[k] == v {
				onLine(b)
			}
		}
	}
	slices.Sort(lines)
	return sel, lines, true
}

// wireTime is what a group action takes on a line: its native frame's
// bytes (its JSON line's when it has none) at baud, 10 bits a byte.
func wireTime(sel fleet.Selector, a fleet.Action, baud int) time.Duration {
	p, err := fleet.Prepare(sel, a, time.Time{})
	if err != nil {
		return 0
	}
	n := len(p.Body.Request().Body) + 32
	if req, ok := p.Body.Native(); ok {
		if sr, ok := req.(frame.SceneRequest); ok {
			sr.ClipStartUS = 1 // the largest form: a synced scene carries its clip's start
			req = sr
		}
		if b, err := frame.AppendRequest(nil, frame.GroupAddress(1), 0, req); err == nil {
			n = len(b)
		}
	}
	return time.Duration(n) * 10 * time.Second / time.Duration(baud)
}

// job is one target's look to send.
type job struct {
	key     string
	fx      Fixture
	sel     fleet.Selector
	lines   []string
	changes []change
	look    Look
	at, in  time.Time
}

// decide takes the targets whose look may go now (e.mu taken here): not
// busy, a look pending, and every line they are on free of DMX sends and
// not in debt. It marks the targets and their lines busy; the sending
// is the caller's (send, then finish).
func (e *Engine) decide(boards []fleet.BoardView) []job {
	now := e.clk.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var jobs []job
	var again time.Duration
	for _, k := range e.order {
		t := e.targets[k]
		if t.busy || t.pending == nil {
			continue
		}
		if now.Before(t.retryAt) {
			continue // the check tick wakes us after it
		}
		sel, lines, ok := route(t.fx, boards)
		if !ok {
			e.m.dropped.WithLabelValues("unknown_target").Inc()
			t.pending = nil
			continue
		}
		var cs []change
		if t.release {
			cs = []change{{AspectScene, fleet.Action{Kind: fleet.ActionSceneEnd}}}
		} else {
			cs = t.pending.changes(t.sent)
		}
		if len(cs) == 0 {
			t.pending = nil
			continue
		}
		group := t.fx.Group != 0
		free, wait := true, time.Duration(0)
		for _, l := range lines {
			b := e.bucket(l, now)
			free = free && (group || !b.busy)
			wait = max(wait, b.wait())
		}
		if !free {
			continue // the line's send in flight wakes us when done
		}
		if wait > 0 {
			if again == 0 || wait < again {
				again = wait
			}
			continue
		}
		if group {
			var wire time.Duration
			for _, c := range cs {
				wire += wireTime(sel, c.action, e.o.LineBaud)
			}
			for _, l := range lines {
				e.bucket(l, now).tokens -= wire.Seconds()
				e.m.lineTime.WithLabelValues(l).Add(wire.Seconds())
			}
		} else {
			for _, l := range lines {
				e.bucket(l, now).busy = true
			}
		}
		j := job{key: k, fx: t.fx, sel: sel, lines: lines, changes: cs, look: *t.pending, at: t.at, in: t.in}
		if t.release {
			j.look = Look{}
		}
		jobs = append(jobs, j)
		t.busy, t.pending = true, nil
	}
	if again > 0 {
		if e.retry != nil {
			e.retry.Stop()
		}
		e.retry = e.clk.AfterFunc(again, e.signal)
	}
	return jobs
}

// send sends one target's changes, in order, through the fleet (Fleet.Do
// prepares each with fleet.Prepare), then finishes the job.
func (e *Engine) send(ctx context.Context, j job) {
	ok := true
	var last time.Time
	start := e.clk.Now()
	for _, c := range j.changes {
		a := c.action
		a.At = j.at
		if !j.at.IsZero() && j.at.Before(e.clk.Now().Add(-fleet.MaxFirePast)) {
			a.At = time.Time{}
		}
		res, err := e.o.Fleet.Do(ctx, j.sel, a)
		if err != nil {
			ok = false
			e.m.failed.WithLabelValues(j.fx.Kind()).Inc()
			e.log.Warn("dmx: send failed", "target", j.key, "kind", a.Kind, "err", err)
			continue
		}
		for _, r := range res {
			if r.Error != "" {
				// A board's refusal is its answer to this value (a holo
				// not calibrated): it is not asked again until the value
				// changes. A board not reached is asked again (ok false).
				if r.Reply.Status == 0 {
					ok = false
				}
				e.m.failed.WithLabelValues(j.fx.Kind()).Inc()
				e.log.Debug("dmx: change refused", "target", j.key, "kind", a.Kind, "board", r.Board, "error", r.Error, "message", r.Message)
				continue
			}
			e.m.changes.WithLabelValues(j.fx.Kind(), r.Via).Inc()
			if r.FiredAt.After(last) {
				last = r.FiredAt
			}
		}
	}
	end := e.clk.Now()
	if last.IsZero() || j.at.IsZero() {
		last = end // a change now is made when Do returns
	}
	e.m.latency.Observe(last.Sub(j.in).Seconds())
	// A timed send holds the line from its start only up to the moment's
	// wire time; the wait before the moment is not the line's work.
	if !j.at.IsZero() && j.at.After(start) {
		start = j.at
	}
	e.finish(j, ok, max(0, end.Sub(start)))
}

// finish records a job's outcome: the target's state, and the line time
// it took charged to its lines.
func (e *Engine) finish(j job, ok bool, took time.Duration) {
	now := e.clk.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if j.fx.Group == 0 { // a group's wire time was charged when it went
		for _, l := range j.lines {
			b := e.bucket(l, now)
			b.busy = false
			b.tokens -= took.Seconds()
			e.m.lineTime.WithLabelValues(l).Add(took.Seconds())
		}
	}
	if t := e.targets[j.key]; t != nil {
		t.busy = false
		switch {
		case ok && len(j.changes) == 1 && j.changes[0].action.Kind == fleet.ActionSceneEnd:
			t.sent = nil // released: the next look goes out whole
		case ok:
			l := j.look
			t.sent = &l
		default:
			// Not reached: everything is sent again, and this look is
			// tried again after RetryAfter unless a newer one came.
			t.sent = nil
			if t.pending == nil {
				l := j.look
				t.pending, t.release = &l, len(j.changes) == 1 && j.changes[0].action.Kind == fleet.ActionSceneEnd
				t.at, t.in = time.Time{}, j.in
				t.retryAt = now.Add(RetryAfter)
			}
		}
	}
	e.signal()
}
