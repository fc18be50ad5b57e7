package rs485

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// errTimeout is an exchange that got no matching reply in time.
var errTimeout = errors.New("rs485: no reply in time")

// errNoRoom is an exchange not sent: its reply would not fit before the
// next timed send (roomFor).
var errNoRoom = errors.New("rs485: no room before a timed send")

// send writes b to the line and counts it. On a simulated line or a port
// that drains, it returns once the last byte left the wire.
func (l *Line) send(b []byte, lines bool) error {
	if _, err := l.o.Port.Write(b); err != nil {
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	l.st.bytesOut.Add(uint64(len(b)))
	l.st.busy.Add(int64(l.wireTime(len(b))))
	if lines {
		l.st.linesOut.Add(1)
	} else {
		l.st.framesOut.Add(1)
	}
	return nil
}

// await reads items until match takes one or wait passes.
func (l *Line) await(ctx context.Context, wait time.Duration, match func(stream.Item) bool) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := l.clk.AfterFunc(wait, cancel)
	defer t.Stop()
	for {
		it, err := l.recv.Next(wctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, stream.ErrClosed) {
				return fleet.ErrClosed
			}
			return errTimeout
		}
		if match(it) {
			return nil
		}
	}
}

// nativeOnce sends one native request and waits for its reply: same
// board, same seq, the request's reply type.
func (l *Line) nativeOnce(ctx context.Context, addr frame.Address, req frame.Request, wait time.Duration) (frame.Header, frame.Message, error) {
	l.seq++
	seq := l.seq
	wire, err := frame.AppendRequest(l.wbuf[:0], addr, seq, req)
	if err != nil {
		return frame.Header{}, nil, encodeErr(req.Type(), err)
	}
	wait, ok := l.roomFor(len(wire), frame.MaxWireLen, wait)
	if !ok {
		return frame.Header{}, nil, l.noRoom()
	}
	if err := l.send(wire, false); err != nil {
		return frame.Header{}, nil, err
	}
	var hdr frame.Header
	var body frame.Message
	var perr error
	want := req.Type().Reply()
	err = l.await(ctx, wait, func(it stream.Item) bool {
		switch it.Kind {
		case stream.Frame:
			if len(it.Data) < frame.HeaderLen {
				l.st.badReply.Add(1)
				return false
			}
			f := frame.Frame{Addr: frame.Address(it.Data[0]), Seq: it.Data[1], Type: frame.Type(it.Data[2]), Payload: it.Data[3:]}
			if !f.Type.IsReply() {
				return false // a request (our echo, another master): not a reply
			}
			if f.Addr != addr || f.Seq != seq || f.Type != want {
				l.strayReply(f)
				return false
			}
			hdr, body, perr = frame.ParseReply(f)
			if perr != nil {
				l.st.badReply.Add(1)
			}
			return true
		case stream.Line:
			l.lineHeard(it.Data)
		}
		return false
	})
	if err != nil {
		return hdr, nil, err
	}
	if perr != nil {
		return hdr, nil, fmt.Errorf("%w: %v %v: %v", fleet.ErrBadReply, addr, req.Type(), perr)
	}
	return hdr, body, nil
}

// noRoom notes an exchange that did not fit before a timed send: the
// scheduler waits for the send rather than try the next step.
func (l *Line) noRoom() error {
	l.sched.noRoom = true
	return errNoRoom
}

// strayReply counts a reply frame that is not the awaited one. A PING
// reply from an address where no board answers is a board that answered
// a discovery PING after its wait (a busy board, a loaded host): the
// address is asked again next (sched.late), not when the sweep comes back
// to it.
func (l *Line) strayReply(f frame.Frame) {
	l.st.stray.Add(1)
	a := int(f.Addr)
	if f.Type != frame.TypePing.Reply() || slices.Contains(l.sched.late, a) || !slices.Contains(l.o.Addresses, a) {
		return
	}
	if b := l.boards[a]; b == nil || !b.present {
		l.sched.late = append(l.sched.late, a)
	}
}

// lineHeard counts a line that is not the awaited reply.
func (l *Line) lineHeard(data []byte) {
	switch jsonline.ClassifyFromBoard(data) {
	case jsonline.KindReply:
		if _, err := jsonline.ParseReply(data); err == nil {
			l.st.stray.Add(1)
			return
		}
		if jsonline.ClassifyFromHost(data) == jsonline.KindRequest {
			return // a request line (echo)
		}
		l.st.badReply.Add(1)
	case jsonline.KindEvent:
		l.st.stray.Add(1) // RS485 boards never push; ignore
	default:
		if jsonline.ClassifyFromHost(data) != jsonline.KindRequest {
			l.st.badReply.Add(1)
		}
	}
}

// lineOnce sends one JSON-line request to a board and waits for the
// reply with its address and tag.
func (l *Line) lineOnce(ctx context.Context, req jsonline.Request, wait time.Duration) (jsonline.Reply, error) {
	return l.lineExchange(ctx, req, wait, nil)
}

// lineExchange is lineOnce that also notes, when tm is not nil, the
// exchange's wire lengths and when its reply arrived.
func (l *Line) lineExchange(ctx context.Context, req jsonline.Request, wait time.Duration, tm *lineTimes) (jsonline.Reply, error) {
	l.tagN++
	req.Tag = "m" + strconv.FormatUint(l.tagN, 36)
	wire := jsonline.AppendRequest(l.wbuf[:0], req)
	if tm != nil {
		tm.out = len(wire)
	}
	wait, ok := l.roomFor(len(wire), gapLineReply, wait)
	if !ok {
		return jsonline.Reply{}, l.noRoom()
	}
	if err := l.send(wire, true); err != nil {
		return jsonline.Reply{}, err
	}
	var rep jsonline.Reply
	err := l.await(ctx, wait, func(it stream.Item) bool {
		switch it.Kind {
		case stream.Line:
			if jsonline.ClassifyFromBoard(it.Data) != jsonline.KindReply {
				l.lineHeard(it.Data)
				return false
			}
			r, err := jsonline.ParseReply(it.Data)
			if err != nil {
				l.lineHeard(it.Data)
				return false
			}
			if r.Addr != req.Addr || r.Tag != req.Tag {
				l.st.stray.Add(1)
				return false
			}
			if tm != nil {
				tm.t4, tm.in = l.stamp.Now(), replyWireLen(it.Data)
			}
			r.Body = append([]byte(nil), r.Body...)
			rep = r
			return true
		case stream.Frame:
			if len(it.Data) >= frame.HeaderLen && frame.Type(it.Data[2]).IsReply() {
				l.strayReply(frame.Frame{Addr: frame.Address(it.Data[0]), Seq: it.Data[1], Type: frame.Type(it.Data[2])})
			}
		case stream.TooLong:
			l.st.badReply.Add(1)
		}
		return false
	})
	return rep, err
}

// retry runs once until it succeeds, fails otherwise than by a timeout,
// or has timed out 1+retries times (fewer when a retry would run into a
// timed send); it counts timeouts and retries and waits the backoff
// between tries.
func (l *Line) retry(ctx context.Context, retries int, once func() error) error {
	backoff := l.o.Backoff
	for attempt := 0; ; attempt++ {
		began := l.clk.Now()
		err := once()
		if !errors.Is(err, errTimeout) {
			return err
		}
		l.st.timeouts.Add(1)
		// A retry must not run into a timed send (timed.go): it takes as
		// long as the attempt that timed out.
		if attempt >= retries || !l.fits(backoff+l.clk.Since(began)) {
			return err
		}
		l.st.retries.Add(1)
		if err := clock.Sleep(ctx, l.clk, backoff); err != nil {
			return err
		}
		backoff *= 2
	}
}

// native runs a native exchange with retries.
func (l *Line) native(ctx context.Context, addr frame.Address, req frame.Request, wait time.Duration, retries int) (frame.Header, frame.Message, error) {
	var hdr frame.Header
	var body frame.Message
	err := l.retry(ctx, retries, func() error {
		var err error
		hdr, body, err = l.nativeOnce(ctx, addr, req, wait)
		return err
	})
	if errors.Is(err, errTimeout) {
		err = fmt.Errorf("%w: %v %v", fleet.ErrNoReply, addr, req.Type())
	}
	if err == nil {
		l.heard(int(addr), int(hdr.Pending))
	}
	return hdr, body, err
}

// call runs a JSON-line exchange with retries.
func (l *Line) call(ctx context.Context, req jsonline.Request, wait time.Duration, retries int) (jsonline.Reply, error) {
	var rep jsonline.Reply
	err := l.retry(ctx, retries, func() error {
		var err error
		rep, err = l.lineOnce(ctx, req, wait)
		return err
	})
	if errors.Is(err, errTimeout) {
		err = fmt.Errorf("%w: %v %s %s", fleet.ErrNoReply, req.Addr, req.Method, req.Path)
	}
	if err == nil {
		l.heard(int(req.Addr.N), rep.Pending)
	}
	return rep, err
}

// runJob runs one command from a caller.
func (l *Line) runJob(ctx context.Context, j *job) {
	if err := j.ctx.Err(); err != nil {
		j.finish(result{err: j.gaveUp(err)})
		return
	}
	j.began.Store(true)
	// The caller's context bounds the wait; the line's ends everything.
	jctx, cancel := context.WithCancel(j.ctx)
	stop := context.AfterFunc(ctx, cancel)
	defer func() { stop(); cancel() }()
	switch j.kind {
	case jobNative:
		hdr, body, err := l.native(jctx, j.addr, j.req, l.o.ReplyWait, l.o.Retries)
		if err == nil {
			l.afterNative(int(j.addr), j.req.Type())
		}
		l.unanswered(int(j.addr), err)
		j.finish(result{hdr: hdr, body: body, err: err})
	case jobLine:
		rep, err := l.call(jctx, j.line, l.o.ReplyWait, l.o.Retries)
		l.unanswered(int(j.addr), err)
		if err != nil {
			j.finish(result{err: err})
			return
		}
		l.afterCall(int(j.addr), j.line, rep)
		j.finish(result{reply: fleet.Reply{Status: rep.Status, Body: rep.Body}})
	case jobGroup:
		l.groupBatch(j)
	case jobGroupLine:
		err := l.send(jsonline.AppendRequest(l.wbuf[:0], j.line), true)
		if err == nil {
			l.afterGroup(j.addr, kindsOfPath(j.line.Method, j.line.Path), groupSend{line: &j.line}, l.clk.Now())
		}
		j.finish(result{err: err})
	}
}

// groupBatch writes group frame j and every other group frame queued
// now (untimed, its caller still waiting) back to back in one write, in
// the order they came: a desk's look for several group fixtures on the
// line reaches every member after one wait for the wire, not one wait
// per fixture (BenchmarkDMXToChange). A frame is taken along only when
// the batch still ends before the next timed send (timed.go), so the
// batch never runs into one. Commands queued between them go after the
// batch, which holds the wire for the frames' wire time only.
func (l *Line) groupBatch(j *job) {
	batch := []*job{j}
	l.drainCmds()
	l.seq++
	wire, err := frame.AppendRequest(l.wbuf[:0], j.addr, l.seq, j.req)
	if err != nil {
		j.finish(result{err: err})
		return
	}
	q := l.sched.queue[:0]
	for _, o := range l.sched.queue {
		if o.kind != jobGroup || len(batch) == maxGroupBatch {
			q = append(q, o)
			continue
		}
		if err := o.ctx.Err(); err != nil {
			o.finish(result{err: err})
			continue
		}
		more, err := frame.AppendRequest(wire, o.addr, l.seq+1, o.req)
		if err != nil || !l.fitsQueued(l.wireTime(len(more))) {
			q = append(q, o)
			continue
		}
		l.seq++
		wire = more
		batch = append(batch, o)
	}
	clear(l.sched.queue[len(q):])
	l.sched.queue = q
	err = l.send(wire, false)
	if err == nil {
		l.st.framesOut.Add(uint64(len(batch) - 1)) // send counted one
	}
	for _, b := range batch {
		if err == nil {
			l.afterGroup(b.addr, kindsOfNative(b.req.Type()), groupSend{req: b.req}, l.clk.Now())
		}
		b.finish(result{err: err})
	}
}

// maxGroupBatch bounds the group frames one write carries (the write
// buffer holds this many largest frames).
const maxGroupBatch = 8

// unanswered counts a command that got no reply to any of its tries
// (each waiting the full reply wait) as a missed poll of its board: while
// callers keep the line busy polls wait, and a board that went away must
// still be reported lost.
func (l *Line) unanswered(addr int, err error) {
	if b := l.boards[addr]; b != nil && b.present && errors.Is(err, fleet.ErrNoReply) {
		l.missed(b, fmt.Sprintf("no reply to a command on %s", l.name))
	}
}
