package dmx

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// The line is slow: a 115200-baud RS485 line moves 11.5 KB/s, a DMX
// universe arrives 44 times a second. So the engine never queues looks:
// each target holds at most one look not yet sent (a newer one replaces
// it, counted as coalesced), a target whose look did not change sends
// nothing, a group fixture is one group frame per line, and the DMX sends
// on a line are held to a share of its capacity (a token bucket of bytes
// per line, LineShare x baud/10 bytes a second, a burst of burstTime's
// worth). A target whose line has no budget left waits, keeping only its
// newest look, until the bucket refills.
const burstTime = 100 * time.Millisecond

// bucket is one line's DMX budget in bytes; tokens may go below zero
// (a send is never split), then the line waits until they are back.
type bucket struct {
	rate   float64 // bytes per second
	burst  float64
	tokens float64
	at     time.Time
}

func (b *bucket) fill(now time.Time) {
	if !b.at.IsZero() {
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
		rate := e.o.LineShare * float64(e.o.LineBaud) / 10
		b = &bucket{rate: rate, burst: max(64, rate*burstTime.Seconds()), tokens: max(64, rate*burstTime.Seconds()), at: now}
		e.buckets[line] = b
	}
	b.fill(now)
	return b
}

// route is where a fixture's target is: its selector and, per line it
// is on, the bytes one change costs there.
func route(f Fixture, boards []fleet.BoardView) (sel fleet.Selector, lines map[string]int, ok bool) {
	lines = map[string]int{}
	onLine := func(v fleet.BoardView, perBoard bool) {
		if v.Address > 0 && v.Line != "" {
			if perBoard {
				lines[v.Line] += 2 // a call and its reply
			} else {
				lines[v.Line] = 1 // one group frame
			}
		}
	}
	switch {
	case f.Group != 0:
		sel = fleet.Selector{Groups: []int{f.Group}}
		for _, v := range boards {
			if slices.Contains(v.Groups, f.Group) {
				onLine(v, false)
			}
		}
	case f.Board != "":
		sel = fleet.Selector{Boards: []string{f.Board}}
		for _, v := range boards {
			if v.ID == f.Board {
				onLine(v, true)
			}
		}
	case f.Line != "":
		for _, v := range boards {
			if v.Line == f.Line && v.Address == f.LineAddress {
				sel = fleet.Selector{Boards: []string{v.ID}}
				onLine(v, true)
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
				onLine(b, true)
			}
		}
	}
	return sel, lines, true
}

// frameBytes is what one change weighs on a line: its native frame, or
// its JSON body and a header when it has none.
func frameBytes(sel fleet.Selector, a fleet.Action) (int, error) {
	p, err := fleet.Prepare(sel, a, time.Time{})
	if err != nil {
		return 0, err
	}
	if req, ok := p.Body.Native(); ok {
		if b, err := frame.AppendRequest(nil, frame.GroupAddress(1), 0, req); err == nil {
			return len(b), nil
		}
	}
	return len(p.Body.Request().Body) + 24, nil
}

// decide takes the targets whose look may go now (e.mu taken here): not
// busy, a look pending, budget on every line they are on. It charges
// the lines and marks the targets busy; the sending is the caller's.
func (e *Engine) decide(boards []fleet.BoardView) []job {
	now := e.clk.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var jobs []job
	var again time.Duration
	for _, k := range slices.Sorted(maps.Keys(e.targets)) {
		t := e.targets[k]
		if t.busy || t.pending == nil {
			continue
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
		wait := time.Duration(0)
		for _, l := range slices.Sorted(maps.Keys(lines)) {
			wait = max(wait, e.bucket(l, now).wait())
		}
		if wait > 0 {
			if again == 0 || wait < again {
				again = wait
			}
			continue
		}
		cost := 0
		for _, c := range cs {
			n, err := frameBytes(sel, c.action)
			if err != nil {
				e.log.Error("dmx: a look makes a bad action", "target", k, "err", err)
				n = 0
			}
			cost += n
		}
		for l, per := range lines {
			e.bucket(l, now).tokens -= float64(cost * per)
		}
		jobs = append(jobs, job{key: k, fx: t.fx, sel: sel, changes: cs, look: *t.pending, at: t.at, in: t.in})
		if t.release {
			jobs[len(jobs)-1].look = Look{}
		}
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

// send sends one target's changes, in order, through the fleet; every
// action goes through Fleet.Do, which prepares it (fleet.Prepare).
func (e *Engine) send(ctx context.Context, j job) {
	ok := true
	var last time.Time
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
	if last.IsZero() || j.at.IsZero() {
		last = e.clk.Now() // a change now is made when Do returns
	}
	e.m.latency.Observe(last.Sub(j.in).Seconds())
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.targets[j.key]; t != nil {
		t.busy = false
		switch {
		case ok && j.changes[0].action.Kind == fleet.ActionSceneEnd && len(j.changes) == 1:
			t.sent = nil // released: the next look goes out whole
		case ok:
			l := j.look
			t.sent = &l
		default:
			t.sent = nil
		}
	}
	e.signal()
}
