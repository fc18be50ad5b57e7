package rs485

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
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
	return startBoardOn(t, line, addr, groups, nil)
}

// startBoardOn is startBoard for a board on clock clk (nil: the real one).
func startBoardOn(t testing.TB, line *simline.Line, addr int, groups []int, clk clock.Clock) *testBoard {
	t.Helper()
	name := "board" + strconv.Itoa(addr)
	node, err := line.Attach(simline.NodeOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	s := linkSettings(addr, groups)
	p := boardtest.StartInProcess(t, boardtest.InProcOptions{Port: node, PortName: name, Link: &s, Clock: clk})
	return &testBoard{InProc: p, addr: addr, node: node}
}

// newLine makes a simulated line at 115200 baud.
func newLine(t testing.TB, faults simline.Faults) *simline.Line {
	t.Helper()
	return newLineAt(t, 115200, faults)
}

// newLineAt makes a simulated line at baud.
func newLineAt(t testing.TB, baud int, faults simline.Faults) *simline.Line {
	t.Helper()
	line, err := simline.New(simline.Config{Baud: baud, Seed: 11, Faults: faults})
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
type recSink = fleettest.Sink

func newRecSink() *recSink { return fleettest.NewSink() }

// field reads a top-level field of a JSON object as text.
var field = fleettest.Field

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

// afterPolls waits until the master has polled n more times: whatever a
// board still had to say (a repeat, an estimate that must not come) has
// then been asked for. It replaces waiting a fixed time for nothing more.
func afterPolls(t testing.TB, l *Line, n uint64) {
	t.Helper()
	want := l.Stats().Polls + n
	waitFor(t, 20*time.Second, fmt.Sprintf("%d more polls", n), func() bool { return l.Stats().Polls >= want })
}

// waitUptime waits until the master has heard the board at id report an
// uptime of a whole second: a restart shows as the uptime of a PING going
// back. The board says 1 s, then every address gets two PINGs' worth of
// polls.
func waitUptime(t testing.TB, l *Line, id string) {
	t.Helper()
	waitFor(t, 20*time.Second, "an uptime of 1 s on board "+id, func() bool {
		rep, err := l.Call(context.Background(), id, "GET", "/info", nil)
		var info struct {
			Uptime float64 `json:"uptime_s"`
		}
		return err == nil && json.Unmarshal(rep.Body, &info) == nil && info.Uptime >= 1
	})
	afterPolls(t, l, uint64(2*l.o.PingEvery*max(1, len(l.o.Addresses))))
}

// waitFor polls a state that announces no change until cond holds, or
// fails the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
