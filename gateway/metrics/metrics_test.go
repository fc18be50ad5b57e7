package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeFleet is a fleet as the collectors see it: fixed boards and stats,
// events from a channel, canned replies.
type fakeFleet struct {
	mu      sync.Mutex
	stats   fleet.Stats
	views   []fleet.BoardView
	replies map[string]fleet.Reply // "id path" → reply
	calls   []string
	watch   chan fleet.Event
}

func (f *fakeFleet) Stats() fleet.Stats { f.mu.Lock(); defer f.mu.Unlock(); return f.stats }

func (f *fakeFleet) Boards(flt fleet.Filter) []fleet.BoardView {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fleet.BoardView
	for _, v := range f.views {
		if flt.Online == nil || *flt.Online == v.Online {
			out = append(out, v)
		}
	}
	return out
}

func (f *fakeFleet) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	ch := make(chan fleet.Event)
	go func() {
		defer close(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-f.watch:
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return &fleet.Watcher{C: ch, Dropped: func() uint64 { return 0 }}
}

func (f *fakeFleet) Call(_ context.Context, id, method, path string, _ []byte) (fleet.Reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, id+" "+method+" "+path)
	rep, ok := f.replies[id+" "+path]
	if !ok {
		return fleet.Reply{}, fleet.ErrNoReply
	}
	return rep, nil
}

func (f *fakeFleet) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func testFleet() *fakeFleet {
	return &fakeFleet{
		stats: fleet.Stats{Boards: 3, Online: 2, Watchers: 4, EventsIn: 120, Events: 100, Duplicates: 15,
			Dropped: 2, ReplayMissed: 1, Unattributed: 3, PersistErrors: 0,
			PerBoard: map[string]uint64{"b1": 60, "b2": 40}},
		views: []fleet.BoardView{
			{ID: "b1", Hostname: "holo-b1", Address: 5, Line: "line0", Groups: []int{1, 3}, Online: true,
				Firmware: "1.2.0", LastSeen: t0, Transports: []string{"lan", "rs485:line0"}},
			{ID: "b2", Hostname: "holo-b2", URL: "http://10.0.0.2", Groups: []int{}, Online: true,
				Firmware: "1.2.0", LastSeen: t0.Add(-1500 * time.Millisecond), Transports: []string{"lan"}},
			{ID: "b3", Hostname: "holo-b3", Address: 7, Line: "line0", Groups: []int{1}, Firmware: "1.1.0"},
		},
		replies: map[string]fleet.Reply{},
		watch:   make(chan fleet.Event),
	}
}

func compare(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, c); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	lint(t, reg)
}

// compareSoon is compare for a collector that takes in what it was told
// on a goroutine of its own (Boards: a call's reply is applied after the
// call returns): it waits until the figures are want's, up to 10 s.
func compareSoon(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, c); err != nil {
		t.Fatal(err)
	}
	var err error
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for err = testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil && time.Now().Before(deadline); <-tick.C {
		err = testutil.GatherAndCompare(reg, strings.NewReader(want), names...)
	}
	if err != nil {
		t.Error(err)
	}
	lint(t, reg)
}

func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestFleet(t *testing.T) {
	const want = `
# HELP holo_gateway_board_events_total Events of the board put on the fleet stream.
# TYPE holo_gateway_board_events_total counter
holo_gateway_board_events_total{board="b1"} 60
holo_gateway_board_events_total{board="b2"} 40
holo_gateway_board_events_total{board="b3"} 0
# HELP holo_gateway_board_group 1 for each group (1-31) the board belongs to; group "none" for a board in none.
# TYPE holo_gateway_board_group gauge
holo_gateway_board_group{board="b1",group="1"} 1
holo_gateway_board_group{board="b1",group="3"} 1
holo_gateway_board_group{board="b2",group="none"} 1
holo_gateway_board_group{board="b3",group="1"} 1
# HELP holo_gateway_board_info One series per known board carrying its hostname, firmware, line and bus address; always 1.
# TYPE holo_gateway_board_info gauge
holo_gateway_board_info{address="0",board="b2",firmware="1.2.0",hostname="holo-b2",line=""} 1
holo_gateway_board_info{address="5",board="b1",firmware="1.2.0",hostname="holo-b1",line="line0"} 1
holo_gateway_board_info{address="7",board="b3",firmware="1.1.0",hostname="holo-b3",line="line0"} 1
# HELP holo_gateway_board_last_seen_timestamp_seconds When the board last answered, in seconds since the Unix epoch.
# TYPE holo_gateway_board_last_seen_timestamp_seconds gauge
holo_gateway_board_last_seen_timestamp_seconds{board="b1"} 1.7408304e+09
holo_gateway_board_last_seen_timestamp_seconds{board="b2"} 1.7408303985e+09
# HELP holo_gateway_board_online 1 when some transport reaches the board now, else 0.
# TYPE holo_gateway_board_online gauge
holo_gateway_board_online{board="b1"} 1
holo_gateway_board_online{board="b2"} 1
holo_gateway_board_online{board="b3"} 0
# HELP holo_gateway_board_reachable 1 for each transport (rs485:<line>, lan) that reaches the board now.
# TYPE holo_gateway_board_reachable gauge
holo_gateway_board_reachable{board="b1",transport="lan"} 1
holo_gateway_board_reachable{board="b1",transport="rs485:line0"} 1
holo_gateway_board_reachable{board="b2",transport="lan"} 1
# HELP holo_gateway_boards Boards the gateway knows, by firmware version and whether they are reachable now.
# TYPE holo_gateway_boards gauge
holo_gateway_boards{firmware="1.1.0",online="false"} 1
holo_gateway_boards{firmware="1.2.0",online="true"} 2
# HELP holo_gateway_event_watchers Event watchers attached now (API streams, MQTT bridge, metrics).
# TYPE holo_gateway_event_watchers gauge
holo_gateway_event_watchers 4
# HELP holo_gateway_events_dropped_total Events lost by watchers that fell behind.
# TYPE holo_gateway_events_dropped_total counter
holo_gateway_events_dropped_total 2
# HELP holo_gateway_events_duplicate_total Reports dropped as repeats of what was already on the stream.
# TYPE holo_gateway_events_duplicate_total counter
holo_gateway_events_duplicate_total 15
# HELP holo_gateway_events_published_total Events put on the fleet event stream.
# TYPE holo_gateway_events_published_total counter
holo_gateway_events_published_total 100
# HELP holo_gateway_events_received_total Reports the drivers made (happenings, state changes, restarts, losses), repeats included.
# TYPE holo_gateway_events_received_total counter
holo_gateway_events_received_total 120
# HELP holo_gateway_events_replay_missed_total Events a resuming watcher asked for after they had left the replay buffer.
# TYPE holo_gateway_events_replay_missed_total counter
holo_gateway_events_replay_missed_total 1
# HELP holo_gateway_events_unattributed_total Reports from a place where no board is known yet.
# TYPE holo_gateway_events_unattributed_total counter
holo_gateway_events_unattributed_total 3
# HELP holo_gateway_registry_write_errors_total Failed writes of board records to the store.
# TYPE holo_gateway_registry_write_errors_total counter
holo_gateway_registry_write_errors_total 0
`
	compare(t, NewFleet(testFleet()), want)
}

func TestFleetEmpty(t *testing.T) {
	const want = `
# HELP holo_gateway_event_watchers Event watchers attached now (API streams, MQTT bridge, metrics).
# TYPE holo_gateway_event_watchers gauge
holo_gateway_event_watchers 0
`
	compare(t, NewFleet(&fakeFleet{}), want, "holo_gateway_event_watchers", "holo_gateway_boards", "holo_gateway_board_info")
}

func TestLines(t *testing.T) {
	src := func() map[string]fleet.LineStats {
		return map[string]fleet.LineStats{"rs485:line0": {
			BytesOut: 1000, BytesIn: 2000, FramesOut: 10, FramesIn: 9, LinesOut: 3, LinesIn: 2,
			BadCRC: 1, Garbage: 4, Timeouts: 5, Retries: 6, Polls: 7,
			PollCycle: 250 * time.Millisecond, Busy: 1500 * time.Millisecond, Boards: 12,
		}}
	}
	const want = `
# HELP holo_gateway_line_bad_crc_total Received frames whose CRC did not match.
# TYPE holo_gateway_line_bad_crc_total counter
holo_gateway_line_bad_crc_total{line="line0"} 1
# HELP holo_gateway_line_boards Boards found on the line.
# TYPE holo_gateway_line_boards gauge
holo_gateway_line_boards{line="line0"} 12
# HELP holo_gateway_line_busy_seconds_total Time the line carried the gateway's bytes; its rate is the line's utilisation.
# TYPE holo_gateway_line_busy_seconds_total counter
holo_gateway_line_busy_seconds_total{line="line0"} 1.5
# HELP holo_gateway_line_garbage_total Received byte runs and replies that were neither a valid frame nor a JSON line.
# TYPE holo_gateway_line_garbage_total counter
holo_gateway_line_garbage_total{line="line0"} 4
# HELP holo_gateway_line_poll_cycle_seconds Duration of the last full poll round over every known board.
# TYPE holo_gateway_line_poll_cycle_seconds gauge
holo_gateway_line_poll_cycle_seconds{line="line0"} 0.25
# HELP holo_gateway_line_polls_total Poll requests sent to the boards.
# TYPE holo_gateway_line_polls_total counter
holo_gateway_line_polls_total{line="line0"} 7
# HELP holo_gateway_line_receive_bytes_total Bytes the gateway received on the line.
# TYPE holo_gateway_line_receive_bytes_total counter
holo_gateway_line_receive_bytes_total{line="line0"} 2000
# HELP holo_gateway_line_receive_frames_total Native frames the gateway received.
# TYPE holo_gateway_line_receive_frames_total counter
holo_gateway_line_receive_frames_total{line="line0"} 9
# HELP holo_gateway_line_receive_json_lines_total JSON lines the gateway received.
# TYPE holo_gateway_line_receive_json_lines_total counter
holo_gateway_line_receive_json_lines_total{line="line0"} 2
# HELP holo_gateway_line_retries_total Requests sent again after a timeout or a bad reply.
# TYPE holo_gateway_line_retries_total counter
holo_gateway_line_retries_total{line="line0"} 6
# HELP holo_gateway_line_timeouts_total Requests no reply came for in time.
# TYPE holo_gateway_line_timeouts_total counter
holo_gateway_line_timeouts_total{line="line0"} 5
# HELP holo_gateway_line_transmit_bytes_total Bytes the gateway sent on the line.
# TYPE holo_gateway_line_transmit_bytes_total counter
holo_gateway_line_transmit_bytes_total{line="line0"} 1000
# HELP holo_gateway_line_transmit_frames_total Native frames the gateway sent.
# TYPE holo_gateway_line_transmit_frames_total counter
holo_gateway_line_transmit_frames_total{line="line0"} 10
# HELP holo_gateway_line_transmit_json_lines_total JSON lines the gateway sent.
# TYPE holo_gateway_line_transmit_json_lines_total counter
holo_gateway_line_transmit_json_lines_total{line="line0"} 3
`
	compare(t, NewLines(src), want)
}

func TestCommands(t *testing.T) {
	c := newCommands()
	c.Observe(fleet.Observation{Transport: fleet.ViaRS485, Kind: "GET /link", Duration: 30 * time.Millisecond})
	c.Observe(fleet.Observation{Transport: fleet.ViaRS485, Kind: "GET /link", Duration: 2 * time.Second, Err: fleet.ErrNoReply})
	c.Observe(fleet.Observation{Transport: fleet.ViaGroup, Kind: fleet.ActionLEDs, Duration: 800 * time.Microsecond})
	const want = `
# HELP holo_gateway_command_duration_seconds Time the gateway took to run a command on boards, by transport and kind.
# TYPE holo_gateway_command_duration_seconds histogram
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.001"} 0
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.0025"} 0
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.005"} 0
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.01"} 0
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.025"} 0
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.05"} 1
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.1"} 1
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.25"} 1
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="0.5"} 1
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="1"} 1
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="2.5"} 2
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="5"} 2
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="10"} 2
holo_gateway_command_duration_seconds_bucket{kind="GET /link",transport="rs485",le="+Inf"} 2
holo_gateway_command_duration_seconds_sum{kind="GET /link",transport="rs485"} 2.03
holo_gateway_command_duration_seconds_count{kind="GET /link",transport="rs485"} 2
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.001"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.0025"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.005"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.01"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.025"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.05"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.1"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.25"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="0.5"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="1"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="2.5"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="5"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="10"} 1
holo_gateway_command_duration_seconds_bucket{kind="leds",transport="group",le="+Inf"} 1
holo_gateway_command_duration_seconds_sum{kind="leds",transport="group"} 0.0008
holo_gateway_command_duration_seconds_count{kind="leds",transport="group"} 1
# HELP holo_gateway_command_failures_total Commands that failed before a board answered (no reply, unreachable, bad reply), by transport and kind.
# TYPE holo_gateway_command_failures_total counter
holo_gateway_command_failures_total{kind="GET /link",transport="rs485"} 1
`
	compare(t, c, want)
}

// TestCommandsExistAtZero: a new Commands exports, before any command,
// the latency and failures of every action kind on every transport and of
// the gateway's own calls, at zero; observing adds to those series.
func TestCommandsExistAtZero(t *testing.T) {
	c := NewCommands()
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, c); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, tk := range InitialCommands() {
		fmt.Fprintf(&b, "holo_gateway_command_failures_total{kind=%q,transport=%q} 0\n", tk[1], tk[0])
	}
	want := "# HELP holo_gateway_command_failures_total Commands that failed before a board answered (no reply, unreachable, bad reply), by transport and kind.\n" +
		"# TYPE holo_gateway_command_failures_total counter\n" + b.String()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "holo_gateway_command_failures_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "holo_gateway_command_duration_seconds"); n != len(InitialCommands()) {
		t.Errorf("%d latency series, want %d", n, len(InitialCommands()))
	}
	for _, tr := range []string{fleet.ViaRS485, fleet.ViaLAN, fleet.ViaGroup} {
		if got := testutil.ToFloat64(c.failures.WithLabelValues(tr, fleet.ActionSceneApply)); got != 0 {
			t.Errorf("%s scene_apply failures %v", tr, got)
		}
	}
	c.Observe(fleet.Observation{Transport: fleet.ViaLAN, Kind: fleet.ActionHolo, Duration: time.Millisecond, Err: fleet.ErrNoReply})
	if got := testutil.ToFloat64(c.failures.WithLabelValues(fleet.ViaLAN, fleet.ActionHolo)); got != 1 {
		t.Errorf("after a failure: %v", got)
	}
	if n := testutil.CollectAndCount(c, "holo_gateway_command_failures_total"); n != len(InitialCommands()) {
		t.Errorf("a failure of a known pair made a new series: %d", n)
	}
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, NewBuildInfo("1.2.3")); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "holo_gateway_build_info" {
		t.Fatalf("%v %v", mfs, err)
	}
	labels := map[string]string{}
	for _, l := range mfs[0].Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "1.2.3" || !strings.HasPrefix(labels["goversion"], "go") {
		t.Errorf("labels %v", labels)
	}
}

func TestRegisterClash(t *testing.T) {
	reg := prometheus.NewRegistry()
	err := Register(reg, NewCommands(), NewCommands())
	if !errors.Is(err, ErrRegister) {
		t.Errorf("got %v, want ErrRegister", err)
	}
}

func linkReply(rx, overruns uint64) fleet.Reply {
	body, _ := json.Marshal(map[string]any{"protocol": 1, "transport": "rs485",
		"counters": map[string]uint64{"rx_bytes": rx, "tx_bytes": 2 * rx, "overruns": overruns, "bad_crc": 1}})
	return fleet.Reply{Status: http.StatusOK, Body: body}
}

func TestBoards(t *testing.T) {
	src := testFleet()
	clk := clock.NewFake(t0)
	src.replies["b1 /link"] = linkReply(100, 2)
	src.replies["b1 /info"] = fleet.Reply{Status: 200, Body: []byte(`{"uptime_s":50,"heap_free":70000,"sta":{"connected":false,"rssi":-99}}`)}
	src.replies["b2 /link"] = fleet.Reply{Status: 404, Body: []byte(`{"error":"not_found"}`)}
	src.replies["b2 /info"] = fleet.Reply{Status: 200, Body: []byte(`{"uptime_s":10,"heap_free":1,"sta":{"connected":true,"rssi":-61}}`)}
	b := NewBoards(src, BoardsOptions{Clock: clk, PollEvery: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("no poll ticker")
	}
	// b2 sends system events: its figures come from them, and its link
	// (none: 404) is asked once.
	clk.Advance(50 * time.Second)
	src.watch <- fleet.Event{Board: "b2", Type: fleet.EventState, Kind: "system", Time: clk.Now(),
		Data: json.RawMessage(`{"uptime_s":30,"heap_free":81920,"rssi":-58}`)}
	eventually(t, "b2's system event taken", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.boards["b2"] != nil && b.boards["b2"].hasSystem
	})
	// The first round: b1 (no events) is read by GET /link and /info.
	clk.Advance(10 * time.Second)
	waitCalls(t, src, []string{"b1 GET /link", "b1 GET /info", "b2 GET /link"})
	// A reply is taken in (stamped with the clock) after its call
	// returns: the clock moves on only once it is.
	sampledNow(t, b, clk, "b1")

	// A round later b2's event is old: its GET /info is read, its link is not.
	clk.Advance(time.Minute)
	waitCalls(t, src, []string{"b1 GET /link", "b1 GET /info", "b2 GET /info"})
	sampledNow(t, b, clk, "b1", "b2")

	// The board's view of b1 after 10 s more, b2's from /info a minute
	// plus 10 s after its event came.
	clk.Advance(10 * time.Second)
	const want = `
# HELP holo_gateway_board_heap_free_bytes Free memory of the board, from its last system report.
# TYPE holo_gateway_board_heap_free_bytes gauge
holo_gateway_board_heap_free_bytes{board="b1"} 70000
holo_gateway_board_heap_free_bytes{board="b2"} 1
# HELP holo_gateway_board_link_overruns_total Times the board's receive buffer overflowed (the board's count since it started).
# TYPE holo_gateway_board_link_overruns_total counter
holo_gateway_board_link_overruns_total{board="b1"} 2
# HELP holo_gateway_board_link_receive_bytes_total Bytes the board received on its host link (the board's count since it started).
# TYPE holo_gateway_board_link_receive_bytes_total counter
holo_gateway_board_link_receive_bytes_total{board="b1"} 100
# HELP holo_gateway_board_uptime_seconds Time since the board started, from its last system report.
# TYPE holo_gateway_board_uptime_seconds gauge
holo_gateway_board_uptime_seconds{board="b1"} 60
holo_gateway_board_uptime_seconds{board="b2"} 20
# HELP holo_gateway_board_wifi_rssi_dbm Signal strength of the board's Wi-Fi station link, in dBm, while connected.
# TYPE holo_gateway_board_wifi_rssi_dbm gauge
holo_gateway_board_wifi_rssi_dbm{board="b2"} -61
`
	compareSoon(t, b, want, "holo_gateway_board_heap_free_bytes", "holo_gateway_board_link_overruns_total",
		"holo_gateway_board_link_receive_bytes_total", "holo_gateway_board_uptime_seconds", "holo_gateway_board_wifi_rssi_dbm")

	// A link state event (the fleet reads /link after a restart) updates
	// the counters; a restart forgets the old boot's figures and reads the
	// board at once; offline boards show no health figures.
	src.watch <- fleet.Event{Board: "b1", Type: fleet.EventState, Kind: "link", Data: linkReply(500, 3).Body}
	src.watch <- fleet.Event{Board: "b2", Type: fleet.EventRestarted}
	waitCalls(t, src, []string{"b2 GET /link", "b2 GET /info"})
	src.mu.Lock()
	src.views[0].Online = false
	src.mu.Unlock()
	const after = `
# HELP holo_gateway_board_link_overruns_total Times the board's receive buffer overflowed (the board's count since it started).
# TYPE holo_gateway_board_link_overruns_total counter
holo_gateway_board_link_overruns_total{board="b1"} 3
# HELP holo_gateway_board_uptime_seconds Time since the board started, from its last system report.
# TYPE holo_gateway_board_uptime_seconds gauge
holo_gateway_board_uptime_seconds{board="b2"} 10
`
	compareSoon(t, b, after, "holo_gateway_board_link_overruns_total", "holo_gateway_board_uptime_seconds")
}

// sampledNow waits until b took in the system figures of boards at the
// clock's time.
func sampledNow(t *testing.T, b *Boards, clk *clock.Fake, boards ...string) {
	t.Helper()
	now := clk.Now()
	eventually(t, fmt.Sprintf("the figures of %v taken at %v", boards, now), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, id := range boards {
			if bs := b.boards[id]; bs == nil || !bs.sampled.Equal(now) {
				return false
			}
		}
		return true
	})
}

// waitCalls waits until src got exactly want (in order), then takes them.
func waitCalls(t *testing.T, src *fakeFleet, want []string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		src.mu.Lock()
		n := len(src.calls)
		src.mu.Unlock()
		if n >= len(want) {
			break
		}
	}
	got = src.takeCalls()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls\n got %q\nwant %q", got, want)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for ; !cond(); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestFires: a fire of three boards (one early, one 300 µs late on the
// line, one 4 ms late fired by the gateway) and a fire of one board.
func TestFires(t *testing.T) {
	f := NewFires()
	at := time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
	f.Observe(fleet.FireReport{Kind: fleet.ActionLEDs, At: at, Changes: []fleet.FireChange{
		{Board: "a", How: fleet.FireLine, At: at.Add(300 * time.Microsecond)},
		{Board: "b", How: fleet.FireBoard, At: at.Add(-200 * time.Microsecond)},
		{Board: "c", How: fleet.FireGateway, At: at.Add(4 * time.Millisecond)},
	}})
	f.Observe(fleet.FireReport{Kind: fleet.ActionLEDs, At: at, Changes: []fleet.FireChange{{Board: "a", How: fleet.FireLine, At: at}}})
	if n := testutil.CollectAndCount(f, "holo_gateway_fire_skew_seconds"); n != 1 {
		t.Fatalf("%d skew series", n)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, f); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP holo_gateway_fire_early_total Boards of timed fires that changed before the moment asked, by how they were fired.
# TYPE holo_gateway_fire_early_total counter
holo_gateway_fire_early_total{how="board"} 1
holo_gateway_fire_early_total{how="gateway"} 0
holo_gateway_fire_early_total{how="line"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "holo_gateway_fire_early_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "holo_gateway_fire_skew_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-0.0042) > 1e-9 {
				t.Errorf("skew: %d samples, sum %v; want 1, 0.0042", h.GetSampleCount(), h.GetSampleSum())
			}
		case "holo_gateway_fire_lateness_seconds":
			sums := map[string]float64{}
			counts := map[string]uint64{}
			for _, m := range mf.GetMetric() {
				how := m.GetLabel()[0].GetValue()
				sums[how], counts[how] = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
			}
			if counts["line"] != 2 || counts["board"] != 1 || counts["gateway"] != 1 ||
				math.Abs(sums["line"]-0.0003) > 1e-9 || sums["board"] != 0 || math.Abs(sums["gateway"]-0.004) > 1e-9 {
				t.Errorf("lateness: counts %v sums %v", counts, sums)
			}
		}
	}
}
