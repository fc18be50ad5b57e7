package rs485

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Timed group sends (GroupAt, GroupCallAt).
//
// A timed send asks for the moment its last byte leaves the wire, which is
// when the boards take the frame and change. The scheduler starts writing
// it at that moment less its wire time (the line knows the bytes and the
// baud rate), waiting for the start precisely (clock.Until), and keeps the
// wire free before it: a caller's command starts only when it ends before
// the start even if its board never answers (the request's wire time plus
// the whole reply wait), and a retry only when it fits likewise.
//
// The master's own exchanges (polls, probes, follow-ups) go in the gaps
// between timed sends with a shorter wait (roomFor): the time left before
// the start, less fireReady and the expected reply's wire time to spare,
// as long as that still covers the board's turnaround (Options.Turnaround)
// and the reply; a step starts when at least gapCost is left (35 ms at
// 115200 baud for a poll; a JSON-line fetch 72 ms). So a show's
// timed sends 100 ms apart no longer stop polling and event fetches (they did while a step was costed at a whole
// PollWait, which never fit: TestShowKeepsPolling), and a board that
// answers later than its cut wait still ends its reply before the send.
// Commands that would run into a send wait until after it.
// Within fireReady of the start the scheduler holds the wire and waits for
// the moment; commands arriving then go after the send.
//
// Sends timed for the same moment on one line go one after the other:
// the second ends a frame's wire time late. A send whose start has
// passed when the scheduler reaches it goes at once, late.
const (
	// fireReady is how long before a timed send's start the scheduler
	// stops everything else and waits for the moment itself.
	fireReady = 5 * time.Millisecond
	// stepRequest bounds the request lines the master writes on its own
	// (GET /info, PATCH /link/events with the kinds, GET /time?t1=...),
	// for the cost of a background step.
	stepRequest = 256
)

// ErrBadTime: a timed send without a moment (the zero time).
var ErrBadTime = errors.New("rs485: timed send without a time")

// GroupAt sends req as one frame to a group (1-31) or to every board (0),
// as Group does, so that its last byte leaves the wire at the moment at
// on the line's clock (see the timed sends above). It returns the moment
// the last byte left the wire: when the write started plus the frame's
// wire time. A moment already past sends at once.
func (l *Line) GroupAt(ctx context.Context, group int, req frame.Request, at time.Time) (time.Time, error) {
	a, err := groupAddr(group)
	if err != nil {
		return time.Time{}, err
	}
	if at.IsZero() {
		return time.Time{}, ErrBadTime
	}
	wire, err := frame.AppendRequest(make([]byte, 0, frame.MaxWireLen), a, 0, req)
	if err != nil {
		return time.Time{}, encodeErr(req.Type(), err)
	}
	r := l.submit(ctx, &job{kind: jobGroup, addr: a, req: req, at: at, wire: wire})
	return r.end, r.err
}

// GroupCallAt sends one JSON line to a group (1-31) or every board (0),
// as GroupCall does, so that its line feed leaves the wire at the moment
// at; it returns when it did.
func (l *Line) GroupCallAt(ctx context.Context, group int, method, path string, body []byte, at time.Time) (time.Time, error) {
	a, err := groupAddr(group)
	if err != nil {
		return time.Time{}, err
	}
	if at.IsZero() {
		return time.Time{}, ErrBadTime
	}
	ja := jsonline.All()
	if group != 0 {
		ja = jsonline.Group(uint8(group))
	}
	req, err := lineRequest(ja, method, path, body)
	if err != nil {
		return time.Time{}, err
	}
	req.Tag = ""
	r := l.submit(ctx, &job{kind: jobGroupLine, addr: a, line: req, at: at, wire: jsonline.AppendRequest(nil, req)})
	return r.end, r.err
}

// timedStart is when a timed job starts writing.
func (l *Line) timedStart(j *job) time.Time { return j.at.Add(-l.wireTime(len(j.wire))) }

// jobCost is the longest a command can hold the wire with one attempt:
// its request's wire time and, when a board answers it, the whole reply
// wait.
func (l *Line) jobCost(j *job) time.Duration {
	switch j.kind {
	case jobNative:
		return l.wireTime(frame.MaxWireLen) + l.o.ReplyWait
	case jobLine:
		return l.wireTime(len(jsonline.AppendRequest(nil, j.line))+16) + l.o.ReplyWait
	case jobGroup:
		return l.wireTime(frame.MaxWireLen)
	case jobGroupLine:
		return l.wireTime(len(jsonline.AppendRequest(nil, j.line)))
	}
	return l.o.ReplyWait
}

// queuedCost is jobCost of the i-th queued command.
func (l *Line) queuedCost(i int) time.Duration { return l.jobCost(l.sched.queue[i]) }

// gapLineReply is the JSON-line reply a background exchange in a gap
// before a timed send is costed at (a fetch of a few happenings, a GET
// /leds: some hundred bytes). The cut wait keeps its wire time to spare
// after its end, so such a reply begun as late as the wait's end still
// ends before the send. A longer one begun that late (a fetch of many
// happenings) can run into the send: the known limit of a reply wait cut
// short, where a master cannot stop a board that answers.
const gapLineReply = 256

// gapCost is the least room before a timed send in which the scheduler
// starts a background step: the cheapest, a native poll (its request, the
// board's turnaround, Options.Turnaround, a reply frame and as much again
// to spare, and fireReady), 35 ms at 115200 baud. A step whose exchange
// needs more (a JSON-line fetch: 72 ms) finds no room (roomFor) and
// the scheduler waits for the send; it goes in the next gap. So a gap of
// 100 ms between timed sends carries a poll or two, or a follow-up; at
// 9600 baud a poll needs 142 ms.
func (l *Line) gapCost() time.Duration {
	return fireReady + l.wireTime(2*frame.MaxWireLen) + l.o.Turnaround
}

// roomFor is the reply wait an exchange whose request is req bytes and
// whose reply is expected within reply bytes gets: wait, cut so that it
// ends before the next timed start with fireReady and the reply's wire
// time to spare (a reply begun as the wait ends still ends before the
// start). ok is false when what is left is less than the board's
// turnaround plus the reply's wire time: the exchange does not go.
// Commands were picked to fit with their whole wait (jobCost), so
// theirs is cut by at most fireReady and a reply's wire time; background
// exchanges are cut to the gap.
func (l *Line) roomFor(req, reply int, wait time.Duration) (time.Duration, bool) {
	if len(l.sched.timed) == 0 {
		return wait, true
	}
	room := l.sched.timed[0].start.Sub(l.clk.Now()) - fireReady - l.wireTime(req+reply)
	switch {
	case wait <= room:
		return wait, true
	case room < l.o.Turnaround+l.wireTime(reply):
		return 0, false
	}
	return room, true
}

// queued takes a command off the channel: a timed one into the timed
// list (by start), any other to the back of the queue.
func (l *Line) queued(j *job) {
	s := &l.sched
	if j.at.IsZero() {
		s.queue = append(s.queue, j)
		return
	}
	j.start = l.timedStart(j)
	i, _ := slices.BinarySearchFunc(s.timed, j, func(a, b *job) int { return a.start.Compare(b.start) })
	s.timed = slices.Insert(s.timed, i, j)
	l.setNextFire()
}

// passOver marks the queued commands that do not end before the next
// timed start, budget away (they wait: job.passed).
func (l *Line) passOver(budget time.Duration) {
	for _, j := range l.sched.queue {
		if l.jobCost(j) >= budget {
			j.passed.Store(true)
		}
	}
}

// TimedBusy reports whether timed sends keep the wire now: one is queued
// to start sooner than a command's longest exchange (its request and the
// whole reply wait) would end, so a command would wait for a gap. The
// fleet reaches a board that is also on the LAN over the LAN meanwhile
// (a show's timed actions every 100 ms leave no gap of a reply wait).
func (l *Line) TimedBusy() bool {
	t := l.nextFire.Load()
	return t != nil && !l.clk.Now().Add(l.wireTime(jsonline.MaxLine)+l.o.ReplyWait).Before(*t)
}

// setNextFire publishes the earliest timed start for Group's fast path.
func (l *Line) setNextFire() {
	if len(l.sched.timed) == 0 {
		l.nextFire.Store(nil)
		return
	}
	t := l.sched.timed[0].start
	l.nextFire.Store(&t)
}

// budget is the time left before the earliest timed start (a very long
// time when none is queued), and that job. Timed sends whose callers
// gave up are dropped first (fire would drop them at their start): they
// no longer keep the wire free.
func (l *Line) budget(now time.Time) (time.Duration, *job) {
	kept := l.sched.timed[:0]
	for _, j := range l.sched.timed {
		if err := j.ctx.Err(); err != nil {
			j.finish(result{err: err})
			continue
		}
		kept = append(kept, j)
	}
	if len(kept) < len(l.sched.timed) {
		clear(l.sched.timed[len(kept):])
		l.sched.timed = kept
		l.setNextFire()
	}
	if len(l.sched.timed) == 0 {
		return time.Duration(1<<63 - 1), nil
	}
	j := l.sched.timed[0]
	return j.start.Sub(now), j
}

// fits reports whether something holding the wire for cost, starting
// now, ends before the next timed start.
func (l *Line) fits(cost time.Duration) bool {
	l.drainCmds()
	return l.fitsQueued(cost)
}

// fitsQueued is fits against the timed sends already taken off the
// channel.
func (l *Line) fitsQueued(cost time.Duration) bool {
	if len(l.sched.timed) == 0 {
		return true
	}
	return l.clk.Now().Add(cost).Before(l.sched.timed[0].start)
}

// picked is what the scheduler does next: the timed send, the queued
// command at index job (-1: none), or a background step.
type picked struct {
	fire bool
	job  int
	step bool
}

// pick decides the scheduler's next move from the time left before the
// next timed send (budget; timed says whether there is one), the n
// queued commands and what each may cost (asked only when a timed send
// waits), and what a background step may cost: the timed send once
// within fireReady of its start, else the first command that ends before
// the start, else a step when one fits. Commands come before steps, as
// the package doc says.
func pick(budget time.Duration, timed bool, n int, cost func(i int) time.Duration, step time.Duration) picked {
	if !timed {
		if n > 0 {
			return picked{job: 0}
		}
		return picked{job: -1, step: true}
	}
	if budget <= fireReady {
		return picked{fire: true, job: -1}
	}
	for i := range n {
		if cost(i) < budget {
			return picked{job: i}
		}
	}
	return picked{job: -1, step: budget > step}
}

// idle is how long the scheduler sleeps when it has nothing to do:
// until the next poll cycle is due (untilPoll), but no later than it must
// start waiting for a timed send; while no step fits before the send,
// until then.
func idle(budget time.Duration, timed bool, untilPoll, step time.Duration) time.Duration {
	wait := max(untilPoll, time.Millisecond)
	if !timed {
		return wait
	}
	if budget <= step {
		return max(budget-fireReady, 0)
	}
	return max(min(wait, budget-fireReady), 0)
}

// fire runs the first timed job: it holds the wire, waits for the start
// and writes the bytes. The result carries when the last byte left.
func (l *Line) fire(ctx context.Context, j *job) {
	s := &l.sched
	s.timed = s.timed[1:]
	l.setNextFire()
	if err := j.ctx.Err(); err != nil {
		j.finish(result{err: err})
		return
	}
	l.wire.Lock()
	defer l.wire.Unlock()
	l.applyMarks()
	jctx, cancel := context.WithCancel(j.ctx)
	stop := context.AfterFunc(ctx, cancel)
	defer func() { stop(); cancel() }()
	if err := clock.Until(jctx, l.clk, j.start); err != nil {
		j.finish(result{err: err})
		return
	}
	began := l.clk.Now()
	err := l.send(j.wire, j.kind == jobGroupLine)
	if err != nil {
		j.finish(result{err: err})
		return
	}
	switch j.kind {
	case jobGroup:
		l.afterGroup(j.addr, kindsOfNative(j.req.Type()), groupSend{req: j.req}, l.clk.Now())
	case jobGroupLine:
		l.afterGroup(j.addr, kindsOfPath(j.line.Method, j.line.Path), groupSend{line: &j.line}, l.clk.Now())
	}
	l.st.fired.Add(1)
	j.finish(result{end: began.Add(l.wireTime(len(j.wire)))})
}

// fastPathFits reports whether a frame of n bytes written now by Group's
// fast path ends before the next timed start (with fireReady to spare).
func (l *Line) fastPathFits(n int) bool {
	t := l.nextFire.Load()
	return t == nil || l.clk.Now().Add(l.wireTime(n)+fireReady).Before(*t)
}

// dropQueued finishes every command still queued with err (the line
// stops).
func (l *Line) dropQueued(err error) {
	s := &l.sched
	for _, j := range s.queue {
		j.finish(result{err: err})
	}
	for _, j := range s.timed {
		j.finish(result{err: err})
	}
	s.queue, s.timed = nil, nil
	l.nextFire.Store(nil)
}

var _ fleet.TimedLine = (*Line)(nil)
