package rs485

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
)

func TestEventsInOrder(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	b1 := startBoard(t, line, 1, nil)
	b2 := startBoard(t, line, 2, nil)
	l, sink := startMaster(t, line, Options{Addresses: addrs(2)})
	sink.Wait(t, 20*time.Second, "events enabled", func(s *recSink) bool { return len(s.States["2"]) >= 5 })
	for i := range 25 {
		b1.Emit("touch", map[string]any{"action": "down", "x": i, "y": 1})
		if i%3 == 0 {
			b2.Emit("clip_ended", map[string]any{"path": "/a.mov", "finished": true})
		}
		if i%5 == 0 {
			afterPolls(t, l, 1) // spread the happenings over several polls
		}
	}
	sink.Wait(t, 10*time.Second, "every happening", func(s *recSink) bool { return len(s.Hs["1"]) >= 25 && len(s.Hs["2"]) >= 9 })
	afterPolls(t, l, 6) // a repeat would have come by then
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	fleettest.CheckOrder(t, sink.Hs["1"], 1, 25)
	fleettest.CheckOrder(t, sink.Hs["2"], 1, 9)
	if field(sink.Hs["1"][7].Data, "x") != "7" {
		t.Fatalf("fields lost: %s", sink.Hs["1"][7].Data)
	}
}

// TestUnplugged: a board whose transmitter is cut goes Lost; plugged back
// it is Seen again and the happenings it kept meanwhile arrive.
func TestUnplugged(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	b := startBoard(t, line, 4, nil)
	_, sink := startMaster(t, line, Options{Addresses: addrs(5), PollInterval: 20 * time.Millisecond})
	sink.Wait(t, 20*time.Second, "seen with states", func(s *recSink) bool { return len(s.States["4"]) >= 5 })
	b.Emit("clip_started", map[string]any{"path": "/a.mov", "loop": false, "plays": 1, "frames": 10, "fps": 10})
	sink.Wait(t, 5*time.Second, "first happening", func(s *recSink) bool { return len(s.Hs["4"]) == 1 })

	// Seen may come more than once before the cut (a poll answered late
	// on a loaded machine has the board's identity read again): what is
	// promised is a Lost for the cut and a Seen after it.
	sink.Mu.Lock()
	lost := len(sink.LostWhy["4"])
	sink.Mu.Unlock()
	b.node.SetSilent(true)
	var seen int
	sink.Wait(t, 10*time.Second, "lost", func(s *recSink) bool { seen = s.SeenN["4"]; return len(s.LostWhy["4"]) > lost })
	for range 3 {
		b.Emit("clip_ended", map[string]any{"path": "/a.mov", "finished": true})
	}
	b.node.SetSilent(false)
	sink.Wait(t, 10*time.Second, "seen again with the missed happenings", func(s *recSink) bool {
		return s.SeenN["4"] > seen && len(s.Hs["4"]) == 4
	})
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	fleettest.CheckOrder(t, sink.Hs["4"], 1, 4)
	if sink.RestartedN["4"] != 0 {
		t.Fatalf("restart reported for a board that did not restart: %v", sink.Log)
	}
	t.Logf("lost reason: %s", sink.LostWhy["4"][lost])
}

// TestRestart: a board restarted (POST /restart over the link) is
// reported Restarted, read again, and its happenings after the start
// arrive from seq 1.
func TestRestart(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	b := startBoard(t, line, 6, nil)
	l, sink := startMaster(t, line, Options{Addresses: addrs(6), PollInterval: 20 * time.Millisecond, PingEvery: 2})
	sink.Wait(t, 20*time.Second, "seen with states", func(s *recSink) bool { return len(s.States["6"]) >= 5 })
	for range 4 {
		b.Emit("touch", map[string]any{"action": "up", "x": 1, "y": 2})
	}
	sink.Wait(t, 5*time.Second, "4 happenings", func(s *recSink) bool { return len(s.Hs["6"]) == 4 })
	// An uptime of at least 1 s, so that the restart shows.
	waitUptime(t, l, "6")
	rep, err := l.Call(context.Background(), "6", "POST", "/restart", []byte(`{"delay_ms":200}`))
	if err != nil || rep.Status != 202 {
		t.Fatalf("restart: %+v %v", rep, err)
	}
	sink.Wait(t, 15*time.Second, "restarted and seen again", func(s *recSink) bool { return s.RestartedN["6"] == 1 && s.SeenN["6"] >= 2 })
	sink.Wait(t, 5*time.Second, "events enabled again", func(s *recSink) bool { return len(s.States["6"]) >= 5 })
	afterPolls(t, l, 2) // the board is polled as usual again
	b.Emit("scene_ended", map[string]any{"name": "x", "then": "off", "by": "end"})
	sink.Wait(t, 5*time.Second, "happening after restart", func(s *recSink) bool { return len(s.Hs["6"]) == 5 })
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if h := sink.Hs["6"][4]; h.Seq != 1 || h.Kind != "scene_ended" {
		t.Fatalf("after restart: %+v", h)
	}
	if sink.RestartedN["6"] != 1 || len(sink.LostWhy["6"]) > 1 {
		t.Fatalf("log %v", sink.Log)
	}
}

// TestNoisyLine: 1% bit flips and drops plus noise bursts: calls still
// mostly work, nothing crashes, the counters show the faults, and no
// happening is reported twice or out of order.
func TestNoisyLine(t *testing.T) {
	line := newLine(t, simline.Faults{})
	b1 := startBoard(t, line, 1, nil)
	startBoard(t, line, 2, nil)
	l, sink := startMaster(t, line, Options{Addresses: addrs(3), PollInterval: 10 * time.Millisecond, ReplyWait: 100 * time.Millisecond})
	sink.Wait(t, 20*time.Second, "two boards", func(s *recSink) bool { return len(s.States["1"]) >= 5 && len(s.States["2"]) >= 5 })
	if err := line.SetFaults(simline.Faults{FlipRate: 0.01, DropRate: 0.01, NoiseRate: 0.002}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := 0
	for i := range 40 {
		if i%10 == 0 {
			line.InjectNoise([]byte("\x00\x13garbage\n@1 #zz 200 {}\n\x00\x05\x07\x00"))
		}
		if i%2 == 0 {
			b1.Emit("touch", map[string]any{"action": "down", "x": i, "y": 0})
		}
		hdr, _, err := l.Native(ctx, 1+i%2, &frame.LEDsRequest{Mode: frame.LEDSolid, R: uint8(i), Flags: frame.LEDNewColour})
		if err == nil && hdr.Status == frame.StatusOK {
			ok++
		} else if err != nil && !errors.Is(err, fleet.ErrNoReply) && !errors.Is(err, fleet.ErrBadReply) {
			t.Fatalf("unexpected error %v", err)
		}
	}
	if err := line.SetFaults(simline.Faults{}); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	t.Logf("%d/40 acknowledged; stats %+v; line %+v", ok, st, line.Stats())
	if ok < 26 {
		t.Fatalf("only %d of 40 commands got through", ok)
	}
	if st.BadCRC+st.Garbage == 0 || st.Timeouts == 0 {
		t.Fatalf("faults not counted: %+v", st)
	}
	// Once the line is clean again every touch arrives (20, fewer than the
	// 32 a board keeps), in order, once.
	sink.Wait(t, 20*time.Second, "every touch", func(s *recSink) bool { return len(s.Hs["1"]) >= 20 })
	afterPolls(t, l, 6) // a repeat would have come by then
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	fleettest.CheckOrder(t, sink.Hs["1"], 1, 20)
}

// rogue is a node that answers every request to addr with replies that
// must not be taken: a wrong seq, a wrong tag, another address, a bad
// CRC, and a garbage line.
func rogue(t *testing.T, line *simline.Line, addr int) {
	node, err := line.Attach(simline.NodeOptions{Name: "rogue"})
	if err != nil {
		t.Fatal(err)
	}
	recv := stream.New(stream.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); node.Close(); recv.Close(); <-done })
	go func() { _ = recv.Pump(ctx, node) }()
	go func() {
		defer close(done)
		for {
			it, err := recv.Next(ctx)
			if err != nil {
				return
			}
			var out []byte
			switch it.Kind {
			case stream.Frame:
				if len(it.Data) < 3 || int(it.Data[0]) != addr || frame.Type(it.Data[2]).IsReply() {
					continue
				}
				seq, typ := it.Data[1], frame.Type(it.Data[2])
				h := frame.Header{}
				out, _ = frame.AppendReply(out, frame.Address(addr), seq+1, typ, h, &frame.PingReply{Protocol: 1})
				out, _ = frame.AppendReply(out, frame.Address(addr+1), seq, typ, h, &frame.PingReply{Protocol: 1})
				bad, _ := frame.AppendReply(nil, frame.Address(addr), seq, typ, h, &frame.PingReply{Protocol: 1})
				bad[3] ^= 0x40
				out = append(out, bad...)
			case stream.Line:
				req, err := jsonline.ParseRequest(it.Data)
				if err != nil || int(req.Addr.N) != addr || req.Addr.Kind != jsonline.BoardAddr {
					continue
				}
				out = jsonline.AppendReply(out, jsonline.Reply{Addr: req.Addr, Tag: req.Tag + "x", Status: 200, Body: []byte(`{}`)})
				out = jsonline.AppendReply(out, jsonline.Reply{Addr: jsonline.Board(uint8(addr + 1)), Tag: req.Tag, Status: 200, Body: []byte(`{}`)})
				out = append(out, "@"+fmt.Sprint(addr)+" #"+req.Tag+" 2x0 {\n"...)
				out = append(out, 0x01, 0x02, 0xff, '\n')
			}
			if _, err := node.Write(out); err != nil {
				return
			}
		}
	}()
}

func TestRogueRepliesNeverTaken(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	rogue(t, line, 9)
	l, _ := startMaster(t, line, Options{Addresses: []int{9}, ReplyWait: 200 * time.Millisecond, Retries: 1})
	ctx := context.Background()
	if _, _, err := l.Native(ctx, 9, &frame.PingRequest{}); !errors.Is(err, fleet.ErrNoReply) {
		t.Fatalf("native: %v", err)
	}
	if _, err := l.Call(ctx, "9", "GET", "/info", nil); !errors.Is(err, fleet.ErrNoReply) {
		t.Fatalf("call: %v", err)
	}
	st := l.Stats()
	if l.Stray() == 0 || st.BadCRC == 0 || st.Garbage == 0 || st.Boards != 0 {
		t.Fatalf("stray %d stats %+v", l.Stray(), st)
	}
}

// TestClosedPort: a port that fails ends calls with errors, never hangs.
func TestClosedPort(t *testing.T) {
	r, w := io.Pipe()
	l := New(Options{Name: "dead", Port: struct {
		io.Reader
		io.Writer
	}{r, failWriter{}}, Addresses: []int{1}, DiscoverWait: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, newRecSink()) }()
	if _, _, err := l.Native(context.Background(), 1, &frame.PingRequest{}); !errors.Is(err, ErrWrite) {
		t.Fatalf("native on a dead port: %v", err)
	}
	cancel()
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := l.Call(context.Background(), "1", "GET", "/info", nil); !errors.Is(err, fleet.ErrClosed) {
		t.Fatalf("after Run: %v", err)
	}
	if err := l.Run(context.Background(), newRecSink()); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestNewMasterTakesPending: the happenings a board queued for the host
// while no master fetched them (the gateway was killed, or restarting)
// reach the next master, in order. A new master once took the board's
// latest seq as the last one given and dropped them (the soak saw a
// line board's happening lost at each SIGKILL of its gateway).
func TestNewMasterTakesPending(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	b := startBoard(t, line, 3, nil)
	run := func(name string) (*recSink, context.CancelFunc, chan error) {
		return runMaster(t, line, name, false)
	}
	sink1, stop1, done1 := run("master1")
	sink1.Wait(t, 20*time.Second, "events enabled", func(s *recSink) bool { return len(s.States["3"]) >= 5 })
	b.Emit("touch", map[string]any{"action": "down", "x": 1, "y": 1})
	sink1.Wait(t, 5*time.Second, "the first happening", func(s *recSink) bool { return len(s.Hs["3"]) == 1 })
	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b.Emit("touch", map[string]any{"action": "down", "x": 2 + i, "y": 1})
	}
	sink2, stop2, done2 := run("master2")
	defer func() { stop2(); <-done2 }()
	sink2.Wait(t, 20*time.Second, "the three queued meanwhile", func(s *recSink) bool { return len(s.Hs["3"]) >= 3 })
	sink2.Mu.Lock()
	defer sink2.Mu.Unlock()
	fleettest.CheckOrder(t, sink2.Hs["3"], 2, 3)
}

func TestSeqBefore(t *testing.T) {
	for _, tc := range []struct {
		s    uint16
		n    int
		want uint16
	}{{10, 0, 10}, {10, 3, 7}, {3, 3, 65535}, {1, 1, 65535}, {2, 4, 65533}, {0, 5, 0}} {
		if got := seqBefore(tc.s, tc.n); got != tc.want {
			t.Errorf("seqBefore(%d, %d) = %d, want %d", tc.s, tc.n, got, tc.want)
		}
	}
}

// runMaster runs a master of board 3 on line until cancelled.
func runMaster(t *testing.T, line *simline.Line, name string, replay bool) (*recSink, context.CancelFunc, chan error) {
	t.Helper()
	node, err := line.Attach(simline.NodeOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	l := New(Options{Port: node, Name: "test", Addresses: addrs(3), PollInterval: 20 * time.Millisecond,
		DiscoverWait: 150 * time.Millisecond, PollWait: 300 * time.Millisecond, Log: debugLog(), ReplayKept: replay})
	sink := newRecSink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, sink) }()
	return sink, cancel, done
}

// twoFetched runs a master of board 3 on line until it has fetched two
// happenings the board makes, then stops it (a gateway killed after
// fetching them).
func twoFetched(t *testing.T, line *simline.Line, b *testBoard) {
	t.Helper()
	sink, stop, done := runMaster(t, line, "master1", false)
	sink.Wait(t, 20*time.Second, "events enabled", func(s *recSink) bool { return len(s.States["3"]) >= 5 })
	for i := range 2 {
		b.Emit("touch", map[string]any{"action": "down", "x": i, "y": 1})
	}
	sink.Wait(t, 5*time.Second, "two happenings", func(s *recSink) bool { return len(s.Hs["3"]) == 2 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestReplayKept: with ReplayKept a master that starts hands over every
// happening the board keeps, then the new ones, in order: a cluster
// gateway killed after fetching happenings it never published gets them
// again at its restart (the cluster drops those its stream has).
func TestReplayKept(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	b := startBoard(t, line, 3, nil)
	twoFetched(t, line, b)
	b.Emit("touch", map[string]any{"action": "down", "x": 9, "y": 1})
	sink2, stop2, done2 := runMaster(t, line, "master2", true)
	defer func() { stop2(); <-done2 }()
	sink2.Wait(t, 20*time.Second, "the kept and the queued", func(s *recSink) bool { return len(s.Hs["3"]) >= 3 })
	b.Emit("touch", map[string]any{"action": "up", "x": 9, "y": 1})
	sink2.Wait(t, 5*time.Second, "a new one", func(s *recSink) bool { return len(s.Hs["3"]) >= 4 })
	sink2.Mu.Lock()
	defer sink2.Mu.Unlock()
	fleettest.CheckOrder(t, sink2.Hs["3"], 1, 4)
}

// TestReplayRecentOnly: the replay of kept happenings at a master's start
// (ReplayKept) hands over only those of the last fleet.ReplayRecent of
// the board's uptime (their t_ms), as the LAN driver's does: an idle
// board keeps its last happenings for good, and a clustered gateway that
// starts would have put the older ones in its stream again as new.
func TestReplayRecentOnly(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	clk := &jumpClock{}
	b := startBoardOn(t, line, 3, nil, clk)
	twoFetched(t, line, b)
	// The board stays up five minutes more, then a happening no master
	// fetched: the only one of the last minute.
	clk.jump(5 * time.Minute)
	b.Emit("touch", map[string]any{"action": "down", "x": 9, "y": 1})
	sink2, stop2, done2 := runMaster(t, line, "master2", true)
	defer func() { stop2(); <-done2 }()
	sink2.Wait(t, 20*time.Second, "the recent one", func(s *recSink) bool { return len(s.Hs["3"]) >= 1 })
	b.Emit("touch", map[string]any{"action": "up", "x": 9, "y": 1})
	sink2.Wait(t, 5*time.Second, "a new one", func(s *recSink) bool { return len(s.Hs["3"]) >= 2 })
	sink2.Mu.Lock()
	defer sink2.Mu.Unlock()
	fleettest.CheckOrder(t, sink2.Hs["3"], 3, 2)
}

// jumpClock is the real clock moved on by the jumps a test makes: a board
// on it has been up that much longer. Timers run in real time.
type jumpClock struct{ off atomic.Int64 }

func (c *jumpClock) jump(d time.Duration) { c.off.Add(int64(d)) }

func (c *jumpClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *jumpClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *jumpClock) NewTimer(d time.Duration) clock.Timer {
	return clock.Real.NewTimer(d)
}
func (c *jumpClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real.NewTicker(d) }
func (c *jumpClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real.AfterFunc(d, f)
}
