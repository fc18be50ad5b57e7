package lan

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// Defaults of the clock alignment.
const (
	// DefaultClockEvery is the period of the measuring rounds.
	DefaultClockEvery = 5 * time.Second
	// DefaultClockSamples is the exchanges per board per round.
	DefaultClockSamples = 3
	// DefaultClockParallel is how many boards are measured at once.
	DefaultClockParallel = 8
)

// clockState is a board's clock filter, held by one measuring round at a
// time; reset is set by the board's watcher without waiting for it.
type clockState struct {
	mu     sync.Mutex
	filter timesync.Filter
	reset  atomic.Bool // the board restarted: forget the samples
	noTime bool        // the board answered 404 to GET /time (older firmware)
}

// syncClocks measures every online board each ClockEvery until ctx ends.
func (l *LAN) syncClocks(ctx context.Context, sink fleet.Sink) {
	cs, ok := sink.(fleet.ClockSink)
	if !ok || l.o.ClockEvery < 0 {
		return
	}
	t := l.o.Clock.NewTicker(l.o.ClockEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		l.mu.Lock()
		var due []*lanBoard
		for _, b := range l.boards {
			if b.online.Load() {
				due = append(due, b)
			}
		}
		l.mu.Unlock()
		sem := make(chan struct{}, l.o.ClockParallel)
		var wg sync.WaitGroup
		for _, b := range due {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				l.measure(ctx, b, cs)
			}()
		}
		wg.Wait()
	}
}

// measure runs ClockSamples exchanges with b and reports the estimate.
func (l *LAN) measure(ctx context.Context, b *lanBoard, cs fleet.ClockSink) {
	b.clock.mu.Lock()
	defer b.clock.mu.Unlock()
	if b.clock.reset.Swap(false) {
		b.clock.filter.Reset()
		b.clock.noTime = false
	}
	if b.clock.noTime {
		return
	}
	var e timesync.Estimate
	got := false
	for range l.o.ClockSamples {
		s, err := l.sample(ctx, b)
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
	}
	if got && ctx.Err() == nil {
		cs.Clock(b.ref, fleet.BoardClock{OffsetUS: e.Offset, UncertaintyUS: e.Uncertainty,
			SyncedAt: l.stamp.Time(e.At), Epoch: l.stamp.Time(-e.Offset), Via: "lan"})
	}
}

// sample is one exchange of GET /time?t1=.
func (l *LAN) sample(ctx context.Context, b *lanBoard) (timesync.Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, l.o.ClockEvery)
	defer cancel()
	t1 := l.stamp.Now()
	req, err := l.request(ctx, b, http.MethodGet, "/time?t1="+strconv.FormatInt(t1, 10), nil)
	if err != nil {
		return timesync.Sample{}, err
	}
	rep, err := l.do(req, b)
	t4 := l.stamp.Now()
	if err != nil {
		return timesync.Sample{}, err
	}
	if rep.Status == http.StatusNotFound {
		b.clock.noTime = true
	}
	if rep.Status != http.StatusOK {
		return timesync.Sample{}, fmt.Errorf("%w: GET /time: %d %s", fleet.ErrBadReply, rep.Status, rep.Body)
	}
	var tr boardapi.TimeReply
	if err := json.Unmarshal(rep.Body, &tr); err != nil || tr.T1 == nil || *tr.T1 != t1 {
		return timesync.Sample{}, fmt.Errorf("%w: GET /time: %s", fleet.ErrBadReply, rep.Body)
	}
	return timesync.Sample{T1: t1, T2: tr.T2, T3: tr.T3, T4: t4}, nil
}
