package lan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// watcher follows one board; it lives in its own goroutine.
type watcher struct {
	l    *LAN
	b    *lanBoard
	sink fleet.Sink
	// parent is Run's context: when it is still alive as the watcher
	// stops, the board was removed.
	parent context.Context

	online     bool
	uptime     int64
	haveUptime bool
	// startedBy is the latest the board can have started, by this
	// driver's clock and the uptime read at the last session's opening.
	startedBy time.Time
	lastSeq   uint16
	// replayCheck: the next happening is the first of a new stream.
	replayCheck bool
	// opened is when the current session's stream opened (zero: not yet).
	opened time.Time
	// replayFloor (ms of the board's uptime, 0: none): a replay of kept
	// happenings (Options.ReplayKept) leaves out those older (their t_ms;
	// fleet.ReplayFloor).
	replayFloor int64
}

func (w *watcher) run(ctx context.Context) {
	backoff := w.l.o.MinBackoff
	for {
		w.opened = time.Time{}
		reason := w.session(ctx, &backoff)
		if ctx.Err() != nil {
			w.b.online.Store(false)
			// Removed while the driver still runs: say so. At shutdown,
			// boards are not lost, the gateway is.
			if w.online && w.parent.Err() == nil {
				w.sink.Lost(w.b.ref, "removed from the LAN driver")
			}
			return
		}
		if w.online && !w.opened.IsZero() && w.l.o.Clock.Since(w.opened) >= w.l.o.MinBackoff {
			// A stream that served for a while and ended is most often a
			// restart or a dropped connection: open it again at once, and
			// call the board lost only if that fails. A board restarting in
			// place answers at once; one that is down fails fast.
			w.l.log.Debug("lan: stream ended, reconnecting", "url", w.b.url, "board", w.id(), "reason", reason)
			w.opened = time.Time{}
			again := w.session(ctx, &backoff)
			if ctx.Err() != nil {
				continue
			}
			reason = again
		}
		if w.online {
			w.online = false
			w.b.online.Store(false)
			w.l.log.Warn("lan: board lost", "url", w.b.url, "board", w.id(), "reason", reason)
			w.sink.Lost(w.b.ref, reason)
		} else {
			w.l.log.Debug("lan: board not reachable", "url", w.b.url, "reason", reason)
		}
		if clock.Sleep(ctx, w.l.o.Clock, backoff) != nil {
			return
		}
		backoff = min(2*backoff, w.l.o.MaxBackoff)
	}
}

// session reads the board's identity, opens its stream, re-reads its
// states and follows the stream until it ends; it returns why it ended.
// The stream is followed from this small frame once open's large one has
// returned: a gateway holds one watcher per board blocked in a read, and
// the runtime shrinks a goroutine's stack to a size that is at least four
// times what is in use.
func (w *watcher) session(ctx context.Context, backoff *time.Duration) string {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, reason := w.open(ctx, sctx, backoff)
	if resp == nil {
		return reason
	}
	defer resp.Body.Close()
	return w.follow(sctx, cancel, resp)
}

// open reads the board's identity, opens its stream in sctx and re-reads
// its states; it returns the stream, or nil and why it failed.
func (w *watcher) open(ctx, sctx context.Context, backoff *time.Duration) (*http.Response, string) {
	sent := w.l.o.Clock.Now()
	info, err := w.l.get(ctx, w.b, "/info")
	got := w.l.o.Clock.Now()
	if err != nil {
		return nil, fmt.Sprintf("GET /info: %v", err)
	}
	var id struct {
		ID       string `json:"id"`
		Hostname string `json:"hostname"`
		UptimeS  *int64 `json:"uptime_s"`
	}
	if err := json.Unmarshal(info, &id); err != nil || id.UptimeS == nil {
		return nil, fmt.Sprintf("GET /info: %v: no uptime_s", fleet.ErrBadReply)
	}
	// The board started between startedAfter and startedBy: its uptime
	// is in whole seconds, read somewhere between sent and got.
	up := time.Duration(*id.UptimeS) * time.Second
	startedAfter, startedBy := sent.Add(-up-time.Second), got.Add(-up)
	switch {
	case !w.haveUptime:
	case *id.UptimeS < w.uptime:
		w.restarted("uptime went backwards")
	case startedAfter.Sub(w.startedBy) > restartSlack:
		// A board that restarted a while after its last start reads an
		// uptime no smaller than the one read then (both a second or
		// two), and its new boot may already be past the last seq given,
		// so that the replay does not show it either. Slow replies only
		// widen the bounds: they never make a restart of none.
		w.restarted("started again since last read")
	}
	w.uptime, w.startedBy, w.haveUptime = *id.UptimeS, startedBy, true
	w.l.mu.Lock()
	w.b.hostname, w.b.id = id.Hostname, id.ID
	w.l.mu.Unlock()

	req, err := w.l.request(sctx, w.b, http.MethodGet, "/events", nil)
	if err != nil {
		return nil, err.Error()
	}
	req.Header.Set("Accept", "text/event-stream")
	w.replayFloor = 0
	switch {
	case w.lastSeq != 0:
		req.Header.Set("Last-Event-ID", strconv.Itoa(int(w.lastSeq)))
	case w.l.o.ReplayKept:
		// Nothing of this boot seen yet: every happening it keeps of the
		// last fleet.ReplayRecent.
		req.Header.Set("Last-Event-ID", "0")
		w.replayFloor = fleet.ReplayFloor(time.Duration(w.uptime) * time.Second)
	}
	resp, err := w.l.openStream(sctx, req)
	if err != nil {
		return nil, fmt.Sprintf("%v: %v", ErrStream, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(http.MaxBytesReader(nil, resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Sprintf("%v: status %d %s", ErrStream, resp.StatusCode, bytes.TrimSpace(buf.Bytes()))
	}
	resp.Header = nil // read; the body refers to the reply, kept for the stream's life
	*backoff = w.l.o.MinBackoff
	w.opened = w.l.o.Clock.Now()
	if !w.online {
		w.l.log.Info("lan: board found", "url", w.b.url, "board", id.ID)
	}
	w.online = true
	w.b.online.Store(true)
	w.l.clockSoon(w.b)
	w.replayCheck = true
	w.sink.Seen(w.b.ref, info)
	for _, s := range StatePaths {
		state, err := w.l.get(ctx, w.b, s.Path)
		if err != nil {
			if ctx.Err() != nil {
				resp.Body.Close()
				return nil, "stopped"
			}
			w.l.log.Debug("lan: reading a state", "url", w.b.url, "path", s.Path, "err", err)
			continue
		}
		w.sink.Changed(w.b.ref, s.Kind, state)
	}
	return resp, ""
}

// restartSlack is how much later than the latest the last start can
// have been the earliest a board's start can be before it is taken for a
// new start.
const restartSlack = time.Second

func (w *watcher) restarted(why string) {
	w.l.log.Info("lan: board restarted", "url", w.b.url, "board", w.id(), "why", why)
	w.sink.Restarted(w.b.ref)
	w.lastSeq = 0
	w.b.clock.reset.Store(true)
	w.l.clockSoon(w.b)
}

// id is the board's id as last read (for logs).
func (w *watcher) id() string {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.b.id
}

// follow reads Server-Sent Events until the stream ends or stays silent
// for StreamIdle.
func (w *watcher) follow(ctx context.Context, cancel context.CancelFunc, resp *http.Response) string {
	var idle atomic.Bool
	t := w.l.o.Clock.AfterFunc(w.l.o.StreamIdle, func() { idle.Store(true); cancel() })
	defer t.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, scanBuffer), MaxReply)
	var event, id string
	var data []byte
	for sc.Scan() {
		t.Reset(w.l.o.StreamIdle)
		line := sc.Bytes()
		if len(line) == 0 {
			if len(data) > 0 {
				w.dispatch(event, id, data)
			}
			event, id, data = "", "", data[:0]
			continue
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			event = string(value)
		case "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		case "id":
			id = string(value)
		}
	}
	switch {
	case idle.Load():
		return fmt.Sprintf("%v: silent for %v", ErrStream, w.l.o.StreamIdle)
	case ctx.Err() != nil:
		return "stopped"
	case sc.Err() != nil:
		return fmt.Sprintf("%v: %v", ErrStream, sc.Err())
	}
	return fmt.Sprintf("%v: the board closed the stream", ErrStream)
}

// dispatch reports one stream message.
func (w *watcher) dispatch(kind, id string, data []byte) {
	if !json.Valid(data) {
		w.l.log.Warn("lan: event data is not JSON", "url", w.b.url, "kind", kind)
		return
	}
	if id == "" {
		var st struct {
			State json.RawMessage `json:"state"`
		}
		if json.Unmarshal(data, &st) != nil || st.State == nil {
			return
		}
		w.sink.Changed(w.b.ref, kind, st.State)
		return
	}
	n, err := strconv.ParseUint(id, 10, 16)
	if err != nil || n == 0 {
		w.l.log.Warn("lan: bad event id", "url", w.b.url, "id", id)
		return
	}
	seq := uint16(n)
	h := fleet.Happening{Kind: kind, Seq: seq, Data: data}
	if w.replayFloor > 0 {
		if h.Before(w.replayFloor) {
			return // kept from before fleet.ReplayRecent
		}
		w.replayFloor = 0 // the replay reached the recent ones
	}
	if w.replayCheck {
		w.replayCheck = false
		if w.lastSeq != 0 && !fleet.SeqAfter(seq, w.lastSeq) {
			w.restarted("event numbers started over")
		}
	}
	if !fleet.SeqAfter(seq, w.lastSeq) {
		return // seen already
	}
	w.lastSeq = seq
	h.Data = append(json.RawMessage(nil), data...)
	w.sink.Happened(w.b.ref, []fleet.Happening{h})
}
