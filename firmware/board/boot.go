package board

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/metrics"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/fire"
	"github.com/holofleet/holofleet/firmware/httpapi"
	"github.com/holofleet/holofleet/firmware/longop"
	"github.com/holofleet/holofleet/firmware/openapi"
	"github.com/holofleet/holofleet/firmware/settings"
	"github.com/holofleet/holofleet/firmware/timesync"
	"github.com/holofleet/holofleet/firmware/web"
)

// Boot is one run of the firmware, from a start to the next restart. The
// features hang off it; a restart closes it and builds a new one.
type Boot struct {
	Board    *Board
	Clock    clock.Clock
	Log      *slog.Logger
	Started  time.Time
	Hub      *events.Hub
	Web      *web.Settings
	Settings *settings.Service
	HTTP     *httpapi.Server
	// Network reports the station and access point for /info; the
	// network feature replaces the default.
	Network NetworkInfo
	// Long is the board-wide lock of long operations (409 busy).
	Long *longop.Lock
	// Fire makes the changes requests scheduled (fire_at, at_ms) at their
	// moments; AddFeature installs it on every route with Prepare.
	Fire *fire.Scheduler
	// BoardClock is the boot's monotonic clock (µs since it started, the
	// clock of GET /time and fire_at); Align is its alignment with the
	// gateway's clock (PUT /time, extension clip-sync).
	BoardClock timesync.Clock
	Align      *timesync.Aligner
	// Firmware, when set, is the description of the image this boot runs
	// (fleet mode boots images from its slots inside one process, whose
	// own description would be wrong); nil means the running executable.
	Firmware *buildinfo.App

	// Status parts fill the native status block (STATUS, I2C STATUS):
	// each feature contributes the bytes it owns.
	statusParts []func(*frame.StatusBlock)

	addr       net.Addr
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	features   map[string]bool // /info features: the specification's names
	extensions map[string]bool // /info extensions
	closers    []func()
	closing    bool
	inflight   sync.WaitGroup
	values     map[any]any
}

// Go runs f in a goroutine owned by the boot: its context ends when the
// boot closes, and Close waits for f to return.
func (boot *Boot) Go(f func(ctx context.Context)) {
	boot.wg.Add(1)
	go func() {
		defer boot.wg.Done()
		f(boot.ctx)
	}()
}

// Addr is the address of the board's HTTP listener.
func (boot *Boot) Addr() net.Addr { return boot.addr }

// Context ends when the boot closes.
func (boot *Boot) Context() context.Context { return boot.ctx }

// AddStatus registers a contributor to the native status block.
func (boot *Boot) AddStatus(f func(*frame.StatusBlock)) {
	boot.mu.Lock()
	defer boot.mu.Unlock()
	boot.statusParts = append(boot.statusParts, f)
}

// StatusBlock assembles the native status block from every feature.
func (boot *Boot) StatusBlock() frame.StatusBlock {
	sb := frame.StatusBlock{Scene: frame.SceneNone, Remaining: frame.NoRemaining, Holo: frame.HoloCannotMove}
	boot.mu.Lock()
	parts := append([]func(*frame.StatusBlock){}, boot.statusParts...)
	boot.mu.Unlock()
	for _, p := range parts {
		p(&sb)
	}
	sb.Seq = boot.Hub.Latest()
	return sb
}

// Set stores a value features share within the boot (for example the LED
// controller that scenes drive), under a key type of the providing package.
func (boot *Boot) Set(key, v any) {
	boot.mu.Lock()
	defer boot.mu.Unlock()
	boot.values[key] = v
}

// Value returns what Set stored under key, or nil.
func (boot *Boot) Value(key any) any {
	boot.mu.Lock()
	defer boot.mu.Unlock()
	return boot.values[key]
}

// NetworkInfo reports the network part of GET /info.
type NetworkInfo interface {
	Station() Station
	AccessPoint() APInfo
	// ViaAP reports whether a request arrived on the access point.
	ViaAP(r *http.Request) bool
}

// Station is the sta object of GET /info.
type Station struct {
	Enabled   bool     `json:"enabled"`
	Connected bool     `json:"connected"`
	SSID      string   `json:"ssid"`
	IP        string   `json:"ip"`
	RSSI      int      `json:"rssi"`
	Channel   int      `json:"channel"`
	IPv6      []string `json:"ipv6"`
}

// wiredNetwork is the network report of a simulated board before the
// network feature is installed: the host's own interface, as if joined.
type wiredNetwork struct{ addr net.Addr }

func (w wiredNetwork) Station() Station {
	ip := ""
	if ta, ok := w.addr.(*net.TCPAddr); ok {
		ip = ta.IP.String()
	}
	return Station{Enabled: true, Connected: true, SSID: "host", IP: ip, RSSI: -40, Channel: 1, IPv6: []string{}}
}
func (wiredNetwork) AccessPoint() APInfo      { return APInfo{} }
func (wiredNetwork) ViaAP(*http.Request) bool { return false }

func newBoot(b *Board, addr net.Addr) (*Boot, error) {
	boot := &Boot{Board: b, Clock: b.clk, Log: b.log, Started: b.clk.Now(), addr: addr,
		features: map[string]bool{}, extensions: map[string]bool{}, Network: wiredNetwork{addr}, values: map[any]any{},
		Long: &longop.Lock{Idle: b.cfg.StallTimeout, MinRate: b.cfg.MinRate, RateWindow: b.cfg.RateWindow, Clock: b.clk}}
	boot.ctx, boot.cancel = context.WithCancel(context.Background())
	boot.OnClose(boot.wg.Wait)
	boot.OnClose(boot.cancel)
	// Clients without the password (when one is set) may not take the
	// last event stream: it is kept for the gateway, which sends it.
	boot.Hub = events.New(b.clk, b.log.With("part", "events"), events.Options{Uptime: boot.Uptime, Trusted: httpapi.Trusted})
	boot.OnClose(boot.Hub.Close)
	// A long operation cut because its client stalled is told in the
	// system state at once (an upload's own client no longer listens).
	boot.Long.OnCut = func(c longop.Cut) {
		boot.Log.Warn("board: long operation cut: its client stalled", "what", c.What, "bytes", c.Bytes, "idle", c.Idle, "reason", c.Reason)
		boot.Hub.SetState(events.KindSystem, boot.System())
	}
	ws, err := web.Load(b.db.Bucket("web"), b.identity.DefaultHostname())
	if err != nil {
		boot.Close()
		return nil, err
	}
	boot.Web = ws
	st, err := settings.Load(b.db.Bucket("settings"), boot.Hub)
	if err != nil {
		boot.Close()
		return nil, err
	}
	boot.Settings = st
	boot.HTTP = httpapi.New(ws, httpapi.Options{Log: b.log.With("part", "http"), Clock: b.clk})
	boardClock := timesync.New(b.clk, boot.Started)
	boot.Fire = fire.New(fire.Options{Clock: b.clk, Board: boardClock, Log: b.log.With("part", "fire")})
	boot.Go(boot.Fire.Run)
	boot.AddExtension(boardapi.ExtensionFire)
	boot.AddFeature("settings", st.Routes()...)
	boot.AddFeature("", ws.Routes()...)
	boot.AddFeature("events", boot.Hub.Route())
	boot.AddFeature("", boot.deviceRoutes()...)
	boot.AddExtension(boardapi.ExtensionTime, boardClock.Route())
	boot.BoardClock, boot.Align = boardClock, timesync.NewAligner(boardClock)
	boot.AddExtension(boardapi.ExtensionClipSync, boot.Align.Route())
	boot.AddFeature("", openapi.Route(boot.HTTP, func() string { return boot.App().Version }))
	stop := boot.Hub.Every(events.KindSystem, events.SystemPeriod, func() (any, bool) { return boot.System(), true })
	boot.OnClose(stop)

	var errs []error
	for _, f := range b.cfg.Features {
		if err := f(boot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		boot.Close()
		return nil, err
	}
	return boot, nil
}

// AddFeature registers routes; a non-empty name is listed in /info's
// features, which holds only the specification's names
// (boardapi.Features): any other name panics, as a programming error every
// boot finds at once. Extensions go through AddExtension. Routes with
// Prepare also take a moment to make their change at (boot.Fire).
func (boot *Boot) AddFeature(name string, routes ...api.Route) {
	if name != "" && !boardapi.IsFeature(name) {
		panic(fmt.Sprintf("board: %q is not a feature of the specification; add it with AddExtension", name))
	}
	boot.add(boot.features, name, routes)
}

// AddExtension registers routes of an extension of the board API; a
// non-empty name is listed in /info's extensions (boardapi.Extension*).
func (boot *Boot) AddExtension(name string, routes ...api.Route) {
	boot.add(boot.extensions, name, routes)
}

func (boot *Boot) add(names map[string]bool, name string, routes []api.Route) {
	boot.mu.Lock()
	if name != "" {
		names[name] = true
	}
	boot.mu.Unlock()
	if boot.Fire != nil {
		routes = slices.Clone(routes)
		for i, r := range routes {
			routes[i] = boot.Fire.Wrap(r)
		}
	}
	boot.HTTP.Handle(routes...)
}

// OnClose registers a function run when the boot ends, last first.
func (boot *Boot) OnClose(f func()) {
	boot.mu.Lock()
	defer boot.mu.Unlock()
	boot.closers = append(boot.closers, f)
}

// Close ends the boot: every feature stops.
//
// It first refuses new HTTP requests, ends the event streams, and waits
// (at most DrainWait) for the requests still being served, so no handler
// runs on a feature that is being closed; then it closes the features,
// last registered first.
func (boot *Boot) Close() {
	boot.mu.Lock()
	cl := boot.closers
	boot.closers = nil
	already := boot.closing
	boot.closing = true
	boot.mu.Unlock()
	if !already {
		if boot.Hub != nil {
			boot.Hub.Close() // ends SSE streams, which are requests too
		}
		drained := make(chan struct{})
		go func() { boot.inflight.Wait(); close(drained) }()
		t := time.NewTimer(DrainWait)
		select {
		case <-drained:
		case <-t.C:
			boot.Log.Warn("board: requests still running at restart", "waited", DrainWait)
		}
		t.Stop()
	}
	for i := len(cl) - 1; i >= 0; i-- {
		cl[i]()
	}
}

// DrainWait bounds how long a closing boot waits for requests in flight
// (a firmware upload cut by a restart is cancelled by its own closer).
const DrainWait = 5 * time.Second

// ServeHTTP serves the API of this boot; once the boot is closing, a
// request is answered 503 restarting.
func (boot *Boot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !boot.serve(w, r) {
		api.WriteError(w, api.Errorf(ErrRestarting, "the board is restarting"))
	}
}

// serve serves r unless the boot is closing; it reports whether it did.
func (boot *Boot) serve(w http.ResponseWriter, r *http.Request) bool {
	boot.mu.Lock()
	if boot.closing {
		boot.mu.Unlock()
		return false
	}
	boot.inflight.Add(1)
	boot.mu.Unlock()
	defer boot.inflight.Done()
	boot.HTTP.ServeHTTP(w, r)
	return true
}

// App is the description of the firmware this boot runs.
func (boot *Boot) App() buildinfo.App {
	if boot.Firmware != nil {
		return *boot.Firmware
	}
	return buildinfo.Running()
}

// Uptime is the time since this boot started.
func (boot *Boot) Uptime() time.Duration { return boot.Clock.Since(boot.Started) }

// Features lists the feature names for /info, sorted.
func (boot *Boot) Features() []string { return boot.sorted(boot.features) }

// Extensions lists the extension names for /info, sorted.
func (boot *Boot) Extensions() []string { return boot.sorted(boot.extensions) }

func (boot *Boot) sorted(names map[string]bool) []string {
	boot.mu.Lock()
	defer boot.mu.Unlock()
	out := make([]string, 0, len(names))
	for f := range names {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// Info is the reply of GET /info.
type Info struct {
	API      int           `json:"api"`
	Firmware buildinfo.App `json:"firmware"`
	Chip     string        `json:"chip"`
	Hostname string        `json:"hostname"`
	ID       string        `json:"id"`
	UptimeS  int64         `json:"uptime_s"`
	HeapFree int64         `json:"heap_free"`
	Features []string      `json:"features" doc:"the specification's API areas this board serves: any of ota, files, screen, leds, holo, scenes, settings, network, events, link"`
	// Extensions are the holofleet extensions this board serves
	// (boardapi.Extension*), kept out of features so that it holds only
	// the specification's values.
	Extensions []string `json:"extensions" doc:"holofleet extensions of the board API this board serves: fire (fire_at and at_ms), time (GET /time), link-i2c (the host link as an I2C target), ota-delta (PUT /ota/image takes a delta image with base), clip-sync (PUT /time aligns the board's clock with the gateway's; clips play on it)"`
	Auth       bool     `json:"auth"`
	Via        string   `json:"via"`
	STA        Station  `json:"sta"`
	AP         APInfo   `json:"ap"`
}

// APInfo is the ap object of GET /info: whether the access point is on,
// its name, the seconds left of a timed one (null when off or staying on)
// and its address ("" when off).
type APInfo struct {
	On     bool   `json:"on"`
	Name   string `json:"name"`
	OffInS *int   `json:"off_in_s"`
	IP     string `json:"ip"`
}

// SimHeap is the RAM a simulated board reports its free memory against.
const SimHeap = 320 << 10

// HeapFree reports free memory in bytes. The simulator models a board
// with SimHeap bytes of RAM and charges it the Go heap in use divided by
// 64, so the figure moves with load and stays in a board's range. It reads
// runtime/metrics, which does not stop the world as ReadMemStats would.
func HeapFree() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	var inUse uint64
	if sample[0].Value.Kind() == metrics.KindUint64 {
		inUse = sample[0].Value.Uint64()
	}
	used := int64(inUse / 64)
	if used > SimHeap-16<<10 {
		used = SimHeap - 16<<10
	}
	return SimHeap - used
}

// InfoFor builds GET /info as seen by request r (nil: over the link).
func (boot *Boot) InfoFor(r *http.Request) Info {
	via := "sta"
	if r != nil && boot.Network.ViaAP(r) {
		via = "ap"
	}
	return Info{
		API: 1, Firmware: boot.App(), Chip: buildinfo.Chip,
		Hostname: boot.Web.Hostname(), ID: boot.Board.identity.ID,
		UptimeS: int64(boot.Uptime() / time.Second), HeapFree: HeapFree(),
		Features: boot.Features(), Extensions: boot.Extensions(), Auth: boot.Web.HasPassword(), Via: via,
		STA: boot.Network.Station(), AP: boot.Network.AccessPoint(),
	}
}

// System is the state of the system event kind, sent every 15 s.
type System struct {
	UptimeS  int64 `json:"uptime_s"`
	HeapFree int64 `json:"heap_free"`
	RSSI     *int  `json:"rssi"`
	// LastCut is the last long operation of this boot cut because its
	// client stalled; absent when none was.
	LastCut *LongOpCut `json:"last_cut,omitempty"`
}

// LongOpCut is a long operation (upload, pull, download) cut because its
// client sent or took no byte for the stall timeout.
type LongOpCut struct {
	What   string `json:"what" doc:"the operation, such as uploading /clips/a.mov or firmware upload"`
	Bytes  int64  `json:"bytes" doc:"bytes that passed before it stalled"`
	IdleMS int64  `json:"idle_ms" doc:"how long it waited, ms (the rate window for too_slow, the time it ran for deadline)"`
	Reason string `json:"reason" doc:"stalled (no byte for the stall timeout), too_slow (under the minimum rate) or deadline (past the deadline of its length)"`
	TMs    int64  `json:"t_ms" doc:"board uptime when it was cut, ms"`
}

// System returns the system state now.
func (boot *Boot) System() System {
	s := System{UptimeS: int64(boot.Uptime() / time.Second), HeapFree: HeapFree()}
	if st := boot.Network.Station(); st.Connected {
		rssi := st.RSSI
		s.RSSI = &rssi
	}
	if c := boot.Long.LastCut(); c != nil {
		s.LastCut = &LongOpCut{What: c.What, Bytes: c.Bytes, IdleMS: c.Idle.Milliseconds(), Reason: c.Reason, TMs: c.At.Sub(boot.Started).Milliseconds()}
	}
	return s
}

// Restart delay limits of POST /restart.
const (
	RestartDefault = 500 * time.Millisecond
	RestartMin     = 200 * time.Millisecond
	RestartMax     = 60 * time.Second
)

type restartBody struct {
	DelayMS *int `json:"delay_ms,omitempty"`
}

// RestartReply is the reply of POST /restart.
type RestartReply struct {
	RestartInMS int64 `json:"restart_in_ms"`
}

func (boot *Boot) deviceRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/info", Link: true, Summary: "What the board is and how it is doing", Response: Info{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if api.ViaLink(r) {
					r = nil
				}
				api.WriteJSON(w, http.StatusOK, boot.InfoFor(r))
			})},
		{Method: http.MethodPost, Path: "/restart", Link: true, Summary: "Restart after delay_ms (default 500, 200-60000)",
			Request: restartBody{}, Response: RestartReply{}, Status: http.StatusAccepted,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body restartBody
				if err := api.Decode(r, &body, true); err != nil {
					api.WriteError(w, err)
					return
				}
				delay := RestartDefault
				if body.DelayMS != nil {
					delay = time.Duration(*body.DelayMS) * time.Millisecond
					if delay < RestartMin || delay > RestartMax {
						api.WriteError(w, api.Errorf(api.ErrBadRequest, "delay_ms must be %d-%d, not %d", RestartMin.Milliseconds(), RestartMax.Milliseconds(), *body.DelayMS))
						return
					}
				}
				api.WriteJSON(w, http.StatusAccepted, RestartReply{RestartInMS: delay.Milliseconds()})
				boot.Board.Restart(delay)
			})},
	}
}
