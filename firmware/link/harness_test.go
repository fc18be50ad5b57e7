package link_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/firmware/boardtest"
)

// testBoard is a board running in this process with its port on one end
// of a byte stream.
type testBoard = boardtest.InProc

func startBoard(t testing.TB, dir string, rw io.ReadWriteCloser, bus *i2creg.Bus) *testBoard {
	t.Helper()
	return boardtest.StartInProcess(t, boardtest.InProcOptions{Dir: dir, Port: rw, I2C: bus})
}

// host is the controller's end of a link: it sends lines and frames and
// sorts what comes back.
type host struct {
	t    testing.TB
	rw   io.ReadWriter
	recv *stream.Receiver
	seq  uint8
	// lossy tolerates damaged replies (a faulty line): they count as lost.
	lossy bool
	// wait is how long to wait for a reply (default 10 s: a bound for a
	// loaded machine, waited in full only when a reply is lost).
	wait time.Duration
}

func (h *host) replyWait() time.Duration {
	if h.wait > 0 {
		return h.wait
	}
	return 10 * time.Second
}

func newHost(t testing.TB, rw io.ReadWriteCloser) *host {
	h := &host{t: t, rw: rw, recv: stream.New(stream.Config{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = h.recv.Pump(ctx, rw) }()
	t.Cleanup(func() { cancel(); h.recv.Close() })
	return h
}

// next returns the next item within d, or ok false.
func (h *host) next(d time.Duration) (stream.Item, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	it, err := h.recv.Next(ctx)
	if err != nil {
		return stream.Item{}, false
	}
	return stream.Item{Kind: it.Kind, Data: append([]byte(nil), it.Data...)}, true
}

// line sends a request line and returns the reply line, skipping event
// lines (returned separately).
func (h *host) line(req string) (reply jsonline.Reply, events []json.RawMessage, ok bool) {
	h.t.Helper()
	if _, err := io.WriteString(h.rw, req+"\n"); err != nil {
		h.t.Fatal(err)
	}
	for {
		it, got := h.next(h.replyWait())
		if !got {
			return reply, events, false
		}
		if it.Kind != stream.Line {
			continue
		}
		if strings.HasPrefix(string(it.Data), "!") {
			ev, err := jsonline.ParseEvent(it.Data)
			if err != nil {
				if h.lossy {
					continue
				}
				h.t.Fatalf("bad event line %q: %v", it.Data, err)
			}
			events = append(events, ev)
			continue
		}
		r, err := jsonline.ParseReply(it.Data)
		if err != nil {
			if h.lossy {
				return reply, events, false
			}
			h.t.Fatalf("bad reply line %q: %v", it.Data, err)
		}
		return r, events, true
	}
}

// quiet asserts nothing arrives within d.
func (h *host) quiet(d time.Duration) {
	h.t.Helper()
	if it, ok := h.next(d); ok {
		h.t.Fatalf("unexpected %v %q", it.Kind, it.Data)
	}
}

// only sends a request frame to addr and returns its reply, which must be
// the next thing on the wire: no other reply, line or event before it.
// As a board handles what it reads in order, a reply from each board
// proves that it has handled everything sent before, and answered none of
// it: the barrier a test needs after a request that must get no answer.
func (h *host) only(addr frame.Address, req frame.Request) (frame.Header, frame.Message) {
	h.t.Helper()
	h.seq++
	wire, err := frame.AppendRequest(nil, addr, h.seq, req)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.rw.Write(wire); err != nil {
		h.t.Fatal(err)
	}
	it, ok := h.next(h.replyWait())
	if !ok {
		h.t.Fatalf("no reply from %v to %v", addr, req.Type())
	}
	if it.Kind != stream.Frame {
		h.t.Fatalf("unexpected %v %q before the reply from %v", it.Kind, it.Data, addr)
	}
	f := frame.Frame{Addr: frame.Address(it.Data[0]), Seq: it.Data[1], Type: frame.Type(it.Data[2]), Payload: it.Data[3:]}
	if f.Addr != addr || f.Seq != h.seq || f.Type != req.Type().Reply() {
		h.t.Fatalf("unexpected frame %v before the reply from %v to seq %d", f, addr, h.seq)
	}
	hd, body, err := frame.ParseReply(f)
	if err != nil {
		h.t.Fatalf("parse reply %v: %v", f, err)
	}
	return hd, body
}

// barrier pings each address in turn (see only): afterwards every one
// of them has handled all that was sent before without answering it.
func (h *host) barrier(addrs ...frame.Address) {
	h.t.Helper()
	for _, a := range addrs {
		h.only(a, &frame.PingRequest{})
	}
}

// native sends a request frame and returns the reply frame's header and
// body, skipping event frames.
func (h *host) native(addr frame.Address, req frame.Request) (frame.Frame, frame.Header, frame.Message, bool) {
	h.t.Helper()
	h.seq++
	wire, err := frame.AppendRequest(nil, addr, h.seq, req)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.rw.Write(wire); err != nil {
		h.t.Fatal(err)
	}
	for {
		it, got := h.next(h.replyWait())
		if !got {
			return frame.Frame{}, frame.Header{}, nil, false
		}
		if it.Kind != stream.Frame {
			continue
		}
		f := frame.Frame{Addr: frame.Address(it.Data[0]), Seq: it.Data[1], Type: frame.Type(it.Data[2]), Payload: it.Data[3:]}
		if f.Type == frame.TypeEvent {
			continue
		}
		if f.Seq != h.seq || f.Type != req.Type().Reply() {
			if h.lossy {
				continue // a late reply to an earlier request
			}
			h.t.Fatalf("reply %v to seq %d %v", f, h.seq, req.Type())
		}
		hd, body, err := frame.ParseReply(f)
		if err != nil {
			h.t.Fatalf("parse reply %v: %v", f, err)
		}
		return f, hd, body, true
	}
}

type rec struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func newRec() *rec                         { return &rec{h: http.Header{}} }
func (r *rec) Header() http.Header         { return r.h }
func (r *rec) WriteHeader(c int)           { r.code = c }
func (r *rec) Write(b []byte) (int, error) { return r.body.Write(b) }

func newReq(path string) *http.Request {
	r, _ := http.NewRequest("GET", "/api/v1"+path, nil)
	return r
}
