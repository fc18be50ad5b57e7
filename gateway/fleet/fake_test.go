package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
)

// fakeBoard is a board as a fake driver serves it.
type fakeBoard struct {
	id, hostname, version string
	groups                []int
	// reply, when set, answers every call other than /info and /link.
	reply *Reply
	// features and extensions, when set, are /info's lists.
	features, extensions []string
}

func (b *fakeBoard) info() json.RawMessage {
	m := map[string]any{"id": b.id, "hostname": b.hostname, "firmware": map[string]string{"version": b.version}}
	if b.features != nil {
		m["features"] = b.features
	}
	if b.extensions != nil {
		m["extensions"] = b.extensions
	}
	raw, _ := json.Marshal(m)
	return raw
}

// call is one request a fake driver received.
type call struct {
	Addr, Method, Path, Body string
}

// groupSent is one group frame or group JSON line a fake line sent.
type groupSent struct {
	Group  int
	Native frame.Request // nil for a JSON line
	Method string
	Path   string
	Body   string
}

// fakeDriver reaches fake boards by address; it reports nothing by itself
// (tests drive the sink), and answers calls from its boards.
type fakeDriver struct {
	name string

	mu     sync.Mutex
	boards map[string]*fakeBoard
	calls  []call
	sink   Sink
	ready  chan struct{}
}

func newFakeDriver(name string) *fakeDriver {
	return &fakeDriver{name: name, boards: map[string]*fakeBoard{}, ready: make(chan struct{})}
}

func (d *fakeDriver) Name() string { return d.name }

func (d *fakeDriver) Run(ctx context.Context, sink Sink) error {
	d.mu.Lock()
	d.sink = sink
	d.mu.Unlock()
	close(d.ready)
	<-ctx.Done()
	return nil
}

func (d *fakeDriver) put(addr string, b *fakeBoard) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.boards[addr] = b
}

func (d *fakeDriver) Call(ctx context.Context, addr, method, path string, body []byte) (Reply, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.boards[addr]
	if !ok {
		return Reply{}, fmt.Errorf("%w: %s", ErrNoReply, addr)
	}
	switch {
	case method == http.MethodGet && path == "/info":
		return Reply{Status: 200, Body: b.info()}, nil
	case method == http.MethodGet && path == "/link":
		raw, _ := json.Marshal(map[string]any{"running": map[string]any{"groups": b.groups}})
		return Reply{Status: 200, Body: raw}, nil
	}
	d.calls = append(d.calls, call{addr, method, path, string(body)})
	if b.reply != nil {
		return *b.reply, nil
	}
	return Reply{Status: 200, Body: json.RawMessage(`{"ok":true}`)}, nil
}

func (d *fakeDriver) takeCalls() []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.calls
	d.calls = nil
	return c
}

// fakeLine is a fake RS485 line: it records group frames and lines.
type fakeLine struct {
	*fakeDriver
	gmu  sync.Mutex
	sent []groupSent
	busy atomic.Bool // TimedBusy: timed sends keep the wire
}

func (l *fakeLine) TimedBusy() bool { return l.busy.Load() }

func newFakeLine(name string) *fakeLine { return &fakeLine{fakeDriver: newFakeDriver(name)} }

func (l *fakeLine) Native(ctx context.Context, addr int, req frame.Request) (frame.Header, frame.Message, error) {
	return frame.Header{}, nil, ErrNoReply
}

func (l *fakeLine) Group(ctx context.Context, group int, req frame.Request) error {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	l.sent = append(l.sent, groupSent{Group: group, Native: req})
	return nil
}

func (l *fakeLine) GroupCall(ctx context.Context, group int, method, path string, body []byte) error {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	l.sent = append(l.sent, groupSent{Group: group, Method: method, Path: path, Body: string(body)})
	return nil
}

func (l *fakeLine) Stats() LineStats { return LineStats{} }

func (l *fakeLine) takeSent() []groupSent {
	l.gmu.Lock()
	defer l.gmu.Unlock()
	s := l.sent
	l.sent = nil
	return s
}

// runFleet starts f.Run and stops it at the test's end.
func runFleet(t *testing.T, f *Fleet, drivers ...*fakeDriver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	for _, d := range drivers {
		select {
		case <-d.ready:
		case <-time.After(5 * time.Second):
			t.Fatal("driver did not start")
		}
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// eventually waits for cond, polling; background work (GET /info and
// /link reads) runs on real goroutines.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// next reads one event or fails.
func next(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.C:
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

// drain returns every event waiting in w.C without blocking.
func drain(w *Watcher) []Event {
	var out []Event
	for {
		select {
		case ev, ok := <-w.C:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}
