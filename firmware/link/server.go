package link

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/holofleet/holofleet/bus/boardapi"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/events"
	"github.com/holofleet/holofleet/firmware/hal"
)

// ReplyWait is how long a host waits for a reply; a reply later than this
// is counted as a timeout.
const ReplyWait = 2 * time.Second

// Options build a Server for one boot.
type Options struct {
	// Port is the UART/RS485 byte stream; nil when the board has none
	// (then only HTTP sees the link settings).
	Port *Port
	// I2C is the (simulated) I2C bus the board is a target on in I2C mode.
	I2C *i2creg.Bus
	// NoI2CTarget, when set, says why this board can never be an I2C
	// target (Linux user space has no target mode): PATCH /link refuses
	// mode i2c with it.
	NoI2CTarget string
	// Lookup finds the API route for a method and path (the HTTP
	// server's table): requests over the link run the same handlers.
	Lookup func(method, path string) (api.Route, bool)
	Hub    *events.Hub
	Store  Store
	// LEDGPIO is the LED strip's pin (the link may not use it).
	LEDGPIO int
	// Status assembles the native status block.
	Status func() frame.StatusBlock
	// Version is the running firmware version (VERSION, ready).
	Version string
	// Uptime is the time since start (PING).
	Uptime func() time.Duration
	// Attn is the ATTN output; nil when the board has none.
	Attn  hal.Pin
	Clock clock.Clock
	Log   *slog.Logger
}

// Server serves the host link for one boot.
type Server struct {
	o        Options
	settings *saved
	events   *hostEvents
	running  Settings
	self     frame.Address

	lastStatus atomic.Uint32
	c          counters
	recv       *stream.Receiver
	i2c        *i2cTarget

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// Counters are the link's counters in GET /link (see bus/boardapi).
type Counters = boardapi.LinkCounters

type counters struct {
	frames, lines, replies, errors, eventsSent, ignored, notForUs, unknownType, timeouts, i2cCommands atomic.Uint64
}

// New builds the link server of a boot from the saved settings.
func New(o Options) (*Server, error) {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	st, err := loadSettings(o.Store, o.LEDGPIO)
	if err != nil {
		return nil, err
	}
	_, running := st.get()
	srv := &Server{o: o, settings: st, running: running, self: frame.Address(running.Address),
		events: &hostEvents{hub: o.Hub, changed: make(chan struct{}, 1)}}
	srv.events.notify = srv.pendingChanged
	srv.events.set(running.Events.Kinds, running.Events.Push, running.Protocol == ProtocolNative)
	return srv, nil
}

// Routes are GET/PATCH /link and GET/PATCH /link/events.
func (srv *Server) Routes() []api.Route { return append(srv.settingsRoutes(), srv.eventRoutes()...) }

// Counters returns the counters now.
func (srv *Server) Counters() Counters {
	c := Counters{
		Frames: srv.c.frames.Load(), Lines: srv.c.lines.Load(), Replies: srv.c.replies.Load(),
		Errors: srv.c.errors.Load(), EventsSent: srv.c.eventsSent.Load(), Ignored: srv.c.ignored.Load(),
		NotForUs: srv.c.notForUs.Load(), UnknownType: srv.c.unknownType.Load(), Timeouts: srv.c.timeouts.Load(),
		I2CCommands: srv.c.i2cCommands.Load(),
	}
	if p := srv.o.Port; p != nil {
		c.RxBytes, c.TxBytes, c.TxDropped = p.rxBytes.Load(), p.txBytes.Load(), p.dropped.Load()
	}
	if srv.recv != nil {
		s := srv.recv.Stats()
		c.BadCRC = s.BadCRC
		c.BadFrames = s.BadCOBS + s.BadLength
		c.Garbage = s.GarbageSkips
		c.Overruns = s.Overruns
		c.TooLong = s.TooLong
	}
	return c
}

func (srv *Server) transportName() string {
	switch {
	case srv.running.Mode == ModeI2C && srv.o.I2C != nil:
		return fmt.Sprintf("i2c 0x%02x", srv.running.Address)
	case srv.o.Port != nil && srv.running.Mode != ModeI2C:
		return srv.o.Port.Name()
	}
	return ""
}

// LastStatus is the status of the last request over the link (status
// block byte 10).
func (srv *Server) LastStatus() frame.Status { return frame.Status(srv.lastStatus.Load()) }

// Pending is the count of happenings not yet given to the host.
func (srv *Server) Pending() int { return srv.events.pending() }

func (srv *Server) pendingChanged() {
	if srv.o.Attn != nil && srv.running.Attn {
		_ = srv.o.Attn.Set(srv.events.pending() == 0) // low while pending
	}
}

// Start begins serving the transport of the running mode. Stop ends it.
func (srv *Server) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	srv.cancel = cancel
	srv.pendingChanged()
	srv.wg.Add(1)
	go srv.pushLoop(ctx)
	switch srv.running.Mode {
	case ModeI2C:
		if srv.o.I2C == nil {
			return nil
		}
		srv.i2c = newI2CTarget(srv)
		if err := srv.o.I2C.Attach(uint8(srv.running.Address), srv.i2c); err != nil {
			return fmt.Errorf("link: i2c: %w", err)
		}
		return nil
	default:
		if srv.o.Port == nil {
			return nil
		}
		mode := stream.Auto
		switch srv.running.Protocol {
		case ProtocolJSON:
			mode = stream.LinesOnly
		case ProtocolNative:
			mode = stream.FramesOnly
		}
		srv.recv = stream.New(stream.Config{Mode: mode})
		srv.o.Port.attach(srv.recv)
		srv.wg.Add(1)
		go srv.serve(ctx)
		if srv.running.Mode == ModeUART {
			srv.sendReady()
		}
		return nil
	}
}

// Stop ends the server: the transport detaches, goroutines end.
func (srv *Server) Stop() {
	if srv.cancel != nil {
		srv.cancel()
	}
	if srv.recv != nil {
		srv.o.Port.attach(nil)
		_ = srv.recv.Close()
	}
	if srv.i2c != nil {
		srv.o.I2C.Detach(uint8(srv.running.Address))
	}
	srv.events.close()
	srv.wg.Wait()
}

// reaches reports whether a native address is meant for this board.
func (srv *Server) reaches(a frame.Address) bool {
	switch {
	case a.IsBroadcast():
		return true
	case a.IsGroup():
		return slices.Contains(srv.running.Groups, a.Group())
	default:
		return a == srv.self
	}
}

// replies reports whether a request to a may be answered: on RS485 a
// group or broadcast request gets none (several boards would talk at once).
func (srv *Server) replies(a frame.Address) bool {
	return srv.running.Mode != ModeRS485 || !(a.IsGroup() || a.IsBroadcast())
}

func (srv *Server) serve(ctx context.Context) {
	defer srv.wg.Done()
	for {
		it, err := srv.recv.Next(ctx)
		if err != nil {
			return
		}
		start := srv.o.Clock.Now()
		switch it.Kind {
		case stream.Frame:
			srv.c.frames.Add(1)
			srv.handleFrame(ctx, it.Data)
		case stream.Line:
			srv.c.lines.Add(1)
			srv.handleLine(ctx, it.Data, false)
		case stream.TooLong:
			srv.c.lines.Add(1)
			srv.handleLine(ctx, it.Data, true)
		}
		if srv.o.Clock.Since(start) > ReplyWait {
			srv.c.timeouts.Add(1)
		}
	}
}

func (srv *Server) selfLine() jsonline.Address { return jsonline.Board(uint8(srv.self)) }

func (srv *Server) handleLine(ctx context.Context, line []byte, tooLong bool) {
	var req jsonline.Request
	var perr error
	if tooLong {
		req = jsonline.ParseHead(line)
		perr = api.Errorf(api.ErrTooLarge, "line over %d bytes", jsonline.MaxLine)
	} else {
		req, perr = jsonline.ParseRequest(line)
		if errors.Is(perr, jsonline.ErrEmpty) {
			return
		}
	}
	if !req.Addr.IsSet() {
		if srv.running.Mode == ModeRS485 {
			srv.c.ignored.Add(1)
			return
		}
	} else if native, _ := req.Addr.Native(); !srv.reaches(frame.Address(native)) {
		srv.c.notForUs.Add(1)
		return
	}
	native, _ := req.Addr.Native()
	answer := !req.Addr.IsSet() || srv.replies(frame.Address(native))
	var rep jsonline.Reply
	switch {
	case perr != nil:
		rep = jsonline.ErrorReply(req, srv.selfLine(), perr)
		srv.lastStatus.Store(uint32(frame.StatusForCode(api.Wrap(perr).Code)))
	case !req.Served():
		err := api.Errorf(api.ErrNotFound, "%s %s is not served over the link", req.Method, pathOnly(req.Path))
		rep = jsonline.ErrorReply(req, srv.selfLine(), err)
		srv.lastStatus.Store(uint32(frame.StatusNotFound))
	default:
		status, body := srv.call(ctx, req.Method, req.Path, req.Body, false)
		rep = jsonline.ReplyFor(req, srv.selfLine())
		rep.Status = status
		if status != http.StatusNoContent && len(body) > 0 {
			rep.Body = body
		}
		srv.lastStatus.Store(uint32(statusOf(status, body)))
	}
	if !answer {
		return
	}
	if rep.Status >= 400 {
		srv.c.errors.Add(1)
	}
	rep.Pending = srv.events.pending()
	srv.c.replies.Add(1)
	srv.o.Port.send(jsonline.AppendReply(nil, rep))
}

func pathOnly(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i]
	}
	return p
}

// statusOf maps an HTTP status and error body to a native status.
func statusOf(status int, body []byte) frame.Status {
	if status < 400 {
		return frame.StatusOK
	}
	var e api.Error
	_ = json.Unmarshal(body, &e)
	return frame.StatusForCode(e.Code)
}

type nativeKey struct{}

// nativeRequest reports whether a request came from a native frame.
func nativeRequest(r *http.Request) bool {
	v, _ := r.Context().Value(nativeKey{}).(bool)
	return v
}

// call runs an API request through the same handler HTTP uses and returns
// the status and the one-line JSON body.
func (srv *Server) call(ctx context.Context, method, path string, body []byte, native bool) (int, []byte) {
	route, ok := srv.o.Lookup(method, pathOnly(path))
	if !ok {
		e := api.Errorf(api.ErrNotFound, "no endpoint %s %s", method, pathOnly(path))
		b, _ := json.Marshal(e)
		return e.Status, b
	}
	ctx = context.WithValue(ctx, api.LinkContextKey, true)
	ctx = context.WithValue(ctx, nativeKey{}, native)
	r, err := http.NewRequestWithContext(ctx, method, "/api/v1"+path, bytes.NewReader(body))
	if err != nil {
		e := api.Errorf(api.ErrBadRequest, "bad path: %v", err)
		b, _ := json.Marshal(e)
		return e.Status, b
	}
	if len(body) > 0 {
		r.Header.Set("Content-Type", "application/json")
	}
	r.ContentLength = int64(len(body))
	return api.Invoke(route.Handler, r)
}

// pushLoop pushes the host's events on UART when push is on; otherwise it
// keeps happenings for the host to fetch.
func (srv *Server) pushLoop(ctx context.Context) {
	defer srv.wg.Done()
	for {
		sub := srv.events.subscription()
		if sub == nil {
			select {
			case <-ctx.Done():
				return
			case <-srv.events.changed:
				continue
			}
		}
		m, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue // the subscription was replaced or overflowed
		}
		push, native := srv.events.pushing()
		canPush := push && srv.running.Mode == ModeUART && srv.o.Port != nil
		if !m.Happening {
			if canPush && !native {
				srv.sendEventLine(m.Data)
			}
			continue
		}
		hp := events.Happening{Seq: m.ID, Kind: m.Kind, Data: m.Data}
		if !canPush {
			srv.events.keep(hp)
			continue
		}
		if native {
			rec, ok := recordOf(hp)
			if !ok {
				continue
			}
			srv.sendRecord(rec)
		} else {
			srv.sendEventLine(m.Data)
		}
	}
}

func (srv *Server) sendEventLine(data []byte) {
	if srv.o.Port.send(jsonline.AppendEvent(nil, data)) {
		srv.c.eventsSent.Add(1)
	}
}

func (srv *Server) sendRecord(rec frame.Record) {
	payload, err := rec.AppendBinary(nil)
	if err != nil {
		return
	}
	wire, err := frame.AppendEncode(nil, frame.Frame{Addr: srv.self, Seq: 0, Type: frame.TypeEvent, Payload: payload})
	if err != nil {
		return
	}
	if srv.o.Port.send(wire) {
		srv.c.eventsSent.Add(1)
	}
}

// ReadyEvent is the JSON of the ready event.
type ReadyEvent struct {
	Event    string `json:"event"`
	Firmware string `json:"firmware"`
	Protocol int    `json:"protocol"`
	Address  int    `json:"address"`
}

// sendReady announces a start on UART: a native record when the link
// speaks native frames only, otherwise a JSON line.
func (srv *Server) sendReady() {
	if srv.running.Protocol == ProtocolNative {
		srv.sendRecord(frame.Record{Kind: frame.KindReady, Protocol: frame.ProtocolVersion, Address: srv.self})
		return
	}
	b, _ := json.Marshal(ReadyEvent{Event: "ready", Firmware: srv.o.Version, Protocol: frame.ProtocolVersion, Address: int(srv.self)})
	srv.sendEventLine(b)
}

// setEvents changes the host's kinds and push flag.
func (srv *Server) setEvents(kinds []string, push, native bool) {
	srv.events.set(kinds, push, native)
}
