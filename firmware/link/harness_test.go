package link_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/i2creg"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/store"
)

// testBoard is a board running in this process with its port on one end
// of a byte stream.
type testBoard struct {
	b    *board.Board
	port *link.Port
	dir  string
	stop func()
}

// presetLink saves link settings into a data dir before the board starts.
func presetLink(t testing.TB, dir string, s link.Settings) {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "settings.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Bucket("link").Put("link", s); err != nil {
		t.Fatal(err)
	}
}

func startBoard(t testing.TB, dir string, rw io.ReadWriteCloser, bus *i2creg.Bus) *testBoard {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if tb, ok := t.(*testing.B); ok {
		tb.StopTimer()
		defer tb.StartTimer()
	}
	var port *link.Port
	if rw != nil {
		port = link.NewPort(rw, "test")
	}
	ready := make(chan struct{})
	b, err := board.Open(board.Config{DataDir: dir,
		Features: assemble.Features(assemble.Options{Port: port, I2C: bus}),
		OnReady:  func(net.Addr) { close(ready) }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, ln) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("board stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("board did not start")
	}
	tb := &testBoard{b: b, port: port, dir: dir}
	var once sync.Once
	tb.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if port != nil {
				port.Close()
			}
		})
	}
	t.Cleanup(tb.stop)
	return tb
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
	// wait is how long to wait for a reply (default 3 s).
	wait time.Duration
}

func (h *host) replyWait() time.Duration {
	if h.wait > 0 {
		return h.wait
	}
	return 3 * time.Second
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

// pipe returns two connected byte streams (TCP on loopback, so writes do
// not wait for the reader as net.Pipe's do).
func pipe(t testing.TB) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-ch
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
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
