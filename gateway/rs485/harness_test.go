package rs485

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/assemble"
	fwboard "github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
)

// testBoard is an in-process board on a simulated line.
type testBoard struct {
	addr int
	b    *fwboard.Board
	node *simline.Node
	port *link.Port
	dir  string
	stop func()
}

// presetLink saves link settings into a data dir before the board starts.
func presetLink(t testing.TB, dir string, addr int, groups []int) {
	t.Helper()
	s := link.DefaultSettings()
	s.Mode, s.Address, s.Groups = link.ModeRS485, addr, groups
	db, err := store.Open(filepath.Join(dir, "settings.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Bucket("link").Put("link", s); err != nil {
		t.Fatal(err)
	}
}

// startBoard runs a board with address addr in groups on line.
func startBoard(t testing.TB, line *simline.Line, addr int, groups []int) *testBoard {
	t.Helper()
	dir := t.TempDir()
	presetLink(t, dir, addr, groups)
	node, err := line.Attach(simline.NodeOptions{Name: "board" + strconv.Itoa(addr)})
	if err != nil {
		t.Fatal(err)
	}
	port := link.NewPort(node, "board"+strconv.Itoa(addr))
	ready := make(chan struct{})
	b, err := fwboard.Open(fwboard.Config{DataDir: dir,
		Features: assemble.Features(assemble.Options{Port: port}),
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
	case <-time.After(20 * time.Second):
		t.Fatal("board did not start")
	}
	tb := &testBoard{addr: addr, b: b, node: node, port: port, dir: dir}
	var once sync.Once
	tb.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			port.Close()
		})
	}
	t.Cleanup(tb.stop)
	return tb
}

// emit records a happening on the board's hub.
func (tb *testBoard) emit(kind string, fields map[string]any) {
	tb.b.Current().Hub.Emit(kind, fields)
}

// newLine makes a simulated line at 115200 baud.
func newLine(t testing.TB, faults simline.Faults) *simline.Line {
	t.Helper()
	line, err := simline.New(simline.Config{Baud: 115200, Seed: 11, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	return line
}

// startMaster attaches a master to line and runs it until the test ends.
func startMaster(t testing.TB, line *simline.Line, o Options) (*Line, *recSink) {
	t.Helper()
	node, err := line.Attach(simline.NodeOptions{Name: "master"})
	if err != nil {
		t.Fatal(err)
	}
	o.Port = node
	if o.Name == "" {
		o.Name = "test"
	}
	if o.DiscoverWait == 0 {
		o.DiscoverWait = 150 * time.Millisecond // -race on a busy machine
	}
	if o.PollWait == 0 {
		o.PollWait = 300 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = debugLog()
	}
	l := New(o)
	sink := newRecSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, sink) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return l, sink
}

// recSink records what a driver reports.
type recSink struct {
	mu        sync.Mutex
	seen      map[string]int
	infos     map[string]json.RawMessage
	lost      map[string][]string
	restarted map[string]int
	hs        map[string][]fleet.Happening
	changed   map[string]map[string]json.RawMessage
	log       []string
	bad       []string
	latency   func(fleet.Happening) // benchmark hook
}

func newRecSink() *recSink {
	return &recSink{seen: map[string]int{}, infos: map[string]json.RawMessage{}, lost: map[string][]string{},
		restarted: map[string]int{}, hs: map[string][]fleet.Happening{}, changed: map[string]map[string]json.RawMessage{}}
}

func (s *recSink) Seen(ref fleet.Ref, info json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[ref.Addr]++
	if info != nil {
		s.infos[ref.Addr] = info
	}
	s.log = append(s.log, "seen "+ref.Addr)
}

func (s *recSink) Lost(ref fleet.Ref, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[ref.Addr] = append(s.lost[ref.Addr], reason)
	s.log = append(s.log, "lost "+ref.Addr)
}

func (s *recSink) Happened(ref fleet.Ref, hs []fleet.Happening) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range hs {
		if !json.Valid(h.Data) {
			s.bad = append(s.bad, "invalid json "+string(h.Data))
		}
		if s.latency != nil {
			s.latency(h)
		}
	}
	s.hs[ref.Addr] = append(s.hs[ref.Addr], hs...)
}

func (s *recSink) Changed(ref fleet.Ref, kind string, state json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !json.Valid(state) {
		s.bad = append(s.bad, "invalid state "+kind)
	}
	m := s.changed[ref.Addr]
	if m == nil {
		m = map[string]json.RawMessage{}
		s.changed[ref.Addr] = m
	}
	m[kind] = state
}

func (s *recSink) Restarted(ref fleet.Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarted[ref.Addr]++
	s.log = append(s.log, "restarted "+ref.Addr)
}

// wait polls cond under the sink's lock until it holds or timeout.
func (s *recSink) wait(t testing.TB, timeout time.Duration, what string, cond func(s *recSink) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		ok := cond(s)
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("timed out waiting for %s; sink log %v", what, s.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// field reads a top-level string field of a JSON object.
func field(b json.RawMessage, name string) string {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	switch v := m[name].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{h: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

func newGet(path string) *http.Request {
	r, _ := http.NewRequest("GET", "/api/v1"+path, nil)
	return r
}
