package rs485

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/timesync"
)

// Errors of this package. Calls also return the fleet errors
// fleet.ErrNoReply, fleet.ErrNotOverLink, fleet.ErrBadReply,
// fleet.ErrClosed and fleet.ErrTooLarge (a request line over
// jsonline.MaxLine, a native request over a frame), wrapped with the
// address and request.
var (
	// ErrBadAddress: the address is not a board address 1-223.
	ErrBadAddress = errors.New("rs485: bad board address")
	// ErrBadGroup: the group is not 0 (every board) or 1-31.
	ErrBadGroup = errors.New("rs485: bad group")
	// ErrBadRequest: the request cannot be written (a body that is not a
	// one-line JSON object, a field out of range). A request that is only
	// too long is fleet.ErrTooLarge instead.
	ErrBadRequest = errors.New("rs485: bad request")
	// ErrRunning: Run was called while the line already runs.
	ErrRunning = errors.New("rs485: line already running")
	// ErrWrite: the port refused the bytes.
	ErrWrite = errors.New("rs485: write to the line failed")
)

// Timing defaults (see the package doc).
const (
	// DefaultReplyWait is the spec's reply wait for a request.
	DefaultReplyWait = 2 * time.Second
	// DefaultPollInterval is the shortest time from the start of one poll
	// cycle to the start of the next.
	DefaultPollInterval = 100 * time.Millisecond
	// DefaultRetries is how often a command is sent again after a timeout.
	DefaultRetries = 2
	// DefaultBackoff is the pause before the first retry; it doubles.
	DefaultBackoff = 20 * time.Millisecond
	// DefaultMissLimit is how many polls in a row a board may miss before
	// it is reported lost.
	DefaultMissLimit = 3
	// DefaultPingEvery: every n-th poll of a board is a PING (uptime,
	// restart detection), the others are STATUS.
	DefaultPingEvery = 10
	// DefaultBaud is the line speed assumed when Options.Baud is 0.
	DefaultBaud = 115200
	// DefaultGroupQuiet is how long a board must have had no group frame
	// before the state group frames changed is re-read (see Options).
	DefaultGroupQuiet = 200 * time.Millisecond
	// DefaultTurnaround is Options.Turnaround's default: a board answers
	// a STATUS or a GET in a few milliseconds.
	DefaultTurnaround = 20 * time.Millisecond
	// DefaultGroupReread is the most often a board's state is re-read
	// after group frames while they keep coming, and the longest its
	// reported state waits behind the group frames sent to it.
	DefaultGroupReread = time.Second
)

// HappeningKinds are the happenings the master enables on every board.
var HappeningKinds = []string{"clip_started", "clip_ended", "scene_started", "scene_ended", "touch"}

// Options configure a Line.
type Options struct {
	// Name names the line; the driver is "rs485:<Name>".
	Name string
	// Port is the line (transport.Open). When it is also an io.Closer,
	// Run closes it on return.
	Port io.ReadWriter
	// Baud is the line speed, for wire times and default waits.
	Baud  int
	Clock clock.Clock
	Log   *slog.Logger
	// Addresses are the board addresses to discover; nil means 1-223.
	Addresses []int
	// ReplyWait is how long a command waits for its reply (default 2 s).
	ReplyWait time.Duration
	// PollWait is how long a poll or follow-up waits (default 100 ms plus
	// the wire time of two largest frames). A follow-up in JSON lines
	// waits the wire time of a longest line more (lineWait): a GET /info
	// reply of 600 bytes takes 625 ms at 9600 baud.
	PollWait time.Duration
	// Turnaround is the least a board is given, beyond its reply's wire
	// time, to answer a poll or follow-up sent in a gap before a timed
	// send (default DefaultTurnaround; see timed.go).
	Turnaround time.Duration
	// DiscoverWait is how long a discovery PING waits (default 40 ms plus
	// the wire time of 30 bytes).
	DiscoverWait time.Duration
	// Retries after a timed-out command (default 2; negative for none).
	Retries int
	// Backoff before the first retry (default 20 ms), doubling.
	Backoff time.Duration
	// PollInterval is the shortest poll cycle (default 100 ms; negative
	// for back-to-back cycles).
	PollInterval time.Duration
	// MissLimit is the polls in a row a board may miss (default 3).
	MissLimit int
	// PingEvery makes every n-th poll a PING (default 10).
	PingEvery int
	// Kinds are the happenings to enable (default HappeningKinds).
	Kinds []string
	// ReplayKept makes a master that starts hand over each board's kept
	// happenings (GET /events) of the last fleet.ReplayRecent of the
	// board's uptime (their t_ms) before the new ones, for a sink that
	// drops what it had already (a gateway of a cluster compares them with
	// the cluster's event stream): what a gateway killed after fetching
	// them never published reaches the stream then, and an idle board's
	// older ones, which it keeps for good, do not come again as new (as
	// lan.Options.ReplayKept). Without it a master starts with what the
	// board still queues for the host.
	ReplayKept bool
	// GroupQuiet and GroupReread say when the members of a group frame
	// are re-read (no member answers a group frame, so its state is read
	// back for the sink): once no group frame reached the board for
	// GroupQuiet (default 200 ms), at most once every GroupReread
	// (default 1 s), and GroupReread after the first frame not yet read
	// back at the latest, however often frames keep coming. Re-reads are
	// per board and kind, merged: a board that took ten group frames is
	// read once. A desk or a chase sending a group a look every few
	// frames thus costs the line one re-read of each member a second,
	// not one per frame, and the state reported lags the frames by at
	// most GroupReread plus a poll cycle. Negative GroupQuiet re-reads
	// after the next poll, every time (the rule before these options).
	GroupQuiet  time.Duration
	GroupReread time.Duration
	// ClockEvery is how often each online board's clock is measured, one
	// GET /time exchange a time, when the sink is a fleet.ClockSink
	// (default DefaultClockEvery; negative for never).
	ClockEvery time.Duration
}

// Line is the master of one RS485 line. Create it with New and start it
// with Run; its methods are safe for concurrent use.
type Line struct {
	o    Options
	name string
	clk  clock.Clock
	log  *slog.Logger

	cmds    chan *job
	running atomic.Bool
	closed  chan struct{}
	close   sync.Once

	recv  *stream.Receiver
	st    counters
	stamp *timesync.Stamper // the gateway's clock for clock samples

	// wire is held by whoever writes and awaits on the line: the
	// scheduler for each of its steps, or Group on its fast path.
	wire  sync.Mutex
	marks struct {
		sync.Mutex
		list []groupMark
	}
	// nextFire is the earliest start of a queued timed send (nil: none),
	// which Group's fast path must not run into.
	nextFire atomic.Pointer[time.Time]

	mu     sync.Mutex // guards boards' shared view and stats snapshot
	boards map[int]*board
	cycle  time.Duration

	// owned by the scheduler goroutine
	seq   uint8
	tagN  uint64
	wbuf  []byte
	sched scheduler
}

type counters struct {
	bytesOut, framesOut, linesOut atomic.Uint64
	timeouts, retries, polls      atomic.Uint64
	badReply, stray               atomic.Uint64
	repaired                      atomic.Uint64 // group scene starts re-sent to a member that missed them
	fired                         atomic.Uint64 // timed sends written
	busy                          atomic.Int64
}

// New makes a line master. It does nothing until Run.
func New(o Options) *Line {
	o.Baud = defaults.Positive(o.Baud, DefaultBaud)
	o.Clock = defaults.Clock(o.Clock)
	o.Log = defaults.Log(o.Log)
	if o.Addresses == nil {
		for a := int(frame.MinBoard); a <= int(frame.MaxBoard); a++ {
			o.Addresses = append(o.Addresses, a)
		}
	}
	l := &Line{o: o, name: fleet.LinePrefix + o.Name, clk: o.Clock, cmds: make(chan *job, 64), closed: make(chan struct{}),
		boards: map[int]*board{}, wbuf: make([]byte, 0, jsonline.MaxLine+frame.MaxWireLen)}
	l.log = o.Log.With("line", l.name, "transport", l.name)
	l.o.ReplyWait = defaults.Positive(o.ReplyWait, DefaultReplyWait)
	l.o.PollWait = defaults.Positive(o.PollWait, 100*time.Millisecond+l.wireTime(2*frame.MaxWireLen))
	l.o.DiscoverWait = defaults.Positive(o.DiscoverWait, 40*time.Millisecond+l.wireTime(30))
	l.o.Turnaround = defaults.Positive(o.Turnaround, DefaultTurnaround)
	l.o.Retries = defaults.Limit(o.Retries, DefaultRetries)
	l.o.Backoff = defaults.Positive(o.Backoff, DefaultBackoff)
	l.o.PollInterval = defaults.Limit(o.PollInterval, DefaultPollInterval)
	l.o.MissLimit = defaults.Positive(o.MissLimit, DefaultMissLimit)
	l.o.PingEvery = defaults.Positive(o.PingEvery, DefaultPingEvery)
	if o.Kinds == nil {
		l.o.Kinds = HappeningKinds
	}
	if o.ClockEvery == 0 {
		l.o.ClockEvery = DefaultClockEvery
	}
	if o.GroupQuiet == 0 {
		l.o.GroupQuiet = DefaultGroupQuiet
	}
	if o.GroupReread <= 0 {
		l.o.GroupReread = DefaultGroupReread
	}
	l.stamp = timesync.NewStamper(l.clk)
	l.recv = stream.New(stream.Config{Mode: stream.Auto, BufferSize: 64 << 10, MaxLine: 64 << 10})
	return l
}

// Name is "rs485:<name>".
func (l *Line) Name() string { return l.name }

// wireTime is how long n bytes take on the line (10 bits a byte).
func (l *Line) wireTime(n int) time.Duration {
	return time.Duration(n) * 10 * time.Second / time.Duration(l.o.Baud)
}

// lineWait is how long a JSON-line follow-up waits: PollWait and the
// wire time of a longest reply line. PollWait alone covers native frames
// only: at 9600 baud a board's GET /info reply outlasted it, the master
// timed out, asked again over the reply still on the wire and never
// read the board (TestSlowLine).
func (l *Line) lineWait() time.Duration {
	return l.o.PollWait + l.wireTime(jsonline.MaxLine)
}

// Run owns the line until ctx ends: it reads the port, discovers and
// polls boards and runs commands, reporting to sink. It returns nil when
// ctx ends, and closes the port if it is an io.Closer.
func (l *Line) Run(ctx context.Context, sink fleet.Sink) error {
	if !l.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	closer, canClose := l.o.Port.(io.Closer)
	if canClose {
		wg.Add(1)
	}
	go func() {
		if canClose {
			defer wg.Done()
		}
		if err := l.recv.Pump(ctx, l.o.Port); err != nil && ctx.Err() == nil {
			l.log.Warn("rs485: reading the line stopped", "err", err)
		}
	}()
	l.sched = newScheduler(l)
	l.loop(ctx, sink)
	cancel()
	l.close.Do(func() { close(l.closed) })
	if canClose {
		_ = closer.Close()
	}
	_ = l.recv.Close()
	wg.Wait()
	l.dropQueued(fleet.ErrClosed)
	for {
		select {
		case j := <-l.cmds:
			j.finish(result{err: fleet.ErrClosed})
		default:
			return nil
		}
	}
}

// Stats returns the line's counters.
func (l *Line) Stats() fleet.LineStats {
	rs := l.recv.Stats()
	l.mu.Lock()
	online := 0
	for _, b := range l.boards {
		if b.present {
			online++
		}
	}
	cycle := l.cycle
	l.mu.Unlock()
	return fleet.LineStats{
		BytesOut: l.st.bytesOut.Load(), BytesIn: rs.Bytes,
		FramesOut: l.st.framesOut.Load(), FramesIn: rs.Frames,
		LinesOut: l.st.linesOut.Load(), LinesIn: rs.Lines,
		BadCRC:   rs.BadCRC,
		Garbage:  rs.GarbageSkips + rs.BadCOBS + rs.BadLength + rs.TooLong + l.st.badReply.Load(),
		Timeouts: l.st.timeouts.Load(), Retries: l.st.retries.Load(),
		Polls: l.st.polls.Load(), PollCycle: cycle, Busy: time.Duration(l.st.busy.Load()),
		Boards: online,
	}
}

// Stray is the count of well-formed frames and lines heard that answered
// nothing the master was waiting for (late replies, wrong seq or tag,
// other boards' traffic).
func (l *Line) Stray() uint64 { return l.st.stray.Load() }

// Repaired is the count of group scene starts a member missed and was
// sent addressed (checkMissed).
func (l *Line) Repaired() uint64 { return l.st.repaired.Load() }

// Boards lists the addresses of the boards online now, in order.
func (l *Line) Boards() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, a := range l.o.Addresses {
		if b := l.boards[a]; b != nil && b.present {
			out = append(out, a)
		}
	}
	return out
}

// jobKind tells what a job sends.
type jobKind uint8

const (
	jobNative jobKind = iota
	jobLine
	jobGroup
	jobGroupLine
)

// job is a command queued for the scheduler.
type job struct {
	ctx  context.Context
	kind jobKind
	addr frame.Address
	req  frame.Request
	line jsonline.Request
	done chan result
	// Timed sends (GroupAt, GroupCallAt): the moment the last byte is to
	// leave the wire, the bytes, and when writing them starts.
	at, start time.Time
	wire      []byte
	// passed: the scheduler left the command queued because it would
	// not have ended before a timed send's start; began: it took the
	// wire. A caller giving up on a passed command that never began
	// gets fleet.ErrLineBusy.
	passed, began atomic.Bool
}

type result struct {
	hdr   frame.Header
	body  frame.Message
	reply fleet.Reply
	end   time.Time // timed sends: when the last byte left the wire
	err   error
}

func (j *job) finish(r result) { j.done <- r }

// gaveUp is the error of a command whose caller's context ended (err)
// before its result: fleet.ErrLineBusy (wrapping err) when timed sends
// kept it from the wire, else err.
func (j *job) gaveUp(err error) error {
	if j.passed.Load() && !j.began.Load() {
		return fmt.Errorf("%w: %w", fleet.ErrLineBusy, err)
	}
	return err
}

// submit queues j and waits for its result, or until ctx ends: a
// command that cannot get the wire (timed sends keep it: a show's timed
// actions closer together than their lead leave no room for a reply
// wait) fails with ctx's error instead of holding its caller, a routed
// request's worker on a clustered gateway among them, for as long as the
// sends go on. The scheduler drops a command whose context ended
// (runJob, fire) without sending it.
func (l *Line) submit(ctx context.Context, j *job) result {
	j.ctx = ctx
	j.done = make(chan result, 1)
	select {
	case l.cmds <- j:
	case <-ctx.Done():
		return result{err: ctx.Err()}
	case <-l.closed:
		return result{err: fleet.ErrClosed}
	}
	select {
	case r := <-j.done:
		return r
	case <-ctx.Done():
		return result{err: j.gaveUp(ctx.Err())}
	case <-l.closed:
		// Run may have finished the job while closing.
		select {
		case r := <-j.done:
			return r
		default:
			return result{err: fleet.ErrClosed}
		}
	}
}

// parseAddr reads a board address "1".."223".
func parseAddr(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < int(frame.MinBoard) || n > int(frame.MaxBoard) {
		return 0, fmt.Errorf("%w: %q", ErrBadAddress, s)
	}
	return n, nil
}

// Call runs an API request on the board at addr ("5") as a JSON line and
// returns the board's status and body as it sent them. Paths the link
// does not serve fail with fleet.ErrNotOverLink without touching the line.
func (l *Line) Call(ctx context.Context, addr string, method, path string, body []byte) (fleet.Reply, error) {
	n, err := parseAddr(addr)
	if err != nil {
		return fleet.Reply{}, err
	}
	req, err := lineRequest(jsonline.Board(uint8(n)), method, path, body)
	if err != nil {
		return fleet.Reply{}, err
	}
	r := l.submit(ctx, &job{kind: jobLine, addr: frame.Address(n), line: req})
	return r.reply, r.err
}

func lineRequest(a jsonline.Address, method, path string, body []byte) (jsonline.Request, error) {
	if !strings.HasPrefix(path, "/") {
		return jsonline.Request{}, fmt.Errorf("%w: path %q", ErrBadRequest, path)
	}
	if !jsonline.Served(method, path) {
		return jsonline.Request{}, fmt.Errorf("%w: %s %s", fleet.ErrNotOverLink, method, path)
	}
	req := jsonline.Request{Addr: a, Method: method, Path: path, Body: body, Tag: "x"}
	if err := req.Validate(); err != nil {
		return jsonline.Request{}, fmt.Errorf("%w: %s %s: %v", ErrBadRequest, method, path, err)
	}
	// The tag the scheduler sets may be up to 16 bytes longer than "x".
	if n := len(jsonline.AppendRequest(nil, req)) + 16; n > jsonline.MaxLine {
		return jsonline.Request{}, fmt.Errorf("%w: %s %s: a request line of %d bytes is over the %d-byte limit of a JSON line on RS485",
			fleet.ErrTooLarge, method, path, n, jsonline.MaxLine)
	}
	return req, nil
}

// Native sends one native request to the board at addr (1-223) and
// returns the reply's header and body. An error status is a reply, not
// an error: check hdr.Status.
func (l *Line) Native(ctx context.Context, addr int, req frame.Request) (frame.Header, frame.Message, error) {
	if addr < int(frame.MinBoard) || addr > int(frame.MaxBoard) {
		return frame.Header{}, nil, fmt.Errorf("%w: %d", ErrBadAddress, addr)
	}
	if _, err := frame.AppendRequest(nil, frame.Address(addr), 0, req); err != nil {
		return frame.Header{}, nil, encodeErr(req.Type(), err)
	}
	r := l.submit(ctx, &job{kind: jobNative, addr: frame.Address(addr), req: req})
	return r.hdr, r.body, r.err
}

// encodeErr wraps an error encoding a native request: one too long for
// a frame is fleet.ErrTooLarge (the caller's to shorten), anything else
// ErrBadRequest.
func encodeErr(t frame.Type, err error) error {
	if errors.Is(err, frame.ErrTooLong) {
		return fmt.Errorf("%w: %v does not fit a native frame (payload at most %d bytes): %v", fleet.ErrTooLarge, t, frame.MaxPayload, err)
	}
	return fmt.Errorf("%w: %v: %v", ErrBadRequest, t, err)
}

func groupAddr(group int) (frame.Address, error) {
	if group == 0 {
		return frame.Broadcast, nil
	}
	a := frame.GroupAddress(group)
	if a == frame.Invalid {
		return a, fmt.Errorf("%w: %d", ErrBadGroup, group)
	}
	return a, nil
}

// Group sends req as one frame to a group (1-31) or to every board (0).
// No board answers; it returns once the frame's last byte left the wire.
// The members are re-read at their next poll.
//
// When the line is idle (no exchange running, no command queued) the
// caller writes the frame itself rather than handing it to the scheduler,
// so a scene fire costs little more than its wire time.
func (l *Line) Group(ctx context.Context, group int, req frame.Request) error {
	a, err := groupAddr(group)
	if err != nil {
		return err
	}
	wire, err := frame.AppendRequest(make([]byte, 0, frame.MaxWireLen), a, 0, req)
	if err != nil {
		return encodeErr(req.Type(), err)
	}
	if l.running.Load() && len(l.cmds) == 0 && l.fastPathFits(len(wire)) && l.wire.TryLock() {
		select {
		case <-l.closed:
			l.wire.Unlock()
			return fleet.ErrClosed
		default:
		}
		err := l.send(wire, false)
		if err == nil {
			// Marked before the wire is free: the members' next poll
			// comes after the mark (checkMissed's baseline).
			l.mark(a, kindsOfNative(req.Type()), groupSend{req: req})
		}
		l.wire.Unlock()
		return err
	}
	return l.submit(ctx, &job{kind: jobGroup, addr: a, req: req}).err
}

// groupMark is a group frame sent outside the scheduler, whose members
// the scheduler marks for re-reading.
type groupMark struct {
	addr  frame.Address
	kinds kinds
	send  groupSend
	at    time.Time // when it went
}

func (l *Line) mark(a frame.Address, k kinds, s groupSend) {
	if k == 0 {
		return
	}
	l.marks.Lock()
	l.marks.list = append(l.marks.list, groupMark{a, k, s, l.clk.Now()})
	l.marks.Unlock()
}

// applyMarks runs in the scheduler, before any exchange it starts once
// it holds the wire: a frame Group wrote while it waited for the wire is
// marked before the members' next poll reads them.
func (l *Line) applyMarks() {
	l.marks.Lock()
	list := l.marks.list
	l.marks.list = nil
	l.marks.Unlock()
	for _, m := range list {
		l.afterGroup(m.addr, m.kinds, m.send, m.at)
	}
}

// GroupCall sends one JSON line to a group (1-31) or every board (0).
// No board answers; it returns once the line left the wire.
func (l *Line) GroupCall(ctx context.Context, group int, method, path string, body []byte) error {
	a, err := groupAddr(group)
	if err != nil {
		return err
	}
	ja := jsonline.All()
	if group != 0 {
		ja = jsonline.Group(uint8(group))
	}
	req, err := lineRequest(ja, method, path, body)
	if err != nil {
		return err
	}
	req.Tag = ""
	return l.submit(ctx, &job{kind: jobGroupLine, addr: a, line: req}).err
}
