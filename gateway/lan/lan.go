// Package lan is the gateway's driver for boards on the network: it talks
// to each board's HTTP API and follows its Server-Sent Events stream,
// reporting what it sees to a fleet.Sink. It implements fleet.Driver under
// the name "lan"; a board is known by its base URL ("http://10.0.0.7").
//
// # Watching a board
//
// Run keeps one watcher goroutine per board added with Add. A watcher
//
//  1. reads GET /api/v1/info and reports it with Sink.Seen; an uptime
//     lower than the last one read means the board restarted
//     (Sink.Restarted);
//  2. opens the board's event stream (GET /api/v1/events, Accept:
//     text/event-stream), sending Last-Event-ID with the last happening
//     it reported so the board replays the ones missed while away. A board
//     serves only three streams, so the watcher holds exactly one;
//  3. re-reads the states the stream does not replay (GET /screen, /leds,
//     /holo, /scenes, /settings, /link) and reports each with
//     Sink.Changed, kind "link" carrying the link settings and groups;
//  4. reports every message of the stream: happenings with Sink.Happened
//     (seq from the id line), states with Sink.Changed;
//  5. when a stream that served for at least Options.MinBackoff ends (a
//     restart, a dropped connection), starts again at once; when that
//     fails, or any other stream ends or goes silent for Options.StreamIdle
//     (the board sends a comment every 15 s), reports Sink.Lost with the
//     reason and starts again after a backoff that doubles from
//     Options.MinBackoff up to Options.MaxBackoff and resets once a stream
//     opens. A board restarting in place is so never reported lost (the
//     restart shows in its uptime); one that is down is reported at once.
//
// A replay whose first happening is numbered at or below the last one
// reported (and not by a wrap of the 16-bit numbers) also means the board
// restarted.
//
// # Calls
//
// Call and CallRaw send a request to base+"/api/v1"+path. A changing
// request names the board in its Host header (the URL's host when it is an
// IP address or the board's name, otherwise the hostname GET /info
// reported), carries the board's password as a bearer token when one was
// given to Add, and Content-Type application/json when it has a JSON body.
// The reply's status and body come back as the board sent them.
//
// # Clocks and connections
//
// Each online board's clock is measured in rounds of GET /time exchanges
// (timesync), paced per board on one schedule (clock.go; Options.Clock*).
// Calls go through Options.Client; the event streams and the clock rounds
// use connections of the driver's own (stream.go), so that a followed
// board costs the gateway one goroutine and a small buffer
// (docs/scale.md).
package lan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// Errors of this package; calls also return fleet.ErrUnknownBoard,
// fleet.ErrUnreachable and fleet.ErrClosed wrapped with the board's URL.
var (
	// ErrBadURL: a base URL that is not http://host[:port] (with an
	// optional path prefix).
	ErrBadURL = errors.New("lan: bad board URL")
	// ErrStream: the event stream could not be opened or broke.
	ErrStream = errors.New("lan: event stream failed")
	// ErrRunning: Run was called more than once.
	ErrRunning = errors.New("lan: driver already running")
)

// Defaults of Options.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultStreamIdle is three of the board's 15 s keep-alive periods.
	DefaultStreamIdle = 45 * time.Second
	// DefaultCallTimeout bounds a call when the client has no timeout.
	DefaultCallTimeout = 30 * time.Second
	// MaxReply is the largest reply body read.
	MaxReply = 8 << 20
)

// StatePaths are the states re-read after a stream (re)opens, with the
// kind reported for each.
var StatePaths = []struct{ Kind, Path string }{
	{"screen", "/screen"}, {"leds", "/leds"}, {"holo", "/holo"}, {"scenes", "/scenes"},
	{"settings", "/settings"}, {"link", "/link"},
}

// Options configure a LAN driver.
type Options struct {
	// Client sends calls; nil means a client with DefaultCallTimeout.
	// Event streams and clock rounds do not use it: they run on
	// connections of the driver's own (stream.go), with the TLS settings
	// of the client's transport when it is an *http.Transport.
	Client *http.Client
	Clock  clock.Clock
	Log    *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before reconnecting.
	MinBackoff, MaxBackoff time.Duration
	// StreamIdle is how long a stream may stay silent before it is taken
	// for dead (and how long its reply's head may take).
	StreamIdle time.Duration
	// Clock alignment: a round of ClockSamples exchanges of GET /time
	// measures a board, at most ClockParallel boards at once (defaults 3
	// and 8). A board is measured within a second (ClockEvery if
	// shorter) of coming online or restarting, every ClockEvery while its estimate settles or is not
	// sharp enough, and otherwise as rarely as keeps its uncertainty,
	// aged at the crystal tolerance, within ClockTarget, at most
	// ClockMaxEvery apart (defaults 5 s, 2 ms, 30 s; see clockPeriod). A
	// round whose estimate misses ClockTarget takes up to ClockSamples
	// more exchanges, 10-20 ms apart (measure). A
	// negative ClockEvery turns alignment off. Estimates go to the sink
	// when it is a fleet.ClockSink.
	ClockEvery    time.Duration
	ClockMaxEvery time.Duration
	ClockTarget   time.Duration
	ClockSamples  int
	ClockParallel int
	// ReplayKept makes a watcher that has seen no happening of the
	// board's boot yet (the board's first stream in this driver's life,
	// or the first after a restart) ask for every happening the board
	// keeps (Last-Event-ID 0), for a sink that drops what it had already
	// (a gateway of a cluster compares them with the cluster's event
	// stream, as rs485.Options.ReplayKept). A line board that is on the
	// LAN too was otherwise followed from now on by its gateway that
	// starts, and the happenings its previous run had fetched over the
	// line and not published came later over the line, too far behind
	// the LAN's to be taken (the soak's lost happenings at a line
	// gateway's restart). Without it a watcher starts with what comes
	// next.
	ReplayKept bool
}

// LAN is the driver of boards on the network. Its methods are safe for
// concurrent use.
type LAN struct {
	o     Options
	log   *slog.Logger
	stamp *timesync.Stamper
	// clockQ schedules the clock rounds (clock.go).
	clockQ clockQueue

	mu      sync.Mutex
	boards  map[string]*lanBoard
	run     *runState
	started bool
}

type runState struct {
	ctx  context.Context
	sink fleet.Sink
	wg   sync.WaitGroup
}

type lanBoard struct {
	url      string
	u        *url.URL // url parsed
	ref      fleet.Ref
	password string
	hostname string // from /info, for the Host header
	id       string // from /info, for logs
	ipHost   bool   // the URL's host is an IP literal
	cancel   context.CancelFunc
	done     chan struct{}
	online   atomic.Bool // the watcher holds a session
	clock    clockState
}

// New makes a LAN driver.
func New(o Options) *LAN {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: DefaultCallTimeout}
	}
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	o.MinBackoff = defaults.Positive(o.MinBackoff, DefaultMinBackoff)
	o.MaxBackoff = defaults.Positive(o.MaxBackoff, DefaultMaxBackoff)
	o.StreamIdle = defaults.Positive(o.StreamIdle, DefaultStreamIdle)
	if o.ClockEvery == 0 {
		o.ClockEvery = DefaultClockEvery
	}
	o.ClockMaxEvery = max(defaults.Positive(o.ClockMaxEvery, DefaultClockMaxEvery), o.ClockEvery)
	o.ClockTarget = defaults.Positive(o.ClockTarget, DefaultClockTarget)
	o.ClockSamples = defaults.Positive(o.ClockSamples, DefaultClockSamples)
	o.ClockParallel = defaults.Positive(o.ClockParallel, DefaultClockParallel)
	return &LAN{o: o, log: o.Log.With("transport", "lan"), boards: map[string]*lanBoard{},
		stamp: timesync.NewStamper(o.Clock), clockQ: clockQueue{wake: make(chan struct{}, 1)}}
}

// Name is "lan".
func (l *LAN) Name() string { return "lan" }

// normalize checks a base URL and returns it without a trailing slash.
func normalize(base string) (string, *url.URL, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", nil, fmt.Errorf("%w: %q", ErrBadURL, base)
	}
	return u.String(), u, nil
}

// Add adds the board at baseURL (http://HOST[:PORT]) with its password
// ("" for none), or changes the password of a board already added. While
// Run runs, the board is watched at once.
func (l *LAN) Add(baseURL, password string) error {
	key, u, err := normalize(baseURL)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.boards[key]; ok {
		b.password = password
		return nil
	}
	b := &lanBoard{url: key, u: u, ref: fleet.Ref{Driver: "lan", Addr: key}, password: password,
		ipHost: net.ParseIP(strings.Trim(u.Hostname(), "[]")) != nil}
	b.clock.index = -1
	l.boards[key] = b
	if l.run != nil && l.run.ctx.Err() == nil {
		l.startLocked(b)
	}
	return nil
}

// Remove stops watching the board at baseURL and forgets it. A board
// being watched is reported Lost ("removed").
func (l *LAN) Remove(baseURL string) {
	key, _, err := normalize(baseURL)
	if err != nil {
		return
	}
	l.mu.Lock()
	b, ok := l.boards[key]
	delete(l.boards, key)
	l.mu.Unlock()
	if ok && b.cancel != nil {
		b.cancel()
		<-b.done
	}
}

// Boards lists the base URLs added.
func (l *LAN) Boards() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.boards))
	for k := range l.boards {
		out = append(out, k)
	}
	return out
}

// Run watches every board added, now and later, until ctx ends.
func (l *LAN) Run(ctx context.Context, sink fleet.Sink) error {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return ErrRunning
	}
	l.started = true
	rs := &runState{ctx: ctx, sink: sink}
	l.run = rs
	for _, b := range l.boards {
		l.startLocked(b)
	}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		l.syncClocks(ctx, sink)
	}()
	l.mu.Unlock()
	<-ctx.Done()
	// Add starts watchers under l.mu only while ctx is alive, so once
	// the lock is taken here no new watcher can join the group.
	l.mu.Lock()
	l.run = nil
	l.mu.Unlock()
	rs.wg.Wait()
	return nil
}

func (l *LAN) startLocked(b *lanBoard) {
	ctx, cancel := context.WithCancel(l.run.ctx)
	b.cancel, b.done = cancel, make(chan struct{})
	rs := l.run
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		defer close(b.done)
		w := &watcher{l: l, b: b, sink: rs.sink, parent: rs.ctx}
		w.run(ctx)
	}()
}

func (l *LAN) board(addr string) (*lanBoard, error) {
	key, _, err := normalize(addr)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.boards[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", fleet.ErrUnknownBoard, addr)
	}
	return b, nil
}

// Call runs an API request on the board at addr (its base URL): method,
// path under /api/v1 with its query, and a JSON body or nil.
func (l *LAN) Call(ctx context.Context, addr string, method, path string, body []byte) (fleet.Reply, error) {
	var r io.Reader
	ct := ""
	if len(body) > 0 {
		r, ct = bytes.NewReader(body), "application/json"
	} else if method == http.MethodPost || method == http.MethodPatch {
		// The board wants the JSON content type on every POST and PATCH.
		ct = "application/json"
	}
	return l.CallRaw(ctx, addr, method, path, ct, r, int64(len(body)))
}

// CallRaw runs a request whose body is raw bytes (a file or firmware
// upload) of the given length (-1 when unknown) and content type. The
// reply body is returned as the board sent it; for a download it is the
// file's bytes, not JSON.
func (l *LAN) CallRaw(ctx context.Context, addr string, method, path, contentType string, body io.Reader, length int64) (fleet.Reply, error) {
	b, err := l.board(addr)
	if err != nil {
		return fleet.Reply{}, err
	}
	req, err := l.request(ctx, b, method, path, body)
	if err != nil {
		return fleet.Reply{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if body != nil {
		req.ContentLength = length
	}
	return l.do(req, b)
}

// request builds a request to b with its Host and password.
func (l *LAN) request(ctx context.Context, b *lanBoard, method, path string, body io.Reader) (*http.Request, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%w: path %q", ErrBadURL, path)
	}
	path = strings.TrimPrefix(path, "/api/v1")
	req, err := http.NewRequestWithContext(ctx, method, b.url+"/api/v1"+path, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %v", ErrBadURL, method, path, err)
	}
	l.mu.Lock()
	pw, host, ip := b.password, b.hostname, b.ipHost
	l.mu.Unlock()
	if !ip && host != "" && !strings.EqualFold(strings.TrimSuffix(req.URL.Hostname(), ".local"), host) {
		req.Host = host + ".local"
	}
	if pw != "" {
		req.Header.Set("Authorization", "Bearer "+pw)
	}
	return req, nil
}

func (l *LAN) do(req *http.Request, b *lanBoard) (fleet.Reply, error) {
	resp, err := l.o.Client.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return fleet.Reply{}, req.Context().Err()
		}
		return fleet.Reply{}, fmt.Errorf("%w: %s %s %s: %v", fleet.ErrUnreachable, b.url, req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxReply+1))
	if err != nil {
		return fleet.Reply{}, fmt.Errorf("%w: %s %s %s: reading the reply: %v", fleet.ErrUnreachable, b.url, req.Method, req.URL.Path, err)
	}
	if len(data) > MaxReply {
		return fleet.Reply{}, fmt.Errorf("%w: %s %s: reply over %d bytes", fleet.ErrBadReply, b.url, req.URL.Path, MaxReply)
	}
	return fleet.Reply{Status: resp.StatusCode, Body: bytes.TrimRight(data, "\r\n")}, nil
}

// get reads a JSON resource of b.
func (l *LAN) get(ctx context.Context, b *lanBoard, path string) (json.RawMessage, error) {
	req, err := l.request(ctx, b, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	rep, err := l.do(req, b)
	if err != nil {
		return nil, err
	}
	if rep.Status != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: %d %s", fleet.ErrBadReply, path, rep.Status, rep.Body)
	}
	if !json.Valid(rep.Body) {
		return nil, fmt.Errorf("%w: GET %s: not JSON", fleet.ErrBadReply, path)
	}
	return rep.Body, nil
}
