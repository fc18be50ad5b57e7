package fleet_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
)

// waitFor polls cond until it holds or the time is up.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEvent reads w until an event passes match.
func waitEvent(t *testing.T, w *fleet.Watcher, d time.Duration, what string, match func(fleet.Event) bool) fleet.Event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-w.C:
			if !ok {
				t.Fatalf("watch closed waiting for %s (dropped %d)", what, w.Dropped())
			}
			t.Logf("event %d %s %s %s %d %s", ev.N, ev.Board, ev.Type, ev.Kind, ev.Seq, ev.Reason)
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRealLine runs fleet-mode boards on a simulated line under the real
// RS485 master and the fleet core: discovery, groups, a group scene fire
// reaching every member as happenings, a restart and an unplugged board.
func TestRealLine(t *testing.T) { testReal(t, false) }

// TestRealLineAndLAN is the same with every board also on the LAN: each
// is one board with two transports, and each happening reaches the stream
// once.
func TestRealLineAndLAN(t *testing.T) { testReal(t, true) }

func testReal(t *testing.T, withLAN bool) {
	if testing.Short() {
		t.Skip("integration")
	}
	const n = 4
	line, err := simline.New(simline.Config{Baud: 115200})
	if err != nil {
		t.Fatal(err)
	}
	defer line.Close()
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: n, BaseDir: t.TempDir(), Line: line,
		Groups: func(i int) []int { return []int{i%2 + 1} }})
	if err != nil {
		t.Fatal(err)
	}
	defer fm.Stop()
	master, err := line.Attach(simline.NodeOptions{Name: "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	rl := rs485.New(rs485.Options{Name: "line0", Port: master, Addresses: []int{1, 2, 3, 4, 5, 6}})
	drivers := []fleet.Driver{rl}
	wantTransports := []string{"rs485:line0"}
	if withLAN {
		ld := lan.New(lan.Options{})
		for _, in := range fm.Boards() {
			if err := ld.Add(in.URL, ""); err != nil {
				t.Fatal(err)
			}
		}
		drivers = append(drivers, ld)
		wantTransports = []string{"lan", "rs485:line0"}
	}
	f := fleet.New(fleet.Options{Drivers: drivers})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	w := f.Watch(ctx, fleet.Filter{}, 0)

	// Discovery: every board by its identity, address and groups.
	infos := fm.Boards()
	waitFor(t, 20*time.Second, "discovery", func() bool {
		for _, in := range infos {
			v, err := f.Board(in.ID)
			if err != nil || !v.Online || v.Address != in.Address || v.Line != "line0" || !slices.Equal(v.Groups, in.Groups) ||
				!slices.Equal(v.Transports, wantTransports) || withLAN && v.URL != in.URL {
				return false
			}
		}
		return true
	})

	// Save scene slot 1 on every board (a JSON line each), then fire it on
	// group 1 with one frame.
	for _, in := range infos {
		rep, err := f.Call(ctx, in.ID, http.MethodPut, "/scenes/scene?name=glow",
			[]byte(`{"leds":{"mode":"solid","colour":"#00ff00"},"slot":1}`))
		if err != nil || rep.Status >= 300 {
			t.Fatalf("save scene on %s: %v %d %s", in.ID, err, rep.Status, rep.Body)
		}
	}
	framesBefore := line.Stats().Frames
	res, err := f.Do(ctx, fleet.Selector{Groups: []int{1}}, fleet.Action{Kind: fleet.ActionSceneApply, Body: []byte(`{"slot":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != n/2 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Via != fleet.ViaGroup || r.Error != "" {
			t.Errorf("result %+v", r)
		}
	}
	if line.Stats().Frames < framesBefore+1 {
		t.Error("no frame went out")
	}
	started := map[string]int{}
	for len(started) < n/2 {
		ev := waitEvent(t, w, 15*time.Second, "scene_started on group 1", func(ev fleet.Event) bool {
			return ev.Type == fleet.EventHappening && ev.Kind == "scene_started"
		})
		started[ev.Board]++
	}
	for _, in := range infos {
		if (started[in.ID] == 1) != slices.Contains(in.Groups, 1) {
			t.Errorf("board %d (groups %v): scene_started %v", in.Address, in.Groups, started[in.ID])
		}
	}

	// A board restarts in place: the stream says so. (The master sees a
	// restart as its uptime, in whole seconds, going back: let it run a
	// few seconds first.)
	b1, err := fm.Board(1)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "uptime", func() bool { return b1.Current().Uptime() > 4*time.Second })
	if err := fm.Restart(1); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, w, 20*time.Second, "restart of board 2", func(ev fleet.Event) bool {
		return ev.Type == fleet.EventRestarted && ev.Board == infos[1].ID
	})

	// A board unplugged goes offline with a reason, and comes back.
	if err := fm.PowerOff(2); err != nil {
		t.Fatal(err)
	}
	off := waitEvent(t, w, 20*time.Second, "board 3 offline", func(ev fleet.Event) bool {
		return ev.Type == fleet.EventOffline && ev.Board == infos[2].ID
	})
	if off.Reason == "" {
		t.Error("offline without a reason")
	}
	if _, err := f.Call(ctx, infos[2].ID, http.MethodGet, "/leds", nil); err == nil {
		t.Error("call to an unplugged board succeeded")
	}
	if err := fm.PowerOn(2); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, w, 30*time.Second, "board 3 online", func(ev fleet.Event) bool {
		return ev.Type == fleet.EventOnline && ev.Board == infos[2].ID
	})
	for _, ev := range drainAll(w) { // nothing twice, whichever way it came
		if ev.Type == fleet.EventHappening && ev.Kind == "scene_started" {
			t.Errorf("scene_started again: %+v", ev)
		}
	}
	st := f.Stats()
	if len(f.Boards(fleet.Filter{})) != n || st.Boards != n || st.Online != n || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("events %d, duplicates %d, line %+v", st.Events, st.Duplicates, st.Lines["rs485:line0"])
}

// drainAll returns what waits in w.C now.
func drainAll(w *fleet.Watcher) []fleet.Event {
	var out []fleet.Event
	for {
		select {
		case ev, ok := <-w.C:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}
