package rs485

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// DefaultClockEvery is how often each online board's clock is measured:
// one GET /time exchange per board per period.
const DefaultClockEvery = 30 * time.Second

// boardClock is a board's clock filter, owned by the scheduler.
type boardClock struct {
	filter timesync.Filter
	next   time.Time // no exchange before then
	noTime bool      // the board answered 404 to GET /time (older firmware)
	// noAlign: the board answered 404 or 405 to PUT /time (no extension
	// clip-sync); not told again until it restarts. tell is the estimate
	// to tell it next (needAlign).
	noAlign bool
	tell    timesync.Estimate
	told    fleet.Told // what the board was told last
}

// take feeds s to the filter and returns the estimate at s's end from
// both legs of the recent samples (timesync.Filter.Bounds: the window's
// 8 samples, 4 minutes at the default period). On a loaded host most
// line samples wait on one leg or the other, by more than the drift of
// the alignment a board holds: an estimate from the newest sample alone
// then seldom beats that alignment (fleet.Told), the board is not told
// again, and its clips drift apart from the others' at its crystal's
// rate (73 ms in 10 minutes at ±50 ppm). Each leg's bound is as sharp
// as a quick sample's whenever that leg did not wait, so the estimate
// from the sharpest of each stays within a few ms and keeps following
// the crystal as samples come.
func (c *boardClock) take(s timesync.Sample) (timesync.Estimate, bool, error) {
	_, stepped, err := c.filter.Add(s)
	e, _ := c.filter.Bounds(s.T4)
	return e, stepped, err
}

// worthTelling reports whether e is to be told to the board (PUT /time):
// it takes alignments and e is sharper than the one it holds, aged
// (fleet.Told: a blurred estimate never replaces a sharp one). It then
// keeps e as the one to tell.
func (c *boardClock) worthTelling(e timesync.Estimate) bool {
	if c.noAlign || !c.told.Sharper(e.Uncertainty, e.At) {
		return false
	}
	c.tell = e
	return true
}

// toldIt notes that the board took the estimate told.
func (c *boardClock) toldIt() {
	c.told = fleet.Told{UncertaintyUS: c.tell.Uncertainty, AtUS: c.tell.At, Set: true}
}

// lineTimes are the timings of one JSON-line exchange: the gateway's time
// when the reply's last byte was taken off the line, and the bytes each
// way on the wire.
type lineTimes struct {
	t4      int64
	out, in int
}

// clockDue reports whether b's clock is to be measured now: the line
// measures clocks, its sink takes them, and b's period has passed.
func (l *Line) clockDue(b *board) bool {
	if l.o.ClockEvery < 0 || b.clock.noTime {
		return false
	}
	if _, ok := l.sched.sink.(fleet.ClockSink); !ok {
		return false
	}
	return !l.clk.Now().Before(b.clock.next)
}

// measureClock runs one GET /time exchange with b, feeds the sample, with
// the wire times of the request and the reply taken out, to b's filter and
// reports the estimate. A lost or refused exchange waits for the next
// period: clock samples never cost the line retries.
func (l *Line) measureClock(ctx context.Context, b *board) {
	b.clock.next = l.clk.Now().Add(l.o.ClockEvery)
	cs, ok := l.sched.sink.(fleet.ClockSink)
	if !ok {
		return
	}
	var tm lineTimes
	t1 := l.stamp.Now()
	rep, ok := l.clockExchange(ctx, b, http.MethodGet, "/time", "?t1="+strconv.FormatInt(t1, 10), nil, &tm)
	if !ok {
		return
	}
	if rep.Status == http.StatusNotFound {
		b.clock.noTime = true
		l.log.Info("rs485: board has no GET /time; its clock is not aligned", "addr", b.addr, "board", b.id)
		return
	}
	var tr boardapi.TimeReply
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &tr) != nil || tr.T1 == nil || *tr.T1 != t1 {
		l.st.badReply.Add(1)
		l.log.Debug("rs485: clock sample: bad reply", "addr", b.addr, "status", rep.Status, "body", string(rep.Body))
		return
	}
	s := clockSample(t1, tm, tr, l.wireTime)
	e, stepped, err := b.clock.take(s)
	if err != nil {
		l.log.Debug("rs485: clock sample", "addr", b.addr, "board", b.id, "err", err)
		return
	}
	if stepped {
		l.log.Info("rs485: board clock stepped", "addr", b.addr, "board", b.id)
	}
	if ctx.Err() == nil {
		cs.Clock(b.ref, fleet.BoardClock{OffsetUS: e.Offset, UncertaintyUS: e.Uncertainty,
			SyncedAt: l.stamp.Time(e.At), Epoch: l.stamp.Time(-e.Offset), Via: l.name})
		// A blurred estimate (a reply that waited in either direction) is
		// not told over a sharper one the board holds (fleet.Told).
		if b.clock.worthTelling(e) {
			b.needs |= needAlign
		}
	}
}

// tellClock tells b the alignment its last clock sample gave (PUT /time,
// extension clip-sync): the gateway's time, Unix µs, at which its clock
// read 0, so that the clips it plays follow the gateway's clock. One
// exchange, never retried (the next sample tells again); a board without
// the extension (404, 405) is not told again until it restarts.
//
// Cost: the request line `@NNN#mXX PUT /time {"epoch_us":…,"uncertainty_us":…}`
// is about 70 bytes, the reply about 120: some 16 ms at 115200 baud per
// board per ClockEvery (30 s), 0.05 % of the line per board.
func (l *Line) tellClock(ctx context.Context, b *board) {
	epoch := -b.clock.tell.Offset
	body, _ := json.Marshal(boardapi.TimeAlign{EpochUS: &epoch, UncertaintyUS: b.clock.tell.Uncertainty})
	rep, ok := l.clockExchange(ctx, b, http.MethodPut, "/time", "", body, nil)
	if !ok {
		return
	}
	switch rep.Status {
	case http.StatusOK:
		b.clock.toldIt()
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		b.clock.noAlign = true
		l.log.Debug("rs485: board has no PUT /time (clip-sync); its clips play on its own clock", "addr", b.addr, "board", b.id)
	default:
		l.st.badReply.Add(1)
		l.log.Debug("rs485: telling the board its clock: refused", "addr", b.addr, "status", rep.Status, "body", string(rep.Body))
	}
}

// clockExchange runs one JSON-line exchange of the clock alignment with b
// (path and query), never retried: the next period tries again. A reply
// is heard (its pending count noted); a timeout is counted and, like any
// other failure, handed to failed as fleet.ErrNoReply, and ok is false.
func (l *Line) clockExchange(ctx context.Context, b *board, method, path, query string, body []byte, tm *lineTimes) (jsonline.Reply, bool) {
	rep, err := l.lineExchange(ctx, l.req(b, method, path+query, body), l.lineWait(), tm)
	if err != nil {
		if errors.Is(err, errTimeout) {
			l.st.timeouts.Add(1)
			err = fmt.Errorf("%w: %v %s %s", fleet.ErrNoReply, b.addr, method, path)
		}
		l.failed(b, err, 0)
		return rep, false
	}
	l.heard(b.addr, rep.Pending)
	return rep, true
}

// clockSample makes the sample of an exchange sent at t1: the board's t2
// is taken once it has the whole request, which is on the wire for
// wire(out) after its first byte left at t1, and its t3 before the reply's
// first byte leaves, which is wire(in) before its last byte arrived at
// t4. Both corrections are at most the true wire times (the line runs at
// its baud rate or slower, a byte takes 10 bit times), so the true offset
// stays within the sample's bounds; what is left of the round trip is the
// turn-arounds on both ends.
func clockSample(t1 int64, tm lineTimes, tr boardapi.TimeReply, wire func(int) time.Duration) timesync.Sample {
	return timesync.Sample{T1: t1 + wire(tm.out).Microseconds(), T2: tr.T2, T3: tr.T3,
		T4: tm.t4 - wire(tm.in).Microseconds()}
}

// replyWireLen is the bytes a reply line took on the wire: its text and
// one line feed (fewer than it may have taken, never more).
func replyWireLen(data []byte) int {
	return len(bytes.TrimRight(data, "\r\n")) + 1
}
