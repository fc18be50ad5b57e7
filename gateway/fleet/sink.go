package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/holofleet/holofleet/gateway/registry"
)

// Seen implements Sink. With info it (re)binds ref to the board named by
// info's id; without it, a ref the core does not know yet is identified
// in the background (GET /info through the ref's driver).
func (f *Fleet) Seen(ref Ref, info json.RawMessage) {
	var fields infoFields
	if info != nil {
		if err := json.Unmarshal(info, &fields); err != nil || fields.ID == "" {
			f.log.Warn("fleet: GET /info without an id", "ref", ref.String())
			f.mu.Lock()
			f.st.unattributed++
			f.mu.Unlock()
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id, known := f.refs[ref]
	if fields.ID == "" {
		if !known {
			f.queueLocked(job{ref: ref, what: jobInfo})
			return
		}
	} else if !known || id != fields.ID {
		if known {
			f.detachLocked(ref, ReasonReplaced)
		}
		id = fields.ID
		f.refs[ref] = id
	}
	b, ok := f.boards[id]
	if !ok {
		b = newBoardState(registry.Record{ID: id})
		f.boards[id] = b
		b.urgent = true
	}
	wasReason := b.reason
	now := f.clk.Now()
	st, had := b.refs[ref]
	if !had {
		st = &refState{epoch: b.epoch}
		b.refs[ref] = st
		// Groups live in the link settings; read them once per place
		// (and again after a restart).
		f.queueLocked(job{ref: ref, what: jobLink})
	}
	if f.setPlace(b, ref) {
		b.urgent = true
	}
	if fields.ID != "" {
		if fields.Hostname != "" && fields.Hostname != b.rec.Hostname {
			b.rec.Hostname, b.urgent = fields.Hostname, true
		}
		if v := fields.Firmware.Version; v != "" && v != b.rec.Firmware {
			b.rec.Firmware, b.urgent = v, true
		}
		b.fire = hasFire(fields)
		b.clipSync = hasClipSync(fields)
	}
	wasOnline := st.online
	st.online, st.reason = true, ""
	b.rec.LastSeen, b.dirty = now, true
	if !wasOnline {
		b.rec.Transports = b.transports()
		b.urgent = true
	}
	if !b.online {
		b.online, b.reason = true, ""
		data, _ := json.Marshal(map[string]any{"transports": b.transports(), "via": ref.String()})
		f.emitLocked(b, Event{Type: EventOnline, Data: data})
		reason := "answers again"
		switch {
		case !ok:
			reason = "new board"
		case wasReason == "":
			reason = "first seen since the gateway started"
		}
		f.log.Info("fleet: board online", refAttrs(id, ref, reason, "was", wasReason)...)
	} else if !wasOnline {
		f.log.Info("fleet: board reachable on another transport", refAttrs(id, ref, "answers there")...)
	}
	if b.urgent {
		f.wakePersist()
	}
}

// Lost implements Sink: the board at ref stopped answering there. The
// board goes offline, with that reason, once no place reaches it.
func (f *Fleet) Lost(ref Ref, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st.eventsIn++
	f.loseLocked(ref, reason)
}

func (f *Fleet) loseLocked(ref Ref, reason string) {
	id, ok := f.refs[ref]
	if !ok {
		return
	}
	b := f.boards[id]
	st := b.refs[ref]
	if st == nil || !st.online {
		return
	}
	if reason == "" {
		reason = "no reply at " + ref.String()
	}
	st.online, st.reason = false, reason
	for _, o := range b.refs {
		if o.online {
			f.log.Info("fleet: board lost on one transport", refAttrs(id, ref, reason)...)
			return
		}
	}
	b.online, b.reason = false, reason
	b.urgent = true
	f.wakePersist()
	f.emitLocked(b, Event{Type: EventOffline, Reason: reason})
	f.log.Warn("fleet: board offline", refAttrs(id, ref, reason)...)
}

// detachLocked forgets that ref reaches its board (another board answers
// there now).
func (f *Fleet) detachLocked(ref Ref, reason string) {
	f.loseLocked(ref, reason)
	if b := f.boards[f.refs[ref]]; b != nil {
		delete(b.refs, ref)
	}
	delete(f.refs, ref)
}

// Happened implements Sink: new happenings go on the stream once each,
// whichever place reported them and however often. A place that has not
// yet reported the board's latest restart, which another place reported
// less than restartMerge ago, reports the old boot's last happenings (or
// the new boot's, which the other place reports too): they are dropped.
// Before, they were numbered in the new boot (the soak's "seq 1 after
// 19" of a line board also on the LAN, restarted by a rollout every few
// seconds: the LAN's old-boot tail came after the line's restart) and the
// new boot's own happenings of those numbers were then dropped as repeats
// (gaps). A place still behind after restartMerge missed the restart: its
// numbers are taken as the latest boot's.
func (f *Fleet) Happened(ref Ref, hs []Happening) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.attributeLocked(ref, len(hs))
	if b == nil {
		return
	}
	if st := b.refs[ref]; st != nil && st.epoch < b.epoch {
		if f.clk.Now().Sub(b.epochAt) < restartMerge {
			f.st.duplicates += uint64(len(hs))
			f.log.Debug("fleet: happenings of a boot before the board's restart dropped", append(refAttrs(b.rec.ID, ref,
				"its restart not yet reported here"), "n", len(hs), "epoch", b.epoch)...)
			return
		}
		st.epoch = b.epoch
	}
	var dropped []uint16
	for _, h := range hs {
		if !b.window.add(h.Seq) {
			f.st.duplicates++
			dropped = append(dropped, h.Seq)
			continue
		}
		f.emitLocked(b, Event{Type: EventHappening, Kind: h.Kind, Seq: h.Seq, Data: slices.Clone(h.Data)})
	}
	if len(dropped) > 0 {
		// Repeats are the rule for a board reached two ways; a number
		// far behind the newest that was never put on the stream (a
		// restart neither place told) would be lost here: the debug
		// log says which were dropped, to follow a happening that
		// never reached the stream.
		f.log.Debug("fleet: happenings dropped as repeats", append(refAttrs(b.rec.ID, ref, "seen already, or far behind the newest"),
			"first", dropped[0], "last", dropped[len(dropped)-1], "n", len(dropped), "newest", b.window.newest, "epoch", b.epoch)...)
	}
}

// Changed implements Sink: a state goes on the stream unless it repeats
// the last one of its kind (two places report the same change).
func (f *Fleet) Changed(ref Ref, kind string, state json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.attributeLocked(ref, 1)
	if b == nil {
		return
	}
	if last, ok := b.states[kind]; ok && bytes.Equal(last, state) {
		f.st.duplicates++
		return
	}
	state = slices.Clone(state)
	b.states[kind] = state
	if kind == "link" {
		f.setGroupsLocked(b, state)
	}
	f.emitLocked(b, Event{Type: EventState, Kind: kind, Data: state})
}

// Restarted implements Sink: the board began a new boot, so its happening
// numbers start over. A second place reporting the same restart soon
// after joins the epoch the first one started.
func (f *Fleet) Restarted(ref Ref) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.attributeLocked(ref, 1)
	if b == nil {
		return
	}
	st := b.refs[ref]
	now := f.clk.Now()
	if st.epoch < b.epoch && now.Sub(b.epochAt) < restartMerge {
		st.epoch = b.epoch
		return
	}
	b.epoch++
	b.epochAt = now
	st.epoch = b.epoch
	b.window = seqWindow{}
	clear(b.states)
	for _, rs := range b.refs {
		rs.clock = nil // the board's monotonic clock started over
	}
	f.emitLocked(b, Event{Type: EventRestarted})
	f.log.Info("fleet: board restarted", refAttrs(b.rec.ID, ref, "new boot reported")...)
	for r := range b.refs {
		f.queueLocked(job{ref: r, what: jobLink})
	}
}

// refAttrs are the log attributes of a change of board id seen at ref:
// board, driver and transport (both the driver's name), addr, reason, and
// any more key-value pairs.
func refAttrs(id string, ref Ref, reason string, more ...any) []any {
	return append([]any{"board", id, "driver", ref.Driver, "transport", ref.Driver, "addr", ref.Addr, "reason", reason}, more...)
}

// attributeLocked counts n events reported at ref and returns the board
// ref is bound to; with none (nil) the events are counted unattributed.
func (f *Fleet) attributeLocked(ref Ref, n int) *boardState {
	f.st.eventsIn += uint64(n)
	b := f.boardAtLocked(ref)
	if b == nil {
		f.st.unattributed += uint64(n)
	}
	return b
}

func (f *Fleet) boardAtLocked(ref Ref) *boardState {
	id, ok := f.refs[ref]
	if !ok {
		return nil
	}
	return f.boards[id]
}

// Jobs the core runs in the background for a ref.
const (
	jobInfo = "info" // GET /info, then Seen with it
	jobLink = "link" // GET /link, then the board's groups
)

type job struct {
	ref  Ref
	what string
}

// queueLocked schedules j unless it is already waiting; a full queue drops
// it (the next report of the ref schedules it again).
func (f *Fleet) queueLocked(j job) {
	if f.pending[j] {
		return
	}
	if _, ok := f.drivers[j.ref.Driver]; !ok {
		return
	}
	select {
	case f.jobs <- j:
		f.pending[j] = true
	default:
	}
}

func (f *Fleet) identifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-f.jobs:
			f.runJob(ctx, j)
			f.mu.Lock()
			delete(f.pending, j)
			f.mu.Unlock()
		}
	}
}

func (f *Fleet) runJob(ctx context.Context, j job) {
	d := f.drivers[j.ref.Driver]
	ctx, cancel := context.WithTimeout(ctx, f.o.CallTimeout)
	defer cancel()
	path := "/info"
	if j.what == jobLink {
		path = "/link"
	}
	rep, err := d.Call(ctx, j.ref.Addr, http.MethodGet, path, nil)
	if err == nil {
		err = rep.Err()
	}
	if err != nil {
		f.log.Debug("fleet: reading a board", "ref", j.ref.String(), "path", path, "err", err)
		return
	}
	switch j.what {
	case jobInfo:
		f.mu.Lock()
		delete(f.pending, j) // Seen may queue the link read of the same ref
		f.mu.Unlock()
		f.Seen(j.ref, rep.Body)
	case jobLink:
		f.mu.Lock()
		if b := f.boardAtLocked(j.ref); b != nil {
			f.setGroupsLocked(b, rep.Body)
		}
		f.mu.Unlock()
	}
}

// setGroupsLocked takes the board's groups from a GET /link reply (its
// running settings).
func (f *Fleet) setGroupsLocked(b *boardState, link json.RawMessage) {
	var lf linkFields
	if err := json.Unmarshal(link, &lf); err != nil {
		f.log.Debug("fleet: GET /link", "board", b.rec.ID, "err", err)
		return
	}
	groups := slices.Clone(lf.Running.Groups)
	if groups == nil {
		groups = []int{}
	}
	slices.Sort(groups)
	if !slices.Equal(b.rec.Groups, groups) {
		b.rec.Groups, b.urgent = groups, true
		f.wakePersist()
	}
}

// seqWindow remembers the happening numbers of one boot recently put on
// the stream. Numbers run 1-65535 and wrap to 1.
type seqWindow struct {
	seqs   [windowSize]uint16
	n      int // how many of seqs are filled
	next   int // where the next one goes
	newest uint16
}

const windowSize = 64

// seqDist is how far a is ahead of b on the 1-65535 cycle.
func seqDist(a, b uint16) int {
	d := (int(a) - int(b)) % 65535
	if d < 0 {
		d += 65535
	}
	return d
}

// add reports whether seq is new, and remembers it. A number already seen
// is a repeat; so is one far behind the newest (older than the window can
// tell, so it was put on the stream long ago). A number a little behind
// the newest that was never seen (one place saw it, the other missed it)
// is new.
func (w *seqWindow) add(seq uint16) bool {
	if w.n > 0 {
		if slices.Contains(w.seqs[:w.n], seq) {
			return false
		}
		if back := seqDist(w.newest, seq); back > 0 && back < 32768 {
			if back >= windowSize {
				return false
			}
		} else {
			w.newest = seq
		}
	} else {
		w.newest = seq
	}
	w.seqs[w.next] = seq
	w.next = (w.next + 1) % windowSize
	if w.n < windowSize {
		w.n++
	}
	return true
}

// Clock implements ClockSink: the estimate is kept for the place it was
// measured at, until the board restarts.
func (f *Fleet) Clock(ref Ref, c BoardClock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boardAtLocked(ref)
	if b == nil {
		return
	}
	if st := b.refs[ref]; st != nil {
		if c.Via == "" {
			c.Via = ref.Driver
		}
		st.clock = &c
	}
}
