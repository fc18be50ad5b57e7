package rs485

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// testBoard is an in-process board on a simulated line.
type testBoard struct {
	*boardtest.InProc
	addr int
	node *simline.Node
}

// linkSettings are RS485 link settings for address addr in groups.
func linkSettings(addr int, groups []int) link.Settings {
	s := link.DefaultSettings()
	s.Mode, s.Address, s.Groups = link.ModeRS485, addr, groups
	return s
}

// presetLink saves link settings into a data dir before the board starts.
func presetLink(t testing.TB, dir string, addr int, groups []int) {
	t.Helper()
	boardtest.PresetLink(t, dir, linkSettings(addr, groups))
}

// startBoard runs a board with address addr in groups on line.
func startBoard(t testing.TB, line *simline.Line, addr int, groups []int) *testBoard {
	t.Helper()
	name := "board" + strconv.Itoa(addr)
	node, err := line.Attach(simline.NodeOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	s := linkSettings(addr, groups)
	p := boardtest.StartInProcess(t, boardtest.InProcOptions{Port: node, PortName: name, Link: &s})
	return &testBoard{InProc: p, addr: addr, node: node}
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
