package rs485

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestTimedPlan: when a timed send starts writing (its moment less its
// wire time at the line's baud rate), and what commands and background
// steps may cost before it.
func TestTimedPlan(t *testing.T) {
	scene := frame.SceneRequest{Slot: 7}
	sceneWire, _ := frame.AppendRequest(nil, frame.GroupAddress(3), 0, scene)
	leds := frame.LEDsRequest{Mode: frame.LEDSolid, R: 255, Brightness: 50, Flags: frame.LEDNewColour}
	ledsWire, _ := frame.AppendRequest(nil, frame.Broadcast, 0, leds)
	at := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		baud  int
		wire  []byte
		start time.Duration // before at
	}{
		{"scene at 115200", 115200, sceneWire, time.Duration(len(sceneWire)) * 86805 * time.Nanosecond},
		{"leds at 115200", 115200, ledsWire, time.Duration(len(ledsWire)*10) * time.Second / 115200},
		{"scene at 9600", 9600, sceneWire, time.Duration(len(sceneWire)) * 1041666 * time.Nanosecond},
		{"json line at 57600", 57600, []byte("*G3 POST /scenes/apply {\"name\":\"intro\"}\n"), 40 * 10 * time.Second / 57600},
	} {
		l := New(Options{Baud: tc.baud})
		got := at.Sub(l.timedStart(&job{at: at, wire: tc.wire}))
		if d := got - tc.start; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s (%d bytes): starts %v before, want %v", tc.name, len(tc.wire), got, tc.start)
		}
	}
	if len(sceneWire) != 9 {
		t.Errorf("a group SCENE frame is %d bytes on the wire, want 9 (781 µs at 115200)", len(sceneWire))
	}

	l := New(Options{Baud: 115200, ReplyWait: 2 * time.Second, PollWait: 100 * time.Millisecond, DiscoverWait: 40 * time.Millisecond})
	char := time.Second * 10 / 115200
	line := jsonline.Request{Addr: jsonline.Board(5), Method: "GET", Path: "/leds"}
	for _, tc := range []struct {
		name string
		j    *job
		cost time.Duration
	}{
		{"native command", &job{kind: jobNative}, char*frame.MaxWireLen + 2*time.Second},
		{"JSON-line command", &job{kind: jobLine, line: line}, char*time.Duration(len(jsonline.AppendRequest(nil, line))+16) + 2*time.Second},
		{"group frame now", &job{kind: jobGroup}, char * frame.MaxWireLen},
		{"group line now", &job{kind: jobGroupLine, line: line}, char * time.Duration(len(jsonline.AppendRequest(nil, line)))},
	} {
		if got := l.jobCost(tc.j); got/time.Microsecond != tc.cost/time.Microsecond {
			t.Errorf("%s: cost %v, want %v", tc.name, got, tc.cost)
		}
	}
	// A poll goes in a gap of 35 ms before a timed send at 115200 baud:
	// its request, the board's turnaround, a reply and as much again.
	if got, want := l.gapCost(), fireReady+2*frame.MaxWireLen*char+DefaultTurnaround; got/time.Microsecond != want/time.Microsecond || got > 36*time.Millisecond {
		t.Errorf("gap cost %v, want %v", got, want)
	}
}

// TestPick: the scheduler's choice before a timed send.
func TestPick(t *testing.T) {
	ms := time.Millisecond
	step := 122 * ms
	for _, tc := range []struct {
		name   string
		budget time.Duration
		timed  bool
		costs  []time.Duration
		want   picked
	}{
		{"idle line, nothing timed", 0, false, nil, picked{job: -1, step: true}},
		{"a command, nothing timed", 0, false, []time.Duration{2000 * ms}, picked{job: 0}},
		{"a poll fits well before", 500 * ms, true, nil, picked{job: -1, step: true}},
		{"no poll within its wait", 100 * ms, true, nil, picked{job: -1}},
		{"a command that fits", 3000 * ms, true, []time.Duration{2000 * ms}, picked{job: 0}},
		{"a long command waits, a group frame goes", 50 * ms, true, []time.Duration{2000 * ms, ms}, picked{job: 1}},
		{"nothing fits: wait", 50 * ms, true, []time.Duration{2000 * ms}, picked{job: -1}},
		{"within fireReady: fire", fireReady, true, []time.Duration{ms}, picked{fire: true, job: -1}},
		{"late: fire", -3 * ms, true, nil, picked{fire: true, job: -1}},
	} {
		cost := func(i int) time.Duration { return tc.costs[i] }
		if got := pick(tc.budget, tc.timed, len(tc.costs), cost, step); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestIdle: how long the scheduler sleeps with nothing to do.
func TestIdle(t *testing.T) {
	ms := time.Millisecond
	step := 122 * ms
	for _, tc := range []struct {
		name      string
		budget    time.Duration
		timed     bool
		untilPoll time.Duration
		want      time.Duration
	}{
		{"next cycle", 0, false, 40 * ms, 40 * ms},
		{"cycle due", 0, false, -5 * ms, ms},
		{"cycle before a far send", 900 * ms, true, 40 * ms, 40 * ms},
		{"the send before the cycle", 130 * ms, true, 400 * ms, 125 * ms},
		{"no step fits: until the send's wait", 100 * ms, true, 10 * ms, 95 * ms},
		{"at the send's wait", fireReady, true, 10 * ms, 0},
	} {
		if got := idle(tc.budget, tc.timed, tc.untilPoll, step); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// lateBound bounds, on the real clock, how late a timed send may end in
// these tests: ten times what a loaded machine shows (tens of ms), far
// under what a broken path costs (a poll's 300 ms reply wait, a second's
// timer). How close a send lands is BenchmarkTimedFire's figure.
const lateBound = 500 * time.Millisecond

// probe listens on a simulated line and notes when each timed frame's
// last byte arrived, by the wire's schedule (simline's Tap).
type probe struct {
	mu    sync.Mutex
	want  []byte
	tail  []byte
	times []time.Time
}

func startProbe(t testing.TB, line *simline.Line, want []byte) *probe {
	t.Helper()
	p := &probe{want: want}
	node, err := line.Attach(simline.NodeOptions{Name: "probe", RxBuffer: 1 << 10, Tap: func(b []byte, at time.Time) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range b {
			p.tail = append(p.tail, c)
			if len(p.tail) > len(p.want) {
				p.tail = p.tail[1:]
			}
			if bytes.Equal(p.tail, p.want) {
				p.times = append(p.times, at)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { // keep the buffer drained
		buf := make([]byte, 512)
		for {
			if _, err := node.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { node.Close() })
	return p
}

// heardAt is when the probe heard the i-th frame.
func heardAt(t testing.TB, p *probe, i int) time.Time {
	t.Helper()
	heard := p.heard()
	if len(heard) != i+1 {
		t.Fatalf("fire %d: the probe heard %d frames", i, len(heard))
	}
	return heard[i]
}

func (p *probe) heard() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.times)
}

// TestGroupAtLandsOnTime: on a simulated 115200-baud line kept busy by
// back-to-back polling, timed SCENE frames end (their last byte reaches
// a listener) at the moment asked, within a character time; polling
// stands aside (no collision, every board hears every frame) and goes on
// after.
func TestGroupAtLandsOnTime(t *testing.T) {
	line := newLine(t, simline.Faults{})
	var boards []*testBoard
	for a := 1; a <= 4; a++ {
		boards = append(boards, startBoard(t, line, a, []int{3}))
	}
	l, sink := startMaster(t, line, Options{Addresses: addrs(4), PollInterval: -1})
	sink.Wait(t, 60*time.Second, "4 boards", func(s *recSink) bool {
		n := 0
		for _, m := range s.States {
			if len(m) >= 5 {
				n++
			}
		}
		return n == 4
	})
	req := frame.SceneRequest{Slot: 9} // no board has it: nothing changes
	wire, _ := frame.AppendRequest(nil, frame.GroupAddress(3), 0, req)
	p := startProbe(t, line, wire)
	before := make([]uint64, len(boards))
	for i, tb := range boards {
		before[i] = linkFrames(tb)
	}
	collisions := line.Stats().Collisions
	char := line.WireTime(1)
	ctx := context.Background()
	const fires = 12
	var errs []time.Duration
	for i := range fires {
		polls := l.Stats().Polls
		at := time.Now().Add(time.Duration(30+10*i) * time.Millisecond)
		end, err := l.GroupAt(ctx, 3, req, at)
		if err != nil {
			t.Fatal(err)
		}
		// What the line reports (its write's start plus the wire time)
		// is what the wire carried, to the moment between the two clock
		// readings.
		// Bounded loosely (a descheduled goroutine between the write and
		// the clock reading is late by tens of milliseconds on a loaded
		// machine): reporting a wrong moment is off by far more.
		if d := end.Sub(heardAt(t, p, i)); d < -lateBound || d > lateBound {
			t.Errorf("fire %d: the line reports its last byte %v from when it was heard", i, d)
		}
		// Polling goes on between fires.
		waitFor(t, 20*time.Second, fmt.Sprintf("polling after fire %d", i), func() bool { return l.Stats().Polls >= polls+4 })
		errs = append(errs, heardAt(t, p, i).Sub(at))
	}
	// Never early. Late: this test runs on the real clock, where a
	// loaded machine's scheduler (two cores shared, the race detector,
	// five goroutines woken by every byte) makes single fires tens of
	// milliseconds late (median 14 ms, worst 90 ms, beside 50 runnable
	// processes). Only the median is bounded, by lateBound: a generous
	// bound that catches a broken path (a fire that waits out a poll's
	// reply wait, 300 ms in these tests, or a coarse timer), not a measurement.
	// The precision itself (a few µs on a quiet machine, within a
	// character time) is BenchmarkTimedFire's, in make bench.
	sorted := slices.Clone(errs)
	slices.Sort(sorted)
	if med := sorted[len(sorted)/2]; med < -char || med > lateBound {
		t.Errorf("median last byte %v from the moment, want from -%v to %v (all %v)", med, char, lateBound, errs)
	}
	t.Logf("last byte against the moment: median %v (one character: %v)", sorted[len(sorted)/2], char)
	for _, e := range errs {
		if e < -char {
			t.Errorf("a last byte %v before the moment (all %v)", e, errs)
			break
		}
	}
	if c := line.Stats().Collisions - collisions; c != 0 {
		t.Errorf("%d bytes collided: the line was not kept free", c)
	}
	for i, tb := range boards {
		waitFor(t, 20*time.Second, fmt.Sprintf("board %d to hear %d fires", tb.addr, fires), func() bool { return linkFrames(tb)-before[i] >= fires })
	}
}

// waitTimed waits until the scheduler holds a timed send, or (fired,
// when not nil, has a value) has sent it already.
func waitTimed(t *testing.T, l *Line, fired chan time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.nextFire.Load() == nil && len(fired) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no timed send queued")
		}
		runtime.Gosched()
	}
}

// TestGroupAtHoldsCommands: a command that could hold the line past a
// timed send's start (a board that never answers, waited for 300 ms)
// waits until after the send; a group frame sent now goes before it.
func TestGroupAtHoldsCommands(t *testing.T) {
	line := newLine(t, simline.Faults{})
	startBoard(t, line, 1, []int{2})
	l, sink := startMaster(t, line, Options{Addresses: addrs(2), ReplyWait: 300 * time.Millisecond, Retries: -1, PollInterval: 20 * time.Millisecond})
	sink.Wait(t, 30*time.Second, "the board", func(s *recSink) bool { return len(s.States) == 1 })
	ctx := context.Background()
	fired := make(chan time.Time, 1)
	var at, end, done time.Time
	// Before the send: a native command to an address nobody has, which
	// would hold the wire for its 300 ms reply wait, so it cannot fit.
	// A machine so loaded that the command is issued only after the send
	// (or with room before it) did not set the scene: try again.
	for attempt := 0; ; attempt++ {
		at = time.Now().Add(200 * time.Millisecond)
		go func() {
			end, err := l.GroupAt(ctx, 2, frame.EndRequest{}, at)
			if err != nil {
				t.Error(err)
			}
			fired <- end
		}()
		waitTimed(t, l, fired)
		issued := time.Now()
		_, _, err := l.Native(ctx, 2, &frame.PingRequest{})
		done = time.Now()
		if !errors.Is(err, fleet.ErrNoReply) {
			t.Fatalf("err %v", err)
		}
		end = <-fired
		if issued.Before(end) || attempt == 5 {
			break
		}
		t.Logf("attempt %d: the command was issued %v after the send; again", attempt, issued.Sub(end))
	}
	// The command waited for the send: it ended a whole reply wait after
	// the send's last byte, so the send was not held up by it.
	if done.Before(end.Add(300 * time.Millisecond)) {
		t.Errorf("the command ended %v after the send: it did not wait for it", done.Sub(end))
	}
	// Not early, and not late by a broken path (its precision is
	// TestGroupAtLandsOnTime's and BenchmarkTimedFire's).
	if d := end.Sub(at); d < -l.wireTime(1) || d > lateBound {
		t.Errorf("the timed send ended %v from its moment", d)
	}
	// A group frame now, before another timed send, goes first.
	at = time.Now().Add(time.Second)
	go func() {
		end, _ := l.GroupAt(ctx, 2, frame.EndRequest{}, at)
		fired <- end
	}()
	waitTimed(t, l, nil)
	if err := l.Group(ctx, 2, frame.EndRequest{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if end := <-fired; !now.Before(end) {
		t.Errorf("a group frame now ended %v after a timed send it could go before", now.Sub(end))
	}
	// A moment already passed goes at once.
	start := time.Now()
	end, err := l.GroupAt(ctx, 2, frame.EndRequest{}, start.Add(-time.Second))
	if err != nil || end.Before(start) || time.Since(start) > 2*time.Second {
		t.Errorf("a passed moment: end %v after the call, err %v", end.Sub(start), err)
	}
	if _, err := l.GroupAt(ctx, 2, frame.EndRequest{}, time.Time{}); !errors.Is(err, ErrBadTime) {
		t.Errorf("no moment: err %v", err)
	}
	if _, err := l.GroupAt(ctx, 40, frame.EndRequest{}, at); !errors.Is(err, ErrBadGroup) {
		t.Errorf("group 40: err %v", err)
	}
}

// BenchmarkTimedFire measures how close to its moment a timed SCENE frame
// ends on a 115200-baud line kept busy by back-to-back polling: the
// median, 90th percentile and worst of (last byte heard - moment), in µs.
// The issue asks for 1 ms; TestGroupAtLandsOnTime only bounds it loosely.
func BenchmarkTimedFire(b *testing.B) {
	line := newLine(b, simline.Faults{})
	for a := 1; a <= 4; a++ {
		startBoard(b, line, a, []int{3})
	}
	l, sink := startMaster(b, line, Options{Addresses: addrs(4), PollInterval: -1})
	sink.Wait(b, 60*time.Second, "4 boards", func(s *recSink) bool {
		n := 0
		for _, m := range s.States {
			if len(m) >= 5 {
				n++
			}
		}
		return n == 4
	})
	req := frame.SceneRequest{Slot: 9}
	wire, _ := frame.AppendRequest(nil, frame.GroupAddress(3), 0, req)
	p := startProbe(b, line, wire)
	ctx := context.Background()
	errs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		at := time.Now().Add(20 * time.Millisecond)
		if _, err := l.GroupAt(ctx, 3, req, at); err != nil {
			b.Fatal(err)
		}
		errs = append(errs, heardAt(b, p, i).Sub(at))
	}
	b.StopTimer()
	slices.Sort(errs)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(errs[len(errs)/2]), "median-late-µs")
	b.ReportMetric(us(errs[len(errs)*9/10]), "p90-late-µs")
	b.ReportMetric(us(errs[len(errs)-1]), "max-late-µs")
}

// TestCommandWaitEndsWithContext: a command that cannot get the wire
// before a timed send (its reply wait does not fit before the send's
// start) fails with its context's error when that ends, instead of
// holding its caller until the send has gone (a show's timed sends,
// closer together than their lead, never left room: the caller waited
// for as long as the show ran, a clustered gateway's routed request
// worker with it).
func TestCommandWaitEndsWithContext(t *testing.T) {
	line := newLine(t, simline.Faults{})
	startBoard(t, line, 1, nil)
	l, sink := startMaster(t, line, Options{Addresses: addrs(1), ReplyWait: time.Hour})
	sink.Wait(t, 30*time.Second, "the board", func(s *recSink) bool { return len(s.States) == 1 })
	sendCtx, stopSend := context.WithCancel(context.Background())
	defer stopSend()
	fired := make(chan time.Time, 1)
	go func() {
		end, _ := l.GroupAt(sendCtx, 0, frame.EndRequest{}, time.Now().Add(time.Minute))
		fired <- end
	}()
	waitTimed(t, l, nil)
	// An hour's reply wait does not fit before the send a minute away:
	// the line tells the fleet it is busy (a board also on the LAN is
	// reached there), and the command, never sent, fails as ErrLineBusy.
	if !l.TimedBusy() {
		t.Error("TimedBusy false with a timed send queued inside the reply wait")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := l.Call(ctx, "1", "GET", "/scenes", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, fleet.ErrLineBusy) {
		t.Fatalf("err %v, want the context's and fleet.ErrLineBusy", err)
	}
	// A generous bound: the send is a minute away.
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the command returned %v after its context ended", d)
	}
	stopSend()
	<-fired
	// The line goes on: a command now runs.
	if _, err := l.Call(context.Background(), "1", "GET", "/scenes", nil); err != nil {
		t.Fatal(err)
	}
	if l.TimedBusy() {
		t.Error("TimedBusy true with no timed send queued")
	}
	// A command that had the wire and got no answer is not a busy line.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := l.Call(ctx2, "9", "GET", "/scenes", nil); err == nil || errors.Is(err, fleet.ErrLineBusy) {
		t.Errorf("a call to an absent board: err %v, want one that is not fleet.ErrLineBusy", err)
	}
}
