package metrics

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metricname"
)

// Defaults of BoardsOptions.
const (
	// DefaultPollEvery is how often Boards reads each online board's GET
	// /link (and GET /info when the board sends no system events). On a
	// 115200 baud line each read takes tens of milliseconds of line time,
	// so a slow period keeps the cost near 1% on a full line.
	DefaultPollEvery = 60 * time.Second
	// DefaultCallTimeout bounds one poll call.
	DefaultCallTimeout = 5 * time.Second
	// systemFresh is how long a system event stands in for GET /info:
	// boards send one every 15 s when they can push events (LAN, UART);
	// on RS485 state changes are never fetched, so those boards are read.
	systemFresh = 40 * time.Second
	// soonQueue holds boards that just came online, to read at once.
	soonQueue = 256
)

// BoardsSource is what Boards reads; *fleet.Fleet is one.
type BoardsSource interface {
	Boards(fleet.Filter) []fleet.BoardView
	Watch(ctx context.Context, f fleet.Filter, after uint64) *fleet.Watcher
	Call(ctx context.Context, id, method, path string, body []byte) (fleet.Reply, error)
}

// BoardsOptions configure Boards.
type BoardsOptions struct {
	Clock clock.Clock
	Log   *slog.Logger
	// PollEvery is the period of the GET /link (and GET /info) reads;
	// default DefaultPollEvery, negative turns polling off (the values
	// then come from events only).
	PollEvery   time.Duration
	CallTimeout time.Duration
}

// Boards keeps the latest health figures of each board and collects them:
//
//	holo_gateway_board_uptime_seconds{board}    time since the board started
//	holo_gateway_board_heap_free_bytes{board}   free memory
//	holo_gateway_board_wifi_rssi_dbm{board}     station signal, when connected
//	holo_gateway_board_link_*_total{board}      the board's own link counters
//	holo_gateway_board_clock_offset_seconds{board}       board clock - gateway clock
//	holo_gateway_board_clock_uncertainty_seconds{board}  give or take
//
// Uptime, memory and signal come from the boards' system state events, or
// from GET /info for boards that send none; they are exported while the
// board is online (uptime advanced by the time since the sample). The
// link counters come from GET /link (polled every PollEvery, and read by
// the fleet after each restart); they count since the board started.
type Boards struct {
	src  BoardsSource
	o    BoardsOptions
	clk  clock.Clock
	log  *slog.Logger
	soon chan string

	mu     sync.Mutex
	boards map[string]*boardSample

	uptime, heapFree, rssi *prometheus.Desc
	clockOffset, clockUnc  *prometheus.Desc
	link                   []linkMetric
}

// boardSample is what Boards knows of one board. Guarded by Boards.mu.
type boardSample struct {
	hasSystem bool
	uptime    float64 // seconds, at sampled
	heapFree  float64
	rssi      *int
	sampled   time.Time // when the system figures were taken
	eventAt   time.Time // when the last system event came (zero: none)
	link      *boardapi.LinkCounters
	noLink    bool // GET /link answered 404: the board has no link
}

type linkMetric struct {
	desc *prometheus.Desc
	get  func(boardapi.LinkCounters) uint64
}

// NewBoards returns the Boards collector of src; Run feeds it.
func NewBoards(src BoardsSource, o BoardsOptions) *Boards {
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	if o.PollEvery == 0 {
		o.PollEvery = DefaultPollEvery
	}
	o.CallTimeout = defaults.Positive(o.CallTimeout, DefaultCallTimeout)
	b := &Boards{src: src, o: o, clk: o.Clock, log: o.Log, soon: make(chan string, soonQueue), boards: map[string]*boardSample{},
		uptime:   prometheus.NewDesc(metricname.GatewayBoardUptimeSeconds, "Time since the board started, from its last system report.", []string{"board"}, nil),
		heapFree: prometheus.NewDesc(metricname.GatewayBoardHeapFreeBytes, "Free memory of the board, from its last system report.", []string{"board"}, nil),
		rssi:     prometheus.NewDesc(metricname.GatewayBoardWiFiRSSIDBm, "Signal strength of the board's Wi-Fi station link, in dBm, while connected.", []string{"board"}, nil),
		clockOffset: prometheus.NewDesc(metricname.GatewayBoardClockOffsetSeconds,
			"The board's monotonic clock (time since its boot) minus the gateway's (Unix time), as last aligned, while online.", []string{"board"}, nil),
		clockUnc: prometheus.NewDesc(metricname.GatewayBoardClockUncertaintySeconds,
			"How far the true clock offset may be from board_clock_offset_seconds.", []string{"board"}, nil),
	}
	l := func(n, help string, get func(boardapi.LinkCounters) uint64) linkMetric {
		return linkMetric{prometheus.NewDesc(n, help+" (the board's count since it started).", []string{"board"}, nil), get}
	}
	b.link = []linkMetric{
		l(metricname.GatewayBoardLinkReceiveBytesTotal, "Bytes the board received on its host link", func(c boardapi.LinkCounters) uint64 { return c.RxBytes }),
		l(metricname.GatewayBoardLinkTransmitBytesTotal, "Bytes the board sent on its host link", func(c boardapi.LinkCounters) uint64 { return c.TxBytes }),
		l(metricname.GatewayBoardLinkFramesTotal, "Native frames the board took", func(c boardapi.LinkCounters) uint64 { return c.Frames }),
		l(metricname.GatewayBoardLinkJSONLinesTotal, "JSON lines the board took", func(c boardapi.LinkCounters) uint64 { return c.Lines }),
		l(metricname.GatewayBoardLinkErrorsTotal, "Error replies the board sent on its link", func(c boardapi.LinkCounters) uint64 { return c.Errors }),
		l(metricname.GatewayBoardLinkBadCRCTotal, "Frames the board dropped for a bad CRC", func(c boardapi.LinkCounters) uint64 { return c.BadCRC }),
		l(metricname.GatewayBoardLinkBadFramesTotal, "Frames the board dropped as malformed", func(c boardapi.LinkCounters) uint64 { return c.BadFrames }),
		l(metricname.GatewayBoardLinkGarbageTotal, "Byte runs the board skipped as garbage", func(c boardapi.LinkCounters) uint64 { return c.Garbage }),
		l(metricname.GatewayBoardLinkOverrunsTotal, "Times the board's receive buffer overflowed", func(c boardapi.LinkCounters) uint64 { return c.Overruns }),
		l(metricname.GatewayBoardLinkTimeoutsTotal, "Requests the board gave up receiving", func(c boardapi.LinkCounters) uint64 { return c.Timeouts }),
		l(metricname.GatewayBoardLinkTransmitDroppedTotal, "Bytes the board could not send", func(c boardapi.LinkCounters) uint64 { return c.TxDropped }),
	}
	return b
}

// Run follows the fleet's events and polls the boards until ctx ends.
func (b *Boards) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { b.watch(ctx) })
	if b.o.PollEvery > 0 {
		wg.Go(func() { b.poll(ctx) })
	}
	wg.Wait()
	return nil
}

// watch reads the fleet's events; when the watcher falls behind it starts
// again where it left off.
func (b *Boards) watch(ctx context.Context) {
	after := fleet.Live // count from now on
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		w := b.src.Watch(wctx, fleet.Filter{}, after)
		for ev := range w.C {
			after = ev.N
			b.event(ev)
		}
		cancel()
		if ctx.Err() == nil {
			b.log.Warn("metrics: fell behind the event stream; following again", "dropped", w.Dropped())
		}
	}
}

// system is the state of the boards' system events.
type system struct {
	UptimeS  *float64 `json:"uptime_s"`
	HeapFree *float64 `json:"heap_free"`
	RSSI     *int     `json:"rssi"`
}

// infoHealth is the part of GET /info that Boards reads.
type infoHealth struct {
	UptimeS  *float64 `json:"uptime_s"`
	HeapFree *float64 `json:"heap_free"`
	STA      *struct {
		Connected bool `json:"connected"`
		RSSI      int  `json:"rssi"`
	} `json:"sta"`
}

// event takes one fleet event.
func (b *Boards) event(ev fleet.Event) {
	switch {
	case ev.Type == fleet.EventState && ev.Kind == "system":
		var s system
		if json.Unmarshal(ev.Data, &s) != nil || s.UptimeS == nil {
			return
		}
		b.setSystem(ev.Board, s, ev.Time, true)
	case ev.Type == fleet.EventState && ev.Kind == "link":
		var st boardapi.LinkState
		if json.Unmarshal(ev.Data, &st) == nil {
			b.setLink(ev.Board, st.Counters)
		}
	case ev.Type == fleet.EventRestarted:
		b.mu.Lock()
		delete(b.boards, ev.Board) // figures of the last boot; the fleet reads /link again
		b.mu.Unlock()
		b.readSoon(ev.Board)
	case ev.Type == fleet.EventOnline:
		b.readSoon(ev.Board)
	}
}

func (b *Boards) readSoon(id string) {
	if b.o.PollEvery <= 0 {
		return
	}
	select {
	case b.soon <- id:
	default: // the next round reads it
	}
}

// sample returns the sample of board id, made when missing. Call with
// b.mu held.
func (b *Boards) sampleLocked(id string) *boardSample {
	s := b.boards[id]
	if s == nil {
		s = &boardSample{}
		b.boards[id] = s
	}
	return s
}

func (b *Boards) setSystem(id string, s system, at time.Time, fromEvent bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bs := b.sampleLocked(id)
	bs.hasSystem, bs.uptime, bs.sampled, bs.rssi = true, *s.UptimeS, at, s.RSSI
	if s.HeapFree != nil {
		bs.heapFree = *s.HeapFree
	}
	if fromEvent {
		bs.eventAt = at
	}
}

func (b *Boards) setLink(id string, c boardapi.LinkCounters) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sampleLocked(id).link = &c
}

// poll reads every online board each PollEvery, and boards that just came
// online at once.
func (b *Boards) poll(ctx context.Context) {
	t := b.clk.NewTicker(b.o.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-b.soon:
			b.read(ctx, id)
		case <-t.C():
			online := true
			for _, v := range b.src.Boards(fleet.Filter{Online: &online}) {
				if ctx.Err() != nil {
					return
				}
				b.read(ctx, v.ID)
			}
		}
	}
}

// read polls one board: GET /link unless it has none, GET /info unless a
// system event came lately.
func (b *Boards) read(ctx context.Context, id string) {
	b.mu.Lock()
	bs := b.sampleLocked(id)
	noLink := bs.noLink
	needInfo := bs.eventAt.IsZero() || b.clk.Since(bs.eventAt) > systemFresh
	b.mu.Unlock()
	if !noLink {
		rep, err := b.get(ctx, id, "/link")
		switch {
		case err != nil:
			b.log.Debug("metrics: reading GET /link", "board", id, "err", err)
		case rep.Status == http.StatusNotFound:
			b.mu.Lock()
			b.sampleLocked(id).noLink = true
			b.mu.Unlock()
		case rep.Status == http.StatusOK:
			var st boardapi.LinkState
			if err := json.Unmarshal(rep.Body, &st); err == nil {
				b.setLink(id, st.Counters)
			} else {
				b.log.Debug("metrics: GET /link reply", "board", id, "err", err)
			}
		}
	}
	if !needInfo {
		return
	}
	rep, err := b.get(ctx, id, "/info")
	if err != nil || rep.Status != http.StatusOK {
		b.log.Debug("metrics: reading GET /info", "board", id, "status", rep.Status, "err", err)
		return
	}
	var in infoHealth
	if json.Unmarshal(rep.Body, &in) != nil || in.UptimeS == nil {
		return
	}
	s := system{UptimeS: in.UptimeS, HeapFree: in.HeapFree}
	if in.STA != nil && in.STA.Connected {
		s.RSSI = &in.STA.RSSI
	}
	b.setSystem(id, s, b.clk.Now(), false)
}

func (b *Boards) get(ctx context.Context, id, path string) (fleet.Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.CallTimeout)
	defer cancel()
	return b.src.Call(ctx, id, http.MethodGet, path, nil)
}

// Describe implements prometheus.Collector.
func (b *Boards) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.uptime
	ch <- b.heapFree
	ch <- b.rssi
	ch <- b.clockOffset
	ch <- b.clockUnc
	for _, m := range b.link {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector.
func (b *Boards) Collect(ch chan<- prometheus.Metric) {
	views := b.src.Boards(fleet.Filter{})
	now := b.clk.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	known := make(map[string]bool, len(views))
	for _, v := range views {
		known[v.ID] = true
		if c := v.Clock; c != nil && v.Online {
			ch <- prometheus.MustNewConstMetric(b.clockOffset, prometheus.GaugeValue, float64(c.OffsetUS)/1e6, v.ID)
			ch <- prometheus.MustNewConstMetric(b.clockUnc, prometheus.GaugeValue, float64(c.UncertaintyUS)/1e6, v.ID)
		}
		bs := b.boards[v.ID]
		if bs == nil {
			continue
		}
		if v.Online && bs.hasSystem {
			up := bs.uptime + max(0, now.Sub(bs.sampled).Seconds())
			ch <- prometheus.MustNewConstMetric(b.uptime, prometheus.GaugeValue, up, v.ID)
			ch <- prometheus.MustNewConstMetric(b.heapFree, prometheus.GaugeValue, bs.heapFree, v.ID)
			if bs.rssi != nil {
				ch <- prometheus.MustNewConstMetric(b.rssi, prometheus.GaugeValue, float64(*bs.rssi), v.ID)
			}
		}
		if bs.link != nil {
			for _, m := range b.link {
				ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.get(*bs.link)), v.ID)
			}
		}
	}
	for id := range b.boards {
		if !known[id] {
			delete(b.boards, id)
		}
	}
}
