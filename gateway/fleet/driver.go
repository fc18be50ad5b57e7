// Package fleet is the gateway's core: the boards it knows, how each is
// reached, and one event stream per board and for the whole fleet.
//
// Boards are reached through drivers. A Line driver is the master of one
// RS485 line (native frames and JSON lines, group frames); the LAN driver
// talks HTTP and Server-Sent Events to boards on the network. A driver
// knows boards only by where they are (a Ref: the line and bus address, or
// the base URL); it reports what it sees to a Sink, and the fleet core
// turns those reports into boards by identity (the id in GET /info), so a
// board reachable both ways is one board.
package fleet

import (
	"context"
	"encoding/json"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/gateway/fault"
)

// Errors of drivers and the fleet core.
var (
	// ErrNoReply: the board did not answer within the reply wait (after
	// the driver's retries).
	ErrNoReply = fault.New(fault.Unavailable, "fleet: board did not reply")
	// ErrUnreachable: no driver can reach the board now.
	ErrUnreachable = fault.New(fault.Unavailable, "fleet: board unreachable")
	// ErrLineBusy: a command to a board on an RS485 line gave up (its
	// context ended) before it was sent, because timed sends kept the
	// wire: a show's timed actions closer together than the command's
	// reply wait leave it no room (docs/fire.md). The error also wraps
	// the context's. Nothing reached the board; a caller that can wait
	// (a rollout) waits for the line instead of counting a failure.
	ErrLineBusy = fault.New(fault.Unavailable, "fleet: RS485 line busy with timed sends")
	// ErrUnknownBoard: no board has that id.
	ErrUnknownBoard = fault.New(fault.NotFound, "fleet: unknown board")
	// ErrUnknownGroup: no board is in that group.
	ErrUnknownGroup = fault.New(fault.NotFound, "fleet: unknown group")
	// ErrNotOverLink: the API path is not served over the host link.
	ErrNotOverLink = fault.New(fault.Precondition, "fleet: path not served over the host link")
	// ErrBadReply: the board answered something that does not parse.
	ErrBadReply = fault.New(fault.Internal, "fleet: malformed reply")
	// ErrClosed: the driver or fleet was closed.
	ErrClosed = fault.New(fault.Unavailable, "fleet: closed")
	// ErrTooLarge: the request is larger than the transport to the board
	// can carry (a JSON line over 1024 bytes on RS485, a native frame
	// payload over 48 bytes); nothing was sent. The wrapping message
	// names the size and the limit. It is the caller's error: shorten
	// the request, or reach the board another way (the LAN). A LAN
	// board's own limit comes back as the board's 413 too_large reply.
	ErrTooLarge = fault.New(fault.Invalid, "fleet: request too large for the transport")
)

// Ref says where a board is, as a driver sees it.
type Ref struct {
	// Driver names the driver: "rs485:<line name>" or "lan".
	Driver string `json:"driver"`
	// Addr is the bus address on a line ("5") or the base URL on the LAN
	// ("http://10.0.0.7").
	Addr string `json:"addr"`
}

func (r Ref) String() string { return r.Driver + "/" + r.Addr }

// Reply is a board's answer to an API call: the HTTP status and body,
// exactly as the board sent them (an error body is the board's
// {"error","message"}).
type Reply struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// Err returns the board's error as an *boardapi.Error when Status is 400 or
// more, else nil.
func (r Reply) Err() error {
	if r.Status < 400 {
		return nil
	}
	e := &boardapi.Error{Status: r.Status}
	if err := json.Unmarshal(r.Body, e); err != nil || e.Code == "" {
		e.Code, e.Message = "failed", string(r.Body)
	}
	return e
}

// Happening is a numbered event of a board (clip_started, scene_ended,
// touch, ...): its kind, seq and the board's JSON object.
type Happening struct {
	Kind string          `json:"kind"`
	Seq  uint16          `json:"seq"`
	Data json.RawMessage `json:"data"`
}

// SeqAfter reports whether happening number a comes after b: numbers
// start at 1 and wrap at 65535 (0 is "none yet", so every number comes
// after it); a comes after b when it is less than half the circle ahead.
// Both drivers use it to drop happenings they have handed over already.
func SeqAfter(a, b uint16) bool {
	if b == 0 {
		return a != 0
	}
	d := a - b
	return d != 0 && d < 1<<15
}

// ReplayRecent is how far back a driver's replay of the happenings a
// board keeps reaches, when it hands them over at its start for a sink
// that drops what it had already (lan.Options.ReplayKept,
// rs485.Options.ReplayKept): what a gateway that stopped had fetched and
// not published is that recent, and older ones (a board idle for a while
// keeps its last happenings for good) would come again as new.
const ReplayRecent = time.Minute

// ReplayFloor is the oldest happening (its t_ms, the board's uptime in
// ms) a replay hands over from a board up for uptime: ReplayRecent back,
// and a second more since uptime is read in whole seconds. 0 takes every
// one (a board up for less than that).
func ReplayFloor(uptime time.Duration) int64 {
	return max(0, (uptime - ReplayRecent - time.Second).Milliseconds())
}

// Before reports whether the happening carries the board's uptime (t_ms)
// and it is below floor (ms): a replay leaves it out (ReplayFloor).
func (h Happening) Before(floor int64) bool {
	if floor <= 0 {
		return false
	}
	var up struct {
		TMs *int64 `json:"t_ms"`
	}
	return json.Unmarshal(h.Data, &up) == nil && up.TMs != nil && *up.TMs < floor
}

// Sink receives what drivers see. Its methods must not block for long:
// drivers call them from their receive paths.
type Sink interface {
	// Seen reports that the board at ref answered; info is its GET /info
	// when the driver (re)read it, nil when unchanged.
	Seen(ref Ref, info json.RawMessage)
	// Lost reports that the board at ref stopped answering.
	Lost(ref Ref, reason string)
	// Happened reports happenings in the order the board numbered them.
	// A driver may report one twice (a replay); the core drops repeats.
	Happened(ref Ref, hs []Happening)
	// Changed reports a resource's new state (leds, screen, ...).
	Changed(ref Ref, kind string, state json.RawMessage)
	// Restarted reports that the board started again (a ready event, or
	// uptime went backwards): its happening numbers start over.
	Restarted(ref Ref)
}

// Driver is a way to reach boards.
type Driver interface {
	// Name is the driver's name as used in Ref.Driver.
	Name() string
	// Run discovers and watches boards, reporting to sink, until ctx ends.
	Run(ctx context.Context, sink Sink) error
	// Call runs an API request (method, path with query, JSON body) on the
	// board at addr and returns its reply.
	Call(ctx context.Context, addr string, method, path string, body []byte) (Reply, error)
}

// Line is the driver of one RS485 line; beyond Call it sends native
// requests and group frames.
type Line interface {
	Driver
	// Native sends a native request to one board and returns its reply.
	Native(ctx context.Context, addr int, req frame.Request) (frame.Header, frame.Message, error)
	// Group sends one frame to a group (1-31) or, with group 0, to every
	// board; on RS485 no board answers it. It returns once the frame's
	// last byte left the wire.
	Group(ctx context.Context, group int, req frame.Request) error
	// GroupCall sends one JSON line to a group (or every board with 0),
	// for calls the native set lacks; no board answers.
	GroupCall(ctx context.Context, group int, method, path string, body []byte) error
	// Stats returns the line's counters.
	Stats() LineStats
}

// TimedLine is a Line that times group sends: each ends (its last byte
// leaves the wire, and the boards take it) at a requested moment on the
// line's clock, with the line kept free before it. Both return the moment
// the last byte left the wire. The fleet core fires timed actions on such
// lines (Action.At); on a Line that is not one it waits for the moment
// and sends then.
type TimedLine interface {
	Line
	GroupAt(ctx context.Context, group int, req frame.Request, at time.Time) (time.Time, error)
	GroupCallAt(ctx context.Context, group int, method, path string, body []byte, at time.Time) (time.Time, error)
}

// LineStats are a line driver's counters (metrics read them).
type LineStats struct {
	BytesOut, BytesIn   uint64
	FramesOut, FramesIn uint64
	LinesOut, LinesIn   uint64
	BadCRC, Garbage     uint64
	Timeouts, Retries   uint64
	Polls               uint64
	PollCycle           time.Duration // the last full cycle over every known board
	Busy                time.Duration // time the line carried our bytes
	Boards              int
}

// BoardClock is how a board's clock stands against the gateway's, as a
// driver measured it (gateway/timesync): board time = gateway time +
// OffsetUS, give or take UncertaintyUS. The gateway's time is Unix
// microseconds running on its monotonic clock; the board's is its
// monotonic clock, microseconds since its current boot started.
type BoardClock struct {
	OffsetUS      int64     `json:"offset_us"`
	UncertaintyUS int64     `json:"uncertainty_us"`
	SyncedAt      time.Time `json:"synced_at"`
	// Via names the driver that measured it ("lan", "rs485:line0").
	Via string `json:"via"`
	// Epoch is the moment the board's clock read 0 (its boot), on the
	// gateway's clock (with its monotonic reading): the board's time at a
	// gateway moment t is t.Sub(Epoch) in µs. Drivers set it from their
	// own stamper, so it needs no common base of gateway µs; zero when
	// unknown (a board's clock without it is not used to time a fire).
	Epoch time.Time `json:"-"`
}

// BoardTime is the board's clock (µs since its boot) at the gateway
// moment t; ok is false without an Epoch.
func (c BoardClock) BoardTime(t time.Time) (us int64, ok bool) {
	if c.Epoch.IsZero() {
		return 0, false
	}
	return t.Sub(c.Epoch).Microseconds(), true
}

// GatewayUS is the gateway moment t in the microseconds of the gateway's
// time the board was told with this estimate (extension clip-sync: its
// aligned clock reads that at t); ok is false without an Epoch.
func (c BoardClock) GatewayUS(t time.Time) (us int64, ok bool) {
	b, ok := c.BoardTime(t)
	return b - c.OffsetUS, ok
}

// Told is what a driver last told a board of its clock (PUT /time,
// extension clip-sync): the estimate's uncertainty and when it was made,
// both in gateway µs.
type Told struct {
	UncertaintyUS, AtUS int64
	Set                 bool
}

// Sharper reports whether an estimate of uncertainty u made at the
// gateway time at (µs) is worth telling a board that holds t: it holds
// none, the estimate is within DefaultFireUncertainty, or it is sharper
// than the one held aged by the crystal tolerance (50 ppm) since. A
// blurred estimate (a sample that waited) so never replaces a sharp one,
// and a board on a loaded line is still told something.
func (t Told) Sharper(u, at int64) bool {
	if !t.Set || u <= DefaultFireUncertainty.Microseconds() {
		return true
	}
	return u <= t.UncertaintyUS+(at-t.AtUS)*50/1_000_000
}

// ClockSink is a Sink that also takes clock estimates. A driver whose
// sink is one reports each new estimate of a board (the fleet core is
// one); a sink that is not one is not told.
type ClockSink interface {
	Clock(ref Ref, c BoardClock)
}
