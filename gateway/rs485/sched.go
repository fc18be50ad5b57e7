package rs485

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// need is a follow-up a board waits for, in order of the bits.
type need uint16

const (
	needPing   need = 1 << iota // uptime: did it restart?
	needStatus                  // STATUS: the block later polls compare with
	needInfo                    // GET /info, then Seen
	needLink                    // GET /link (groups), then Changed "link"
	needEvents                  // PATCH /link/events
	needReplay                  // GET /events after a restart
	needFetch                   // GET /link/events
	needClock                   // GET /time: one clock sample, after everything else
	// needPolled: a STATUS compared with the last block, after a poll
	// that was a PING (which carries none), so that a change is seen
	// within the cycle it happened in.
	needPolled
	// needAlign: PUT /time, the alignment the last clock sample gave
	// (extension clip-sync), as a follow-up of its own.
	needAlign
)

// kinds is a set of resources to re-read.
type kinds uint8

const (
	kScreen kinds = 1 << iota
	kLEDs
	kHolo
	kScenes
	kAll = kScreen | kLEDs | kHolo | kScenes
)

// resources are the re-readable states: Changed kind and path.
var resources = []struct {
	bit  kinds
	kind string
	path string
}{
	{kScreen, "screen", "/screen"},
	{kLEDs, "leds", "/leds"},
	{kHolo, "holo", "/holo"},
	{kScenes, "scenes", "/scenes"},
}

// board is what the master knows of one address. The scheduler goroutine
// owns it; present is also read under Line.mu.
type board struct {
	addr int
	ref  fleet.Ref
	id   string // the board's id once GET /info gave it (for logs)

	present bool // answering (until it misses MissLimit polls)
	seen    bool // Seen reported since the last Lost
	fresh   bool // events never enabled: the first enable sets the baseline
	misses  int
	polls   int

	uptime     uint32
	uptimeAt   time.Time // when uptime was heard (the master's clock)
	haveUptime bool
	// unsure: the board missed an exchange since it was last identified;
	// when it answers a poll again it is asked for its uptime and its id
	// (another board may answer at the address now: a swap).
	unsure bool
	// otherID is an id GET /info gave that is not the board's: believed
	// (the board was replaced) only when the next read gives it again.
	otherID string
	// booted: a new boot was seen (uptime, event numbers) and is told to
	// the sink once GET /info says whose boot it was.
	booted bool

	status     frame.StatusBlock
	haveStatus bool
	// missCheck: a group scene start to check the next status block for
	// (repair.go).
	missCheck *missCheck

	lastSeq     uint16 // last happening given to the sink
	fetchFailed bool   // no fetch reply believed since one may have been lost: fetch by seq
	doubts      int    // fetch replies doubted since happenings last reached the sink
	groups      []int
	// replayFloor (ms of the board's uptime, 0: none): the replay of kept
	// happenings at the master's start (Options.ReplayKept) leaves out
	// those older (their t_ms; fleet.ReplayFloor).
	replayFloor int64

	clock boardClock

	needs   need
	hold    time.Time // follow-ups wait until then after one got no reply
	dirty   kinds     // re-read now
	recheck kinds     // re-read after the next poll

	// Group frames' re-reads (Options.GroupQuiet): the kinds group frames
	// changed since the board was last read back, when the first and the
	// last of those frames went, and when group frames' kinds were last
	// read back.
	grouped      kinds
	groupedFirst time.Time
	groupedLast  time.Time
	groupedRead  time.Time
}

type scheduler struct {
	sink fleet.Sink
	// queue holds callers' commands in arrival order; timed holds the
	// timed sends by start (timed.go).
	queue      []*job
	timed      []*job
	sweep      []int // initial discovery left
	late       []int // addresses whose PING reply came after its wait
	cycle      []int // boards left in this poll cycle
	cycleStart time.Time
	started    bool
	probeAt    int // slow sweep position in Options.Addresses
	// noRoom: a step's exchange did not fit before the next timed send
	// (roomFor); the scheduler waits for the send.
	noRoom bool
	// rhythm is the group frames' rhythm (rhythm.go); held says the last
	// needy held a board's re-reads or clock sample for it.
	rhythm rhythm
	held   bool
}

func newScheduler(l *Line) scheduler {
	return scheduler{sweep: slices.Clone(l.o.Addresses)}
}

func (l *Line) loop(ctx context.Context, sink fleet.Sink) {
	l.sched.sink = sink
	for ctx.Err() == nil {
		l.applyMarks()
		l.drainCmds()
		budget, next := l.budget(l.clk.Now())
		p := pick(budget, next != nil, len(l.sched.queue), l.queuedCost, l.gapCost())
		if next != nil {
			l.passOver(budget)
		}
		switch {
		case p.fire:
			l.fire(ctx, next)
			continue
		case p.job >= 0:
			j := l.sched.queue[p.job]
			l.sched.queue = slices.Delete(l.sched.queue, p.job, p.job+1)
			l.lockedJob(ctx, j)
			continue
		case p.step:
			l.wire.Lock()
			l.applyMarks()
			l.sched.noRoom = false
			did := l.step(ctx)
			l.wire.Unlock()
			if did && !l.sched.noRoom {
				continue
			}
		}
		gap := l.gapCost()
		if l.sched.noRoom {
			l.sched.noRoom = false
			budget, next = l.budget(l.clk.Now())
			gap = max(gap, budget)
		}
		wait := idle(budget, next != nil, l.o.PollInterval-l.clk.Since(l.sched.cycleStart), gap)
		if l.sched.held {
			wait = min(wait, max(l.sched.rhythm.reopens(l.clk.Now()), time.Millisecond))
		}
		t := l.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
		case j := <-l.cmds:
			l.queued(j)
		case <-t.C():
		}
		t.Stop()
	}
}

// drainCmds takes every command waiting on the channel into the
// scheduler's queues.
func (l *Line) drainCmds() {
	for {
		select {
		case j := <-l.cmds:
			l.queued(j)
		default:
			return
		}
	}
}

func (l *Line) lockedJob(ctx context.Context, j *job) {
	l.wire.Lock()
	defer l.wire.Unlock()
	l.applyMarks()
	l.runJob(ctx, j)
}

// step does one background exchange; false when nothing is due.
func (l *Line) step(ctx context.Context) bool {
	s := &l.sched
	if b := l.needy(); b != nil {
		l.follow(ctx, b)
		return true
	}
	if len(s.late) > 0 {
		a := s.late[0]
		s.late = s.late[1:]
		if b := l.boards[a]; b == nil || !b.present {
			l.probe(ctx, a, l.o.PollWait)
			if s.noRoom {
				s.late = slices.Insert(s.late, 0, a) // not sent
			}
			return true
		}
	}
	if len(s.sweep) > 0 {
		a := s.sweep[0]
		s.sweep = s.sweep[1:]
		l.probe(ctx, a, l.o.DiscoverWait)
		if s.noRoom {
			s.sweep = slices.Insert(s.sweep, 0, a) // not sent
		}
		return true
	}
	if len(s.cycle) > 0 {
		a := s.cycle[0]
		s.cycle = s.cycle[1:]
		l.poll(ctx, a)
		if len(s.cycle) == 0 {
			l.mu.Lock()
			l.cycle = l.clk.Since(s.cycleStart)
			l.mu.Unlock()
		}
		return true
	}
	if s.started && l.clk.Since(s.cycleStart) < l.o.PollInterval {
		return false
	}
	s.started = true
	s.cycleStart = l.clk.Now()
	for _, a := range l.o.Addresses {
		if b := l.boards[a]; b != nil && b.present {
			s.cycle = append(s.cycle, a)
		}
	}
	probed := l.slowProbe(ctx)
	return probed || len(s.cycle) > 0
}

// slowProbe pings the next address that has no board answering.
func (l *Line) slowProbe(ctx context.Context) bool {
	s := &l.sched
	n := len(l.o.Addresses)
	for range n {
		a := l.o.Addresses[s.probeAt%n]
		s.probeAt++
		if b := l.boards[a]; b == nil || !b.present {
			l.probe(ctx, a, l.o.DiscoverWait)
			return true
		}
	}
	return false
}

// needy returns a present board with follow-ups, lowest address first.
// A board whose follow-ups are all of those the group frames' rhythm may
// hold (heldWork) is passed over while it holds them (rhythm.go).
func (l *Line) needy() *board {
	now := l.clk.Now()
	l.sched.held = false
	asked := false
	for _, a := range l.o.Addresses {
		b := l.boards[a]
		if b == nil || !b.present || (b.needs == 0 && b.dirty == 0) || now.Before(b.hold) {
			continue
		}
		if b.needs&^heldWork == 0 {
			if !asked {
				l.sched.held, asked = l.sched.rhythm.holds(now, l.rhythmCost(), l.o.GroupReread), true
			}
			if l.sched.held {
				continue
			}
		}
		return b
	}
	return nil
}

func (l *Line) setPresent(b *board, present bool) {
	l.mu.Lock()
	b.present = present
	l.mu.Unlock()
}

// probe pings an address, waiting wait; an answer makes (or brings back)
// a board.
func (l *Line) probe(ctx context.Context, a int, wait time.Duration) {
	hdr, body, err := l.native(ctx, frame.Address(a), &frame.PingRequest{}, wait, 0)
	if err != nil {
		return
	}
	b := l.boards[a]
	if b == nil {
		b = &board{addr: a, ref: fleet.Ref{Driver: l.name, Addr: strconv.Itoa(a)}, fresh: true}
		l.mu.Lock()
		l.boards[a] = b
		l.mu.Unlock()
		l.log.Info("rs485: board found", "addr", a)
	} else {
		l.log.Info("rs485: board answers again", "addr", a, "board", b.id)
	}
	b.misses = 0
	l.setPresent(b, true)
	b.needs |= needStatus | needInfo | needLink | needEvents
	b.dirty |= kAll
	if hdr.Pending > 0 {
		b.needs |= needFetch
	}
	if p, ok := body.(*frame.PingReply); ok {
		l.gotUptime(b, p.UptimeS)
	}
}

// heard notes a reply's pending count.
func (l *Line) heard(addr, pending int) {
	if b := l.boards[addr]; b != nil && b.present && pending > 0 {
		b.needs |= needFetch
	}
}

func (l *Line) gotUptime(b *board, up uint32) {
	now := l.clk.Now()
	if b.haveUptime && newBoot(b.uptime, now.Sub(b.uptimeAt), up) {
		l.restarted(b)
	}
	b.uptime, b.uptimeAt, b.haveUptime = up, now, true
}

// uptimeSlack is how far a board's uptime may fall behind the time the
// master measured between two of its replies before that is taken as a
// new boot: uptime_s is whole seconds (up to 1 s short), and a reply is
// timed when the master reads it, which a busy machine may delay (here
// by up to 2 s).
const uptimeSlack = 3 * time.Second

// newBoot reports whether a board that said uptime was, elapsed ago, and
// says now, has started again since: its uptime went back, or grew by
// less than the time that passed. The second catches a board swapped or
// power-cycled soon after its own start, whose uptime need not go back.
func newBoot(was uint32, elapsed time.Duration, now uint32) bool {
	if now < was {
		return true
	}
	return time.Duration(now-was)*time.Second+uptimeSlack < elapsed
}

// restarted notes that the board at b.addr started again (or another
// board started there): what the master knew of its boot is forgotten and
// its identity is read before anything is reported, so that a restart is
// told to the sink as Restarted of the board that restarted, and a board
// put in another's place as Seen of the new one (see identified), never
// as a restart of the board that left.
func (l *Line) restarted(b *board) {
	l.log.Info("rs485: new boot at the address", "addr", b.addr, "board", b.id)
	b.booted = true
	l.forget(b)
	b.needs |= needInfo
}

// forget drops what the master knew of the board's boot at b.addr (its
// happening numbers, status block, uptime, clock) and asks for it all
// again, with the happenings it kept since it started.
func (l *Line) forget(b *board) {
	b.lastSeq, b.fresh, b.haveStatus, b.haveUptime, b.fetchFailed, b.doubts = 0, false, false, false, false, 0
	b.replayFloor = 0 // every happening of the new boot is new
	b.needs |= needStatus | needLink | needEvents | needReplay
	b.dirty |= kAll
	b.grouped = 0          // read now with the rest, not when the group frames settle
	b.clock = boardClock{} // its clock started over: forget the samples, measure soon
}

// missed counts a poll or follow-up without reply.
func (l *Line) missed(b *board, why string) {
	b.misses++
	b.unsure = true
	if b.misses < l.o.MissLimit || !b.present {
		return
	}
	l.setPresent(b, false)
	b.needs, b.dirty, b.recheck, b.grouped = 0, 0, 0, 0
	if b.seen {
		b.seen = false
		l.log.Warn("rs485: board lost", "addr", b.addr, "board", b.id, "reason", why)
		l.sched.sink.Lost(b.ref, why)
	}
}

// poll sends one STATUS (or PING) to a present board.
func (l *Line) poll(ctx context.Context, a int) {
	b := l.boards[a]
	if b == nil || !b.present {
		return
	}
	var req frame.Request = &frame.StatusRequest{}
	if (b.polls+1)%l.o.PingEvery == 0 {
		req = &frame.PingRequest{}
	}
	timeouts := l.st.timeouts.Load()
	dirty := b.dirty
	hdr, body, err := l.native(ctx, frame.Address(a), req, l.o.PollWait, 1)
	if errors.Is(err, errNoRoom) {
		// Not sent: it goes first in the next gap.
		l.sched.cycle = slices.Insert(l.sched.cycle, 0, a)
		return
	}
	l.st.polls.Add(1)
	b.polls++
	if l.st.timeouts.Load() != timeouts {
		b.unsure = true // a try went unanswered: it may be another board that answers now
	}
	if err != nil {
		if errors.Is(err, fleet.ErrNoReply) {
			l.missed(b, fmt.Sprintf("no reply to %d polls on %s", l.o.MissLimit, l.name))
		}
		return
	}
	b.misses = 0
	if b.unsure {
		// It was silent a while: the same board, or another one put in
		// its place (a quick swap), or the same board powered on again?
		b.unsure = false
		b.needs |= needPing | needInfo
	}
	if hdr.Status != frame.StatusOK {
		return
	}
	switch m := body.(type) {
	case *frame.PingReply:
		l.gotUptime(b, m.UptimeS)
		b.needs |= needPolled
	case *frame.StatusReply:
		l.gotStatus(b, m.Block)
		l.checkMissed(b)
	}
	b.dirty |= b.recheck
	b.recheck = 0
	l.groupedDue(b, dirty)
	if l.clockDue(b) {
		b.needs |= needClock
	}
}

func (l *Line) gotStatus(b *board, sb frame.StatusBlock) {
	if b.haveStatus {
		old := b.status
		if old.Showing != sb.Showing || old.Backlight != sb.Backlight {
			b.dirty |= kScreen
		}
		if old.LEDs != sb.LEDs || old.Brightness != sb.Brightness {
			b.dirty |= kLEDs
		}
		if old.Holo != sb.Holo || (old.Flags^sb.Flags)&frame.FlagHoloReady != 0 {
			b.dirty |= kHolo
		}
		if old.Scene != sb.Scene {
			b.dirty |= kScenes
		}
		// The latest event number only grows (wrapping at 65535); a
		// smaller one means the numbering started over.
		if sb.Seq != old.Seq && !fleet.SeqAfter(sb.Seq, old.Seq) {
			l.restarted(b)
		}
	}
	b.status, b.haveStatus = sb, true
}

// follow runs one follow-up of b.
func (l *Line) follow(ctx context.Context, b *board) {
	switch {
	case b.needs&needPing != 0:
		b.needs &^= needPing
		_, body, err := l.native(ctx, frame.Address(b.addr), &frame.PingRequest{}, l.o.PollWait, 1)
		if l.failed(b, err, needPing) {
			return
		}
		if p, ok := body.(*frame.PingReply); ok {
			l.gotUptime(b, p.UptimeS)
		}
	case b.needs&needStatus != 0:
		b.needs &^= needStatus
		_, body, err := l.native(ctx, frame.Address(b.addr), &frame.StatusRequest{}, l.o.PollWait, 1)
		if l.failed(b, err, needStatus) {
			return
		}
		if m, ok := body.(*frame.StatusReply); ok {
			b.haveStatus = false // a baseline: the states are read next
			l.gotStatus(b, m.Block)
		}
	case b.needs&needPolled != 0:
		b.needs &^= needPolled
		dirty := b.dirty
		_, body, err := l.native(ctx, frame.Address(b.addr), &frame.StatusRequest{}, l.o.PollWait, 1)
		if l.failed(b, err, 0) {
			return
		}
		if m, ok := body.(*frame.StatusReply); ok {
			l.gotStatus(b, m.Block)
		}
		l.groupedDue(b, dirty)
	case b.needs&needInfo != 0:
		rep, ok := l.get(ctx, b, needInfo, "/info")
		if !ok {
			return
		}
		b.seen = true
		var info json.RawMessage
		if rep.Status == http.StatusOK {
			info = rep.Body
			var idf struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(info, &idf) == nil && idf.ID != "" && idf.ID != b.id {
				if !l.identified(b, idf.ID) {
					return
				}
			}
		}
		b.otherID = ""
		if b.booted {
			b.booted = false
			l.log.Info("rs485: board restarted", "addr", b.addr, "board", b.id)
			l.sched.sink.Restarted(b.ref)
		}
		l.sched.sink.Seen(b.ref, info)
	case b.needs&needLink != 0:
		rep, ok := l.get(ctx, b, needLink, "/link")
		if !ok || rep.Status != http.StatusOK {
			return
		}
		var st struct {
			Running struct {
				Groups []int `json:"groups"`
			} `json:"running"`
		}
		if json.Unmarshal(rep.Body, &st) == nil {
			b.groups = st.Running.Groups
		}
		l.sched.sink.Changed(b.ref, "link", rep.Body)
	case b.needs&needEvents != 0:
		b.needs &^= needEvents
		body, _ := json.Marshal(map[string]any{"kinds": l.o.Kinds, "push": false})
		rep, err := l.call(ctx, l.req(b, http.MethodPatch, "/link/events", body), l.lineWait(), 1)
		if l.failed(b, err, needEvents) {
			return
		}
		var st struct {
			Seq     uint16 `json:"seq"`
			Pending int    `json:"pending"`
		}
		if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &st) != nil {
			l.log.Warn("rs485: enabling events refused", "addr", b.addr, "status", rep.Status, "body", string(rep.Body))
			return
		}
		switch {
		case b.fresh && l.o.ReplayKept:
			// Everything the board keeps of the last fleet.ReplayRecent,
			// then what it queued.
			b.lastSeq, b.fresh = 0, false
			b.replayFloor = 0
			if b.haveUptime {
				b.replayFloor = fleet.ReplayFloor(time.Duration(b.uptime)*time.Second + l.clk.Since(b.uptimeAt))
			}
			b.needs |= needReplay
		case b.fresh:
			// The happenings still queued for the host were never
			// handed over (a gateway killed before fetching them, or
			// made while none ran): they are fetched, the rest is past.
			b.lastSeq, b.fresh = seqBefore(st.Seq, st.Pending), false
		}
		if st.Pending > 0 {
			b.needs |= needFetch
		}
	case b.needs&needReplay != 0:
		rep, ok := l.get(ctx, b, needReplay, l.keptEvents())
		if ok && rep.Status == http.StatusOK {
			if _, good := l.happened(b, rep.Body); !good {
				b.needs |= needReplay
			} else {
				b.replayFloor = 0 // what comes next is new
			}
		}
	case b.needs&needFetch != 0:
		// GET /link/events hands the board's queue over, whether or not
		// its reply arrives. Once a fetch ended without a reply the master
		// believes, happenings may have been handed over unseen, so the
		// next fetches read the board's kept happenings after the last one
		// given until a reply is believed. An error reply does not end
		// that: on a noisy line it mostly answers a garbled request line.
		// The plain fetch is never sent again in place: a second try would
		// find the queue already handed over and hide the loss.
		path, retries := "/link/events", 0
		switch {
		case b.fetchFailed && b.lastSeq != 0:
			path, retries = path+"?after="+strconv.Itoa(int(b.lastSeq)), 1
		case b.fetchFailed:
			path, retries = l.keptEvents(), 1
		}
		b.needs &^= needFetch
		rep, err := l.call(ctx, l.req(b, http.MethodGet, path, nil), l.lineWait(), retries)
		if l.failed(b, err, needFetch) {
			// Unless it was never sent, the queue may be handed over.
			b.fetchFailed = b.fetchFailed || !errors.Is(err, errNoRoom)
			return
		}
		if rep.Status != http.StatusOK {
			// Ask again, after a pause that lets polls through.
			l.log.Debug("rs485: fetch refused", "addr", b.addr, "path", path, "status", rep.Status)
			b.fetchFailed = true
			b.needs |= needFetch
			b.hold = l.clk.Now().Add(max(l.o.PollInterval, l.o.PollWait))
			return
		}
		pending, good := l.happened(b, rep.Body)
		b.fetchFailed = !good
		if pending > 0 || !good {
			b.needs |= needFetch
		}
	case b.dirty != 0:
		for _, r := range resources {
			if b.dirty&r.bit == 0 {
				continue
			}
			b.dirty &^= r.bit
			rep, err := l.call(ctx, l.req(b, http.MethodGet, r.path, nil), l.lineWait(), 1)
			if err != nil {
				b.dirty |= r.bit
				l.failed(b, err, 0)
				return
			}
			if rep.Status == http.StatusOK {
				l.sched.sink.Changed(b.ref, r.kind, rep.Body)
			}
			return
		}
	case b.needs&needClock != 0:
		b.needs &^= needClock
		l.measureClock(ctx, b)
	case b.needs&needAlign != 0:
		b.needs &^= needAlign
		l.tellClock(ctx, b)
	}
}

// identified takes id, which GET /info just gave, as the id of the board
// at b.addr. The first id is taken at once. A different one means another
// board answers at the address (a board swapped there, possibly without a
// poll going unanswered long enough to call the old one lost): as a JSON
// line carries no checksum, it is believed only when the next GET /info
// gives it again (false: read again first). A new board starts with
// nothing of the old one's: numbering, states and happenings are read
// afresh, and Seen with its identity tells the sink that another board is
// at the address.
func (l *Line) identified(b *board, id string) bool {
	if b.id == "" {
		b.id = id
		l.log.Info("rs485: board identified", "addr", b.addr, "board", b.id)
		return true
	}
	if b.otherID != id {
		b.otherID = id
		b.needs |= needInfo
		l.log.Debug("rs485: another id at the address, reading it again", "addr", b.addr, "board", b.id, "other", id)
		return false
	}
	l.log.Info("rs485: another board at the address", "addr", b.addr, "board", id, "before", b.id)
	b.id, b.otherID, b.booted = id, "", false
	l.forget(b)
	return true
}

// keptEvents is the path reading a board's kept happenings of the kinds
// the master enabled (GET /events without kinds would return every kind).
func (l *Line) keptEvents() string {
	return "/events?kinds=" + strings.Join(l.o.Kinds, ",")
}

// get runs GET path on b for follow-up n, clearing n; ok is false when
// no reply came (n is then set again, and a miss counted).
func (l *Line) get(ctx context.Context, b *board, n need, path string) (jsonline.Reply, bool) {
	b.needs &^= n
	rep, err := l.call(ctx, l.req(b, http.MethodGet, path, nil), l.lineWait(), 1)
	if l.failed(b, err, n) {
		return rep, false
	}
	return rep, true
}

// failed handles a follow-up's error: the need is kept for later. After
// a missing reply the board's follow-ups wait a poll interval (at least
// PollWait), so that a board that went away costs the line only its polls,
// which decide whether it is lost.
func (l *Line) failed(b *board, err error, n need) bool {
	if err == nil {
		return false
	}
	b.needs |= n
	if errors.Is(err, fleet.ErrNoReply) {
		b.unsure = true
		b.hold = l.clk.Now().Add(max(l.o.PollInterval, l.o.PollWait))
	} else {
		l.log.Debug("rs485: follow-up failed", "addr", b.addr, "err", err)
	}
	return true
}

func (l *Line) req(b *board, method, path string, body []byte) jsonline.Request {
	return jsonline.Request{Addr: jsonline.Board(uint8(b.addr)), Method: method, Path: path, Body: body}
}

// maxDoubts is how many fetch replies in a row may be doubted (see
// happened) and fetched again by seq before one is taken as it is, so that
// a board whose numbering the master misreads (a restart not yet noticed,
// kinds changed by someone else) cannot hold the line with fetches.
const maxDoubts = 2

// happened reports the happenings of a GET /events or GET /link/events
// reply that come after the last one given. It returns the pending count
// the reply states, and false when the reply does not hold together.
//
// JSON lines carry no checksum, so a reply is checked before anything in
// it is believed: every event is an object of an enabled kind with a seq,
// and, as the master enables every happening kind, the seqs run on without
// a gap. A reply that fails is dropped whole and fetched again by seq.
//
// A reply that holds together is still doubted, and fetched again by seq,
// when its first new happening does not follow the last one given (the
// board lost none; a garbled after= or a queue that missed some) or when
// it holds happenings but none new (a garbled seq). Up to maxDoubts
// replies in a row are doubted until one brings new happenings.
func (l *Line) happened(b *board, body []byte) (int, bool) {
	var rep struct {
		Lost    *int              `json:"lost"`
		Pending int               `json:"pending"`
		Events  []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(body, &rep); err != nil || rep.Lost == nil || rep.Events == nil {
		l.st.badReply.Add(1)
		return 0, false
	}
	hs := make([]fleet.Happening, 0, len(rep.Events))
	for i, ev := range rep.Events {
		var h struct {
			Event string `json:"event"`
			Seq   uint16 `json:"seq"`
		}
		if json.Unmarshal(ev, &h) != nil || h.Seq == 0 || !slices.Contains(l.o.Kinds, h.Event) ||
			(i > 0 && next(hs[i-1].Seq) != h.Seq && len(l.o.Kinds) == len(HappeningKinds)) {
			l.st.badReply.Add(1)
			return 0, false
		}
		hs = append(hs, fleet.Happening{Kind: h.Event, Seq: h.Seq, Data: ev})
	}
	if doubt := l.doubt(b, hs, *rep.Lost); doubt != "" {
		b.doubts++
		l.log.Debug("rs485: fetch reply doubted", "addr", b.addr, "why", doubt, "last", b.lastSeq, "doubts", b.doubts)
		return 0, false
	}
	if *rep.Lost > 0 {
		l.log.Warn("rs485: board dropped happenings before they were fetched", "addr", b.addr, "lost", *rep.Lost)
	}
	fresh := hs[:0]
	for _, h := range hs {
		if !fleet.SeqAfter(h.Seq, b.lastSeq) {
			continue
		}
		b.lastSeq = h.Seq
		if b.replayFloor > 0 {
			if h.Before(b.replayFloor) {
				continue // kept from before fleet.ReplayRecent
			}
			b.replayFloor = 0 // the replay reached the recent ones
		}
		fresh = append(fresh, h)
	}
	l.log.Debug("rs485: happenings", "addr", b.addr, "got", len(hs), "new", len(fresh), "last", b.lastSeq, "pending", rep.Pending)
	if len(fresh) > 0 {
		b.doubts = 0
		l.sched.sink.Happened(b.ref, fresh)
	}
	return rep.Pending, true
}

// doubt tells why a fetch reply whose happenings hs run on without a gap
// may not tell the whole story after b.lastSeq; "" when it does.
func (l *Line) doubt(b *board, hs []fleet.Happening, lost int) string {
	if b.lastSeq == 0 || len(hs) == 0 || b.doubts >= maxDoubts {
		return ""
	}
	i := slices.IndexFunc(hs, func(h fleet.Happening) bool { return fleet.SeqAfter(h.Seq, b.lastSeq) })
	switch {
	case i < 0:
		return "no new happening"
	case hs[i].Seq != next(b.lastSeq) && lost == 0 && len(l.o.Kinds) == len(HappeningKinds):
		return fmt.Sprintf("gap: %d after %d", hs[i].Seq, b.lastSeq)
	}
	return ""
}

// next is the happening number after s (65535 wraps to 1).
// seqBefore is the happening number n before s (0 for s 0).
func seqBefore(s uint16, n int) uint16 {
	for ; n > 0 && s != 0; n-- {
		if s == 1 {
			s = 65535
		} else {
			s--
		}
	}
	return s
}

func next(s uint16) uint16 {
	if s == 65535 {
		return 1
	}
	return s + 1
}

// afterNative marks what a native command may have changed on a board,
// to be re-read after its next poll.
func (l *Line) afterNative(addr int, t frame.Type) {
	l.superseded(addr, kindsOfNative(t))
	if b := l.boards[addr]; b != nil && b.present {
		b.recheck |= kindsOfNative(t)
	}
}

// afterCall reports the state a changing call's reply carries.
func (l *Line) afterCall(addr int, req jsonline.Request, rep jsonline.Reply) {
	l.superseded(addr, kindsOfPath(req.Method, req.Path))
	b := l.boards[addr]
	if b == nil || !b.present || req.Method == http.MethodGet || rep.Status >= 300 {
		return
	}
	path := req.Path
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch path {
	case "/leds":
		l.sched.sink.Changed(b.ref, "leds", rep.Body)
	case "/screen", "/screen/show":
		l.sched.sink.Changed(b.ref, "screen", rep.Body)
	case "/holo/motion":
		l.sched.sink.Changed(b.ref, "holo", rep.Body)
	case "/settings":
		l.sched.sink.Changed(b.ref, "settings", rep.Body)
	case "/link":
		b.needs |= needLink
	default:
		b.dirty |= kindsOfPath(req.Method, path)
	}
}

// afterGroup marks the members of a group to be re-read (they do not
// answer group frames): after their next poll with a negative GroupQuiet,
// else when groupedDue says. at is when the frame went: a beat of the
// group frames' rhythm.
func (l *Line) afterGroup(a frame.Address, k kinds, s groupSend, at time.Time) {
	if k == 0 {
		return
	}
	l.sched.rhythm.saw(at)
	now := l.clk.Now()
	for _, b := range l.boards {
		if b.present && (a.IsBroadcast() || slices.Contains(b.groups, a.Group())) {
			l.watchGroup(b, k, s)
			if l.o.GroupQuiet < 0 {
				b.recheck |= k
				continue
			}
			if b.grouped == 0 {
				b.groupedFirst = now
			}
			b.grouped |= k
			b.groupedLast = now
		}
	}
}

// groupedDue runs after a status read of b (dirty: b.dirty before it).
// Once the group frames b took are due to be read back (no frame for
// GroupQuiet and none read back for GroupReread, or the first unread
// frame GroupReread ago), their kinds are re-read now. Until then a
// change of those kinds the status block shows is the frames' doing, and
// waits with them: a board taking a group frame every few DMX frames is
// read back once a GroupReread, not after every poll.
func (l *Line) groupedDue(b *board, dirty kinds) {
	if b.grouped == 0 {
		return
	}
	now := l.clk.Now()
	quiet := now.Sub(b.groupedLast) >= l.o.GroupQuiet && now.Sub(b.groupedRead) >= l.o.GroupReread
	if quiet || now.Sub(b.groupedFirst) >= l.o.GroupReread {
		b.dirty |= b.grouped
		b.grouped = 0
		b.groupedRead = now
		return
	}
	b.dirty &^= (b.dirty &^ dirty) & b.grouped
}

func kindsOfNative(t frame.Type) kinds {
	switch t {
	case frame.TypeScene, frame.TypeEnd:
		return kAll
	case frame.TypeScreenOff, frame.TypeColour, frame.TypeBacklight:
		return kScreen
	case frame.TypeLEDs:
		return kLEDs
	case frame.TypeHolo:
		return kHolo
	}
	return 0
}

func kindsOfPath(method, path string) kinds {
	if method == http.MethodGet {
		return 0
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimPrefix(path, jsonline.APIPrefix)
	switch {
	case path == "/leds":
		return kLEDs
	case strings.HasPrefix(path, "/screen"):
		return kScreen
	case strings.HasPrefix(path, "/holo"), strings.HasPrefix(path, "/servos"):
		return kHolo
	case path == "/scenes/apply" || path == "/scenes/end":
		return kAll
	case strings.HasPrefix(path, "/scenes"):
		return kScenes
	}
	return 0
}
