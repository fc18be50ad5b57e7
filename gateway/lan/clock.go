package lan

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// Defaults of the clock alignment.
const (
	// DefaultClockEvery is the period of a board's measuring rounds while
	// its estimate settles or is not sharp enough.
	DefaultClockEvery = 5 * time.Second
	// DefaultClockMaxEvery is the longest period between two rounds of an
	// online board.
	DefaultClockMaxEvery = 30 * time.Second
	// DefaultClockTarget is the uncertainty a board's estimate, aged at
	// the crystal tolerance (timesync.MaxDrift) until the next round, is
	// kept within when the network allows it.
	DefaultClockTarget = 2 * time.Millisecond
	// DefaultClockSamples is the exchanges per board per round.
	DefaultClockSamples = 3
	// DefaultClockParallel is how many boards are measured at once.
	DefaultClockParallel = 8
	// clockFirst is how soon a board coming online (or restarting) is
	// measured, at the latest: until then it has no estimate, and a
	// timed fire calls it at the moment, a round trip late, instead of
	// telling it the moment ahead (a show started with the gateway).
	// The rounds of boards coming online together are spread over it,
	// and ClockParallel of them run at once whatever it is.
	clockFirst = time.Second
	// clockRetryPause is the least pause before each of the extra
	// exchanges of a round whose estimate missed ClockTarget (measure).
	clockRetryPause = 10 * time.Millisecond
	// clockSettle is how many rounds after a board comes online (or
	// restarts) run at ClockEvery whatever their estimate: the second one
	// checks the first against it (a step restarts the window).
	clockSettle = 2
)

// clockState is a board's clock filter, held by one measuring round at a
// time; reset is set by the board's watcher without waiting for it.
type clockState struct {
	mu     sync.Mutex
	filter timesync.Filter
	reset  atomic.Bool // the board restarted: forget the samples
	noTime bool        // the board answered 404 to GET /time (older firmware)
	// noAlign: the board answered 404 or 405 to PUT /time (no extension
	// clip-sync); not told again until it restarts.
	noAlign bool
	told    fleet.Told // what the board was told last (PUT /time)
	rounds  int        // rounds with an estimate since the last reset
	// blurred: the last round's estimate missed ClockTarget even with
	// its extra exchanges (measure): the network does not give sharper,
	// and the next round takes none.
	blurred bool

	// next and index belong to the schedule (clockQueue.mu): when the
	// board's next round is due, and its place in the queue (-1: not
	// queued).
	next  time.Time
	index int
}

// clockQueue is the schedule of the measuring rounds: the online boards
// ordered by when their next round is due. One goroutine takes the due
// ones off it and hands them to ClockParallel workers, which queue each
// board again after its round, so the driver runs the same few goroutines
// and one timer for any number of boards, and each board's rounds keep
// their own pace and phase (no fleet-wide bursts).
type clockQueue struct {
	mu   sync.Mutex
	on   bool // Run is measuring (alignment on, the sink takes clocks)
	h    clockHeap
	wake chan struct{} // the head of the queue changed
}

// clockHeap is a min-heap of boards by clock.next.
type clockHeap []*lanBoard

func (h clockHeap) Len() int           { return len(h) }
func (h clockHeap) Less(i, j int) bool { return h[i].clock.next.Before(h[j].clock.next) }
func (h clockHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].clock.index, h[j].clock.index = i, j
}
func (h *clockHeap) Push(x any) {
	b := x.(*lanBoard)
	b.clock.index = len(*h)
	*h = append(*h, b)
}
func (h *clockHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	b.clock.index = -1
	return b
}

// clockAt queues b's next round at at, or earlier when it is queued for
// earlier already.
func (l *LAN) clockAt(b *lanBoard, at time.Time) {
	q := &l.clockQ
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.on {
		return
	}
	switch {
	case b.clock.index < 0:
		b.clock.next = at
		heap.Push(&q.h, b)
	case at.Before(b.clock.next):
		b.clock.next = at
		heap.Fix(&q.h, b.clock.index)
	default:
		return
	}
	if b.clock.index == 0 {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// clockSoon queues a round of b within clockFirst (ClockEvery if
// shorter), at a random moment so that boards coming online together are
// not measured in one burst.
func (l *LAN) clockSoon(b *lanBoard) {
	if l.o.ClockEvery <= 0 {
		return // alignment off
	}
	l.clockAt(b, l.o.Clock.Now().Add(rand.N(min(l.o.ClockEvery, clockFirst))))
}

// due takes the first board whose round is due off the queue, or tells how
// long until one is (ok false; wait < 0: the queue is empty).
func (l *LAN) due() (b *lanBoard, wait time.Duration) {
	q := &l.clockQ
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.h) == 0 {
		return nil, -1
	}
	if wait := q.h[0].clock.next.Sub(l.o.Clock.Now()); wait > 0 {
		return nil, wait
	}
	return heap.Pop(&q.h).(*lanBoard), 0
}

// syncClocks runs the measuring rounds of the online boards until ctx
// ends: each board is measured within clockFirst of coming online (or
// restarting), then again after the period clockPeriod gives.
func (l *LAN) syncClocks(ctx context.Context, sink fleet.Sink) {
	cs, ok := sink.(fleet.ClockSink)
	if !ok || l.o.ClockEvery < 0 {
		return
	}
	q := &l.clockQ
	q.mu.Lock()
	q.on = true
	q.mu.Unlock()
	l.mu.Lock()
	for _, b := range l.boards {
		if b.online.Load() {
			l.clockSoon(b)
		}
	}
	l.mu.Unlock()
	work := make(chan *lanBoard)
	var wg sync.WaitGroup
	for range l.o.ClockParallel {
		wg.Go(func() {
			for b := range work {
				if next, ok := l.measure(ctx, b, cs); ok {
					l.clockAt(b, next)
				}
			}
		})
	}
	t := l.o.Clock.NewTimer(time.Hour)
	defer func() {
		t.Stop()
		close(work)
		wg.Wait()
		q.mu.Lock()
		q.on = false
		for _, b := range q.h {
			b.clock.index = -1
		}
		q.h = nil
		q.mu.Unlock()
	}()
	for {
		b, wait := l.due()
		if b != nil {
			if !b.online.Load() {
				continue // queued again when it comes back
			}
			select {
			case work <- b:
			case <-ctx.Done():
				return
			}
			continue
		}
		var tick <-chan time.Time
		if wait > 0 {
			t.Reset(wait)
			tick = t.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-q.wake:
			t.Stop()
		}
	}
}

// clockPeriod is how long after a round the next one of a board is due:
// ClockEvery while its estimate settles (the first clockSettle rounds
// after it came online or restarted) or when the round gave none;
// otherwise as long as its uncertainty, growing by timesync.MaxDrift with
// the estimate's age, stays within ClockTarget, bounded by ClockEvery and
// ClockMaxEvery. The period is then shortened by up to a tenth at random,
// so that boards measured together drift apart.
func (l *LAN) clockPeriod(e timesync.Estimate, got bool, rounds int) time.Duration {
	p := l.o.ClockEvery
	if got && rounds >= clockSettle {
		// The estimate may age room µs at MaxDrift µs per µs.
		if room := l.o.ClockTarget.Microseconds() - e.Uncertainty; room > 0 {
			p = time.Duration(min(float64(room)/timesync.MaxDrift*float64(time.Microsecond), float64(l.o.ClockMaxEvery)))
			p = max(p, l.o.ClockEvery)
		}
	}
	return p - rand.N(p/10+1)
}

// measure runs a round of ClockSamples exchanges with b, reports the
// estimate, and returns when the next round is due (ok false: never,
// until the board restarts). A round whose estimate is less sharp than
// ClockTarget takes up to ClockSamples more exchanges, each after a pause
// of 10-20 ms: exchanges one after the other tend to wait alike (a host
// busy with a timed fire's moment, a burst on the network), and a board
// whose estimate misses the target is not told fire moments
// (fleet.DefaultFireUncertainty): the gateway calls it at the moment, a
// round trip late, until its next round (ClockEvery later). A round after
// one that missed the target even so takes none: on a network that never
// gives sharper, they would only double the exchanges.
func (l *LAN) measure(ctx context.Context, b *lanBoard, cs fleet.ClockSink) (next time.Time, ok bool) {
	b.clock.mu.Lock()
	defer b.clock.mu.Unlock()
	if b.clock.reset.Swap(false) {
		b.clock.filter.Reset()
		b.clock.noTime = false
		b.clock.noAlign = false
		b.clock.told = fleet.Told{}
		b.clock.rounds = 0
		b.clock.blurred = false
	}
	if b.clock.noTime {
		return time.Time{}, false
	}
	// A round leans on no sample older than two fast periods: once the
	// rounds are further apart, each estimate is the round's own.
	b.clock.filter.MaxAge = 2 * l.o.ClockEvery
	var e timesync.Estimate
	got := false
	// The round's exchanges go one after another on a connection of the
	// round's own, closed after it (a new one if the board closes it).
	var c *boardConn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	target := l.o.ClockTarget.Microseconds()
	for i := 0; i < l.o.ClockSamples || (got && e.Uncertainty > target && !b.clock.blurred && i < 2*l.o.ClockSamples); i++ {
		if i >= l.o.ClockSamples {
			// A blurred round: its samples waited alike (a busy
			// moment of the host or the network, such as a timed
			// fire's); a few more, a pause apart, mostly do not.
			if clock.Sleep(ctx, l.o.Clock, clockRetryPause+rand.N(clockRetryPause)) != nil {
				break
			}
		}
		if c == nil {
			var err error
			if c, err = l.dial(ctx, b.u); err != nil {
				l.log.Debug("lan: clock round", "url", b.url, "err", err)
				break
			}
		}
		s, again, err := l.sample(ctx, c, b)
		if !again {
			c.Close()
			c = nil
		}
		if b.clock.noTime {
			break
		}
		if err != nil {
			l.log.Debug("lan: clock sample", "url", b.url, "err", err)
			continue
		}
		est, stepped, err := b.clock.filter.Add(s)
		if err != nil {
			l.log.Debug("lan: clock sample", "url", b.url, "err", err)
			continue
		}
		if stepped {
			l.log.Info("lan: board clock stepped", "url", b.url)
		}
		e, got = est, true
	}
	if b.clock.noTime {
		l.log.Info("lan: board has no GET /time; its clock is not aligned", "url", b.url)
		return time.Time{}, false
	}
	if got && ctx.Err() == nil {
		b.clock.blurred = e.Uncertainty > target
		b.clock.rounds++
		cs.Clock(b.ref, fleet.BoardClock{OffsetUS: e.Offset, UncertaintyUS: e.Uncertainty,
			SyncedAt: l.stamp.Time(e.At), Epoch: l.stamp.Time(-e.Offset), Via: "lan"})
		l.tellClock(ctx, b, e)
	}
	return l.o.Clock.Now().Add(l.clockPeriod(e, got, b.clock.rounds)), true
}

// tellClock tells b the alignment a round measured (PUT /time, extension
// clip-sync): the gateway's time, Unix µs, at which its clock read 0, so
// that the clips it plays follow the gateway's clock. An estimate is told
// when fleet.Told.Sharper says so: the board keeps a sharp old one
// (drifting at most 50 ppm) rather than take a blurred new one. A board without the extension (404, 405) is not told again until
// it restarts; any other failure waits for the next round. b.clock.mu is
// held.
func (l *LAN) tellClock(ctx context.Context, b *lanBoard, e timesync.Estimate) {
	if b.clock.noAlign || !b.clock.told.Sharper(e.Uncertainty, e.At) {
		return // a blurred estimate: the board keeps the sharper one it holds
	}
	epoch := -e.Offset
	body, _ := json.Marshal(boardapi.TimeAlign{EpochUS: &epoch, UncertaintyUS: e.Uncertainty})
	req, err := l.request(ctx, b, http.MethodPut, "/time", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	rep, err := l.do(req, b)
	switch {
	case err != nil:
		l.log.Debug("lan: telling the board its clock", "url", b.url, "err", err)
	case rep.Status == http.StatusNotFound || rep.Status == http.StatusMethodNotAllowed:
		b.clock.noAlign = true
		l.log.Debug("lan: board has no PUT /time (clip-sync); its clips play on its own clock", "url", b.url)
	case rep.Status != http.StatusOK:
		l.log.Debug("lan: telling the board its clock", "url", b.url, "status", rep.Status, "body", string(rep.Body))
	default:
		b.clock.told = fleet.Told{UncertaintyUS: e.Uncertainty, AtUS: e.At, Set: true}
	}
}

// sample is one exchange of GET /time?t1= on c; again reports whether c
// may carry the next one.
func (l *LAN) sample(ctx context.Context, c *boardConn, b *lanBoard) (s timesync.Sample, again bool, err error) {
	t1 := l.stamp.Now()
	req, err := l.request(ctx, b, http.MethodGet, "/time?t1="+strconv.FormatInt(t1, 10), nil)
	if err != nil {
		return s, true, err
	}
	_ = c.conn.SetDeadline(time.Now().Add(l.o.ClockEvery))
	resp, err := c.send(req)
	if err != nil {
		return s, false, fmt.Errorf("%w: %s GET /time: %v", fleet.ErrUnreachable, b.url, err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTimeReply+1))
	t4 := l.stamp.Now()
	resp.Body.Close()
	if err != nil || len(body) > maxTimeReply {
		return s, false, fmt.Errorf("%w: %s GET /time: reading the reply: %v", fleet.ErrBadReply, b.url, err)
	}
	again = !resp.Close
	if resp.StatusCode == http.StatusNotFound {
		b.clock.noTime = true
	}
	if resp.StatusCode != http.StatusOK {
		return s, again, fmt.Errorf("%w: GET /time: %d %s", fleet.ErrBadReply, resp.StatusCode, bytes.TrimSpace(body))
	}
	var tr boardapi.TimeReply
	if err := json.Unmarshal(body, &tr); err != nil || tr.T1 == nil || *tr.T1 != t1 {
		return s, again, fmt.Errorf("%w: GET /time: %s", fleet.ErrBadReply, bytes.TrimSpace(body))
	}
	return timesync.Sample{T1: t1, T2: tr.T2, T3: tr.T3, T4: t4}, again, nil
}

// maxTimeReply bounds the reply to GET /time read (it is about 70 bytes).
const maxTimeReply = 4 << 10
