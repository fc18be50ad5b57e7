package rs485

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// linkFrames reads a board's link counter of frames heard.
func linkFrames(tb *testBoard) uint64 {
	r, _ := tb.Board.Current().HTTP.Lookup("GET", "/link")
	rec := newRecorder()
	r.Handler.ServeHTTP(rec, newGet("/link"))
	var st struct {
		Counters struct {
			Frames uint64 `json:"frames"`
		} `json:"counters"`
	}
	_ = json.Unmarshal(rec.body.Bytes(), &st)
	return st.Counters.Frames
}

// BenchmarkGroupFire fires a scene (native SCENE frame) at a group of 16
// boards on a 115200 baud simulated line and compares the time from the
// Group call to its return (the frame's last bit on the wire) with the
// frame's pure wire time: wire-ratio, target under 1.5. Polling is idle
// between cycles, as on a quiet installation. Every member must have
// received every frame (their link frame counters).
func BenchmarkGroupFire(b *testing.B) {
	line := newLine(b, simline.Faults{})
	var boards []*testBoard
	for a := 1; a <= 16; a++ {
		boards = append(boards, startBoard(b, line, a, []int{4}))
	}
	l, sink := startMaster(b, line, Options{Addresses: addrs(16), PollInterval: time.Hour})
	sink.Wait(b, 60*time.Second, "16 boards", func(s *recSink) bool {
		n := 0
		for _, m := range s.States {
			if len(m) >= 5 {
				n++
			}
		}
		return n == 16
	})
	// Let the first poll cycle finish, then the line is quiet.
	for l.Stats().PollCycle == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	before := make([]uint64, len(boards))
	for i, tb := range boards {
		before[i] = linkFrames(tb)
	}
	req := &frame.SceneRequest{Slot: 1}
	wire, _ := frame.AppendRequest(nil, frame.GroupAddress(4), 1, req)
	pure := line.WireTime(len(wire))
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	var spent time.Duration
	for b.Loop() {
		start := time.Now()
		if err := l.Group(ctx, 4, req); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		n++
		b.StopTimer()
		time.Sleep(pure) // leave the boards time to take it
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(spent)/float64(n)/float64(pure), "wire-ratio")
	b.ReportMetric(float64(pure.Microseconds()), "wire-µs")
	deadline := time.Now().Add(10 * time.Second)
	for i, tb := range boards {
		for linkFrames(tb)-before[i] < uint64(n) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := linkFrames(tb) - before[i]; got != uint64(n) {
			b.Fatalf("board %d heard %d of %d group frames", tb.addr, got, n)
		}
	}
}

// BenchmarkEventLatency emits a happening on one of 32 boards polled on
// one line and measures the time until the sink has it, against the poll
// cycle measured meanwhile: cycle-ratio (about 0.5 expected: a happening
// waits half a cycle for its board's poll on average, plus the fetch;
// under 1 means no happening waits more than one cycle on average).
func BenchmarkEventLatency(b *testing.B) {
	line := newLine(b, simline.Faults{})
	var boards []*testBoard
	for a := 1; a <= 32; a++ {
		boards = append(boards, startBoard(b, line, a, nil))
	}
	l, sink := startMaster(b, line, Options{Addresses: addrs(32), PollInterval: -1})
	sink.Wait(b, 120*time.Second, "32 boards", func(s *recSink) bool {
		n := 0
		for _, m := range s.States {
			if len(m) >= 5 {
				n++
			}
		}
		return n == 32
	})
	got := make(chan fleet.Happening, 64)
	sink.Mu.Lock()
	sink.OnHappening = func(h fleet.Happening) { got <- h }
	sink.Mu.Unlock()
	b.ReportAllocs()
	var spent, cycles time.Duration
	n := 0
	rng := rand.New(rand.NewPCG(3, 4))
	polls0, start0 := l.Stats().Polls, time.Now()
	for b.Loop() {
		// A board at random: in turn would ride the round-robin.
		tb := boards[rng.IntN(len(boards))]
		start := time.Now()
		tb.Emit("touch", map[string]any{"action": "down", "x": n % 240, "y": 0})
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			b.Fatal("happening never arrived")
		}
		spent += time.Since(start)
		cycles += l.Stats().PollCycle
		n++
	}
	b.StopTimer()
	b.ReportMetric(float64(spent)/float64(cycles), "cycle-ratio")
	b.ReportMetric(float64((cycles / time.Duration(n)).Milliseconds()), "cycle-ms")
	b.ReportMetric(float64(time.Since(start0).Microseconds())/float64(l.Stats().Polls-polls0), "µs/poll")
}
