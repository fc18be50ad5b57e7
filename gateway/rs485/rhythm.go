package rs485

import "time"

// The rhythm of group frames.
//
// A lighting desk sends its universe at a steady rate, and the DMX
// gateway turns each change of a group fixture into group frames on the
// line, so group frames come in a rhythm the line can observe. A
// background exchange that is not urgent (a member's re-read, a clock
// sample or its alignment) holds the wire for a request, a reply of up
// to a hundred bytes or more and the board's turnaround: over 10 ms at
// 115200 baud. Started just before the next look, it makes the look
// wait for it. So while group frames keep a rhythm, such an exchange
// starts only when it would end before the next frame is expected (less
// a guard for the desk's and the host's jitter), or once that moment has
// passed without a frame; polls, event fetches and the board's other
// follow-ups are not held (the line keeps polling and handing events
// over). An exchange held for Options.GroupReread goes anyway, so a
// rhythm too fast to leave a gap (a desk changing a group every DMX
// frame) delays the re-reads but never starves them.
const (
	// rhythmBurst: group frames closer than this are one look's frames
	// (written back to back), not a beat of the rhythm.
	rhythmBurst = 3 * time.Millisecond
	// rhythmLongest: frames further apart than this keep no rhythm worth
	// keeping the wire free for.
	rhythmLongest = 500 * time.Millisecond
	// rhythmExchange bounds the bytes of a held exchange (request and
	// reply) for its expected wire time; rhythmTurnaround is the
	// board's expected turnaround on top.
	rhythmExchange   = 192
	rhythmTurnaround = 2 * time.Millisecond
)

// rhythm is the observed rhythm of group frames; the scheduler owns it.
type rhythm struct {
	last      time.Time     // the last beat: a look's first group frame
	period    time.Duration // between the last two beats (0: none yet)
	heldSince time.Time     // when a held exchange was first held (zero: none)
}

// saw takes a group frame sent at at.
func (r *rhythm) saw(at time.Time) {
	if !r.last.IsZero() {
		d := at.Sub(r.last)
		if d < rhythmBurst {
			return
		}
		r.period = d
	}
	r.last = at
}

// guard is how early before the expected beat the wire is kept free.
func (r *rhythm) guard() time.Duration { return r.period / 8 }

// holds reports whether an exchange expected to take cost, started at
// now, would run into the next expected group frame, and so waits; one
// held for most (or longer) goes.
func (r *rhythm) holds(now time.Time, cost, most time.Duration) bool {
	if r.period <= 0 || r.period > rhythmLongest {
		return false
	}
	next := r.last.Add(r.period)
	if now.After(next.Add(r.guard())) || now.Add(cost).Before(next.Add(-r.guard())) {
		r.heldSince = time.Time{}
		return false
	}
	if r.heldSince.IsZero() {
		r.heldSince = now
	}
	if now.Sub(r.heldSince) >= most {
		r.heldSince = time.Time{}
		return false
	}
	return true
}

// reopens is how long from now until a held exchange may go: the end of
// the guard after the expected beat (the next frame, when it comes, opens
// the wire sooner).
func (r *rhythm) reopens(now time.Time) time.Duration {
	return r.last.Add(r.period + r.guard()).Sub(now)
}

// heldWork is what rhythm may hold of a board's follow-ups: the
// re-reads (board.dirty) and these needs.
const heldWork = needClock | needAlign

// rhythmCost is the expected time a held exchange keeps the wire.
func (l *Line) rhythmCost() time.Duration {
	return l.wireTime(rhythmExchange) + rhythmTurnaround
}
