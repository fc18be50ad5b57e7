package rs485

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
)

// TestRoomFor: before a timed send, a background exchange's wait is cut
// to end before the send's start with the reply's wire time and
// fireReady to spare, and it does not go when less than the board's
// turnaround and its reply are left. With no timed send it keeps its
// wait.
func TestRoomFor(t *testing.T) {
	ms := time.Millisecond
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(Options{Clock: clk, Port: nopPort{}, Baud: 115200, PollWait: 300 * ms})
	if w, ok := l.roomFor(8, frame.MaxWireLen, 300*ms); !ok || w != 300*ms {
		t.Fatalf("nothing timed: wait %v %v, want 300ms", w, ok)
	}
	l.queued(&job{at: clk.Now().Add(100 * ms), wire: make([]byte, 9), ctx: context.Background(), done: make(chan result, 1)})
	start := l.sched.timed[0].start
	for _, tc := range []struct {
		name       string
		after      time.Duration // from now
		req, reply int
		wait       time.Duration
		ok         bool
	}{
		{"a STATUS poll just after a send", 0, 8, frame.MaxWireLen, 300 * ms, true},
		{"a fetch just after a send", 0, 40, gapLineReply, 300 * ms, true},
		{"a short wait is kept", 0, 8, frame.MaxWireLen, 10 * ms, true},
		{"a poll with 40 ms left", 60 * ms, 8, frame.MaxWireLen, 300 * ms, true},
		{"a fetch with 40 ms left", 60 * ms, 40, gapLineReply, 300 * ms, false},
		{"nothing with 10 ms left", 90 * ms, 8, frame.MaxWireLen, 300 * ms, false},
	} {
		clk.Set(time.Unix(1000, 0).Add(tc.after))
		w, ok := l.roomFor(tc.req, tc.reply, tc.wait)
		if ok != tc.ok {
			t.Errorf("%s: goes %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		end := clk.Now().Add(l.wireTime(tc.req) + w + l.wireTime(tc.reply) + fireReady)
		if end.After(start) || w > tc.wait || (w < tc.wait && w < l.o.Turnaround+l.wireTime(tc.reply)) {
			t.Errorf("%s: wait %v ends %v from the send's start", tc.name, w, start.Sub(end))
		}
	}
}

// TestShowKeepsPolling: while a show sends a group frame timed every
// 100 ms, the master goes on polling the line's boards in the gaps: a
// board's happenings arrive and another's restart is seen during the
// show, and every timed send still goes out on time with no byte
// collided. Before, a poll was costed at a whole PollWait (122 ms by
// default), which never fit a 100 ms gap: the master neither polled nor
// fetched until the show ended.
func TestShowKeepsPolling(t *testing.T) {
	line := newLine(t, simline.Faults{})
	b1 := startBoard(t, line, 1, []int{3})
	startBoard(t, line, 2, []int{3})
	l, sink := startMaster(t, line, Options{Addresses: addrs(2), PingEvery: 2})
	sink.Wait(t, 60*time.Second, "2 boards read", func(s *recSink) bool { return len(s.States["1"]) >= 5 && len(s.States["2"]) >= 5 })
	waitUptime(t, l, "2")
	if rep, err := l.Call(context.Background(), "2", "POST", "/restart", []byte(`{"delay_ms":300}`)); err != nil || rep.Status != 202 {
		t.Fatalf("restart: %+v %v", rep, err)
	}
	collisions := line.Stats().Collisions

	// The show: a frame timed every 100 ms, sent by two callers taking
	// turns, so that the next send is always queued (as a show's cues
	// are), until the test has seen what it waits for.
	var (
		mu   sync.Mutex
		late []time.Duration
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	req := frame.SceneRequest{Slot: 9} // no board has it: nothing changes
	began := time.Now()
	for lane := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1 + lane; ; k += 2 {
				at := began.Add(time.Duration(k) * 100 * time.Millisecond)
				end, err := l.GroupAt(context.Background(), 3, req, at)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				late = append(late, end.Sub(at))
				mu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	polls := l.Stats().Polls
	for i := range 3 {
		b1.Emit("touch", map[string]any{"action": "down", "x": i, "y": 1})
	}
	sink.Wait(t, 30*time.Second, "during the show: 3 happenings, the restart, 20 polls", func(s *recSink) bool {
		return len(s.Hs["1"]) == 3 && s.RestartedN["2"] == 1 && l.Stats().Polls >= polls+20
	})
	during := time.Since(began)
	n := l.Stats().Polls - polls
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("during a show of %d timed sends 100 ms apart: %d polls in %v (%.1f/s)", len(late), n, during.Round(time.Millisecond), float64(n)/during.Seconds())
	if len(late) < 2 {
		t.Fatalf("only %d timed sends: the show did not run alongside", len(late))
	}
	// On time: never early, and not late by a broken path (a send that
	// waited out a poll's reply wait, 300 ms here); the precision is
	// BenchmarkTimedFire's.
	sorted := slices.Clone(late)
	slices.Sort(sorted)
	if sorted[0] < -l.wireTime(1) || sorted[len(sorted)/2] > lateBound {
		t.Errorf("timed sends from their moment: earliest %v, median %v (all %v)", sorted[0], sorted[len(sorted)/2], late)
	}
	if c := line.Stats().Collisions - collisions; c != 0 {
		t.Errorf("%d bytes collided: a reply ran into a timed send", c)
	}
}
