package lan

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/nettest"
)

// testBoard is an in-process board serving HTTP on a fixed address.
type testBoard = boardtest.InProc

// startBoard runs a board from dir (a new one when empty) on addr
// ("127.0.0.1:0" for any port).
func startBoard(t testing.TB, dir, addr string) *testBoard {
	t.Helper()
	return boardtest.StartInProcess(t, boardtest.InProcOptions{Dir: dir, Addr: addr})
}

// newProxy puts a TCP proxy in front of a board (cut and restore it to
// take the board's network away and back).
func newProxy(t testing.TB, target string) *nettest.Proxy { return nettest.NewProxy(t, target) }

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
}

func newRecSink() *recSink {
	return &recSink{seen: map[string]int{}, infos: map[string]json.RawMessage{}, lost: map[string][]string{},
		restarted: map[string]int{}, hs: map[string][]fleet.Happening{}, changed: map[string]map[string]json.RawMessage{}}
}

func (s *recSink) Seen(ref fleet.Ref, info json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[ref.Addr]++
	s.infos[ref.Addr] = info
	s.log = append(s.log, "seen")
}

func (s *recSink) Lost(ref fleet.Ref, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[ref.Addr] = append(s.lost[ref.Addr], reason)
	s.log = append(s.log, "lost: "+reason)
}

func (s *recSink) Happened(ref fleet.Ref, hs []fleet.Happening) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hs[ref.Addr] = append(s.hs[ref.Addr], hs...)
	for _, h := range hs {
		s.log = append(s.log, h.Kind+" "+strconv.Itoa(int(h.Seq)))
	}
}

func (s *recSink) Changed(ref fleet.Ref, kind string, state json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	s.log = append(s.log, "restarted")
}

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
			t.Fatalf("timed out waiting for %s; log %v", what, s.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startLAN runs a driver until the test ends.
func startLAN(t testing.TB, o Options) (*LAN, *recSink) {
	t.Helper()
	if o.MinBackoff == 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 200 * time.Millisecond
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

func checkOrder(t *testing.T, hs []fleet.Happening, first uint16, n int) {
	t.Helper()
	if len(hs) != n {
		t.Fatalf("%d happenings, want %d: %v", len(hs), n, hs)
	}
	for i, h := range hs {
		if h.Seq != first+uint16(i) || field(h.Data, "seq") != strconv.Itoa(int(h.Seq)) || field(h.Data, "event") != h.Kind {
			t.Fatalf("happening %d: %s %d %s", i, h.Kind, h.Seq, h.Data)
		}
	}
}
