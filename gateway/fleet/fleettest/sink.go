// Package fleettest holds helpers for tests of fleet drivers (the LAN
// driver, the RS485 master): a Sink that records every report a driver
// makes, with a Wait that polls it, and JSON field reading for replies.
package fleettest

import (
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// Sink is a fleet.Sink that records what a driver reports, by board
// address. Read its fields under Mu (Wait's condition already holds it).
type Sink struct {
	Mu         sync.Mutex
	SeenN      map[string]int               // Seen calls
	Infos      map[string]json.RawMessage   // the last info Seen carried
	LostWhy    map[string][]string          // Lost reasons, in order
	RestartedN map[string]int               // Restarted calls
	Clocks     map[string]fleet.BoardClock  // last clock estimate per address
	ClockN     map[string]int               // Clock calls
	Hs         map[string][]fleet.Happening // every happening, in order
	States     map[string]map[string]json.RawMessage
	// ChangedN counts Changed calls by address and kind ("3/leds").
	ChangedN map[string]int
	// Log lists the reports in order, for failure messages.
	Log []string
	// Bad lists happenings and states that were not valid JSON.
	Bad []string
	// OnHappening, when set, sees each happening (under Mu).
	OnHappening func(fleet.Happening)
}

var _ fleet.Sink = (*Sink)(nil)

// NewSink returns an empty Sink.
func NewSink() *Sink {
	return &Sink{SeenN: map[string]int{}, Infos: map[string]json.RawMessage{}, LostWhy: map[string][]string{},
		RestartedN: map[string]int{}, ClockN: map[string]int{}, Hs: map[string][]fleet.Happening{}, States: map[string]map[string]json.RawMessage{},
		ChangedN: map[string]int{}}
}

func (s *Sink) Seen(ref fleet.Ref, info json.RawMessage) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.SeenN[ref.Addr]++
	if info != nil {
		s.Infos[ref.Addr] = info
	}
	s.Log = append(s.Log, "seen "+ref.Addr)
}

func (s *Sink) Lost(ref fleet.Ref, reason string) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.LostWhy[ref.Addr] = append(s.LostWhy[ref.Addr], reason)
	s.Log = append(s.Log, "lost "+ref.Addr+": "+reason)
}

func (s *Sink) Happened(ref fleet.Ref, hs []fleet.Happening) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	for _, h := range hs {
		if !json.Valid(h.Data) {
			s.Bad = append(s.Bad, "invalid json "+string(h.Data))
		}
		if s.OnHappening != nil {
			s.OnHappening(h)
		}
		s.Log = append(s.Log, h.Kind+" "+strconv.Itoa(int(h.Seq)))
	}
	s.Hs[ref.Addr] = append(s.Hs[ref.Addr], hs...)
}

func (s *Sink) Changed(ref fleet.Ref, kind string, state json.RawMessage) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if !json.Valid(state) {
		s.Bad = append(s.Bad, "invalid state "+kind)
	}
	m := s.States[ref.Addr]
	if m == nil {
		m = map[string]json.RawMessage{}
		s.States[ref.Addr] = m
	}
	m[kind] = state
	s.ChangedN[ref.Addr+"/"+kind]++
}

// Clock implements fleet.ClockSink: the last estimate per address.
func (s *Sink) Clock(ref fleet.Ref, c fleet.BoardClock) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Clocks == nil {
		s.Clocks = map[string]fleet.BoardClock{}
	}
	s.Clocks[ref.Addr] = c
	s.ClockN[ref.Addr]++
}

func (s *Sink) Restarted(ref fleet.Ref) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.RestartedN[ref.Addr]++
	s.Log = append(s.Log, "restarted "+ref.Addr)
}

// Wait polls cond under the sink's lock until it holds, or fails the test
// after timeout naming what it waited for.
func (s *Sink) Wait(t testing.TB, timeout time.Duration, what string, cond func(s *Sink) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.Mu.Lock()
		ok := cond(s)
		s.Mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			s.Mu.Lock()
			defer s.Mu.Unlock()
			t.Fatalf("timed out waiting for %s; sink log %v", what, s.Log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Field reads a top-level field of a JSON object as text (strings as
// they are, numbers and booleans formatted); "" when absent.
func Field(b json.RawMessage, name string) string {
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

// CheckOrder fails t unless hs are n happenings numbered from first up,
// without gaps, each carrying the JSON the board emitted (its seq and
// event fields agree).
func CheckOrder(t testing.TB, hs []fleet.Happening, first uint16, n int) {
	t.Helper()
	if len(hs) != n {
		t.Fatalf("%d happenings, want %d: %v", len(hs), n, hs)
	}
	for i, h := range hs {
		if h.Seq != first+uint16(i) || Field(h.Data, "seq") != strconv.Itoa(int(h.Seq)) || Field(h.Data, "event") != h.Kind {
			t.Fatalf("happening %d: %s %d %s", i, h.Kind, h.Seq, h.Data)
		}
	}
}
