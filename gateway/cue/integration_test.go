package cue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
	"github.com/holofleet/holofleet/store"
)

// showRig is a real fleet: 4 boards on a simulated RS485 line (and the
// LAN), groups 1 and 2, and 4 boards on the LAN only, labelled zone=a
// and zone=b (a board has link groups on a line only).
type showRig struct {
	fleet *fleet.Fleet
	db    *store.DB
	ids   []string
}

func startShowRig(t *testing.T) *showRig {
	t.Helper()
	line, err := simline.New(simline.Config{Baud: 115200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	onLine, err := fleetmode.Start(context.Background(), fleetmode.Options{N: 4, BaseDir: t.TempDir(), Line: line,
		Groups: func(i int) []int { return []int{i%2 + 1} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onLine.Stop() })
	lanOnly, err := fleetmode.Start(context.Background(), fleetmode.Options{N: 4, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lanOnly.Stop() })
	master, err := line.Attach(simline.NodeOptions{Name: "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	ld := lan.New(lan.Options{})
	r := &showRig{}
	for _, fm := range []*fleetmode.Fleet{onLine, lanOnly} {
		for _, in := range fm.Boards() {
			if err := ld.Add(in.URL, ""); err != nil {
				t.Fatal(err)
			}
			r.ids = append(r.ids, in.ID)
		}
	}
	r.fleet = fleet.New(fleet.Options{Drivers: []fleet.Driver{
		rs485.New(rs485.Options{Name: "line0", Port: master, Addresses: []int{1, 2, 3, 4}}), ld}})
	if r.db, err = store.Open(filepath.Join(t.TempDir(), "gw.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.fleet.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	t.Cleanup(func() {
		if t.Failed() {
			for _, b := range r.fleet.Boards(fleet.Filter{}) {
				t.Logf("%s online %v groups %v transports %v", b.ID, b.Online, b.Groups, b.Transports)
			}
		}
	})
	waitFor(t, 60*time.Second, "8 boards online, those on the line with their groups", func() bool {
		online, lined := 0, 0
		for _, b := range r.fleet.Boards(fleet.Filter{}) {
			if b.Online {
				online++
			}
			if b.Online && b.Line != "" && len(b.Groups) == 1 && len(b.Transports) == 2 {
				lined++
			}
		}
		return online == 8 && lined == 4
	})
	for i, in := range lanOnly.Boards() {
		if _, err := r.fleet.SetLabels(in.ID, map[string]string{"zone": string(rune('a' + i%2))}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// colour is a board's LED colour as it reports it.
func (r *showRig) colour(t *testing.T, id string) string {
	rep, err := r.fleet.Call(context.Background(), id, "GET", "/leds", nil)
	if err != nil {
		return ""
	}
	var st struct {
		Colour string `json:"colour"`
	}
	_ = json.Unmarshal(rep.Body, &st)
	return st.Colour
}

// TestShowOnRealBoards runs ten cues with pre-waits and follows across
// groups on a line and on the LAN, on the real clock: three GOs fire the
// ten cues in order, every board ends in the colour of the last cue that
// addressed its group, and every fire reached every board it named.
func TestShowOnRealBoards(t *testing.T) {
	if testing.Short() {
		t.Skip("real boards")
	}
	r := startShowRig(t)
	eng, err := cue.New(cue.Options{DB: r.db, Fleet: r.fleet})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	colours := []string{"#ff0000", "#00ff00", "#0000ff", "#ffff00", "#ff00ff", "#00ffff", "#800000", "#008000", "#000080", "#808000"}
	// Cue i addresses, by i%4, group 1 or 2 (on the line) or the LAN
	// boards labelled zone=a or zone=b; cue 10 every board. GO 1 runs 1-4 (continue, after 100 ms, after
	// a pre-wait), GO 2 runs 5-8, GO 3 runs 9-10.
	var cues []cue.Cue
	for i := range 10 {
		sel := fleet.Selector{Groups: []int{i%4 + 1}}
		if i%4 >= 2 {
			sel = fleet.Selector{Labels: map[string]string{"zone": string(rune('a' + i%2))}}
		}
		if i == 9 {
			sel = fleet.Selector{All: true}
		}
		c := cue.Cue{Number: cue.Number(fmt.Sprint(i + 1)), Name: fmt.Sprint("cue ", i+1),
			Actions: []cue.Action{{Kind: "leds", Selector: sel, Body: json.RawMessage(`{"mode":"solid","loop":true,"colour":"` + colours[i] + `"}`)}}}
		switch i % 4 {
		case 0:
			c.Follow = cue.FollowContinue
		case 1:
			c.Follow, c.FollowMS = cue.FollowAfter, 100
		case 2:
			c.PreWaitMS, c.Follow = 150, cue.FollowContinue
		}
		if i == 8 {
			c.Follow, c.FollowMS = cue.FollowAfter, 200
		}
		cues = append(cues, c)
	}
	if _, err := eng.Put(cue.List{Name: "ten", Cues: cues}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := eng.Watch(ctx)
	// at is each cue's moment as its GO scheduled it (the state a GO
	// returns lists the chain it started); fired the cues whose fired
	// event came.
	at, fired := map[string]time.Time{}, map[string]bool{}
	for _, wantStandby := range []cue.Number{"5", "9", ""} {
		st, err := eng.Go("ten", false)
		if err != nil {
			t.Fatal(err)
		}
		if st.Standby != wantStandby {
			t.Fatalf("standby after GO: %q, want %q", st.Standby, wantStandby)
		}
		for _, r := range st.Running {
			at[string(r.Cue)] = r.FiresAt
		}
		// The GO's chain has fired when nothing runs any more. Fires run
		// side by side and may end out of order (one fleet call slow
		// under load): an event's last fired cue is the one of the
		// latest moment fired so far, which is the event's own cue or
		// one of a later moment, and fired for the moment its GO set.
		for {
			ev := <-events
			if ev.Type != cue.EventFired {
				continue
			}
			l := ev.State.Last
			if l == nil {
				t.Fatalf("cue %s fired: no last fired cue in %+v", ev.Cue, ev.State)
			}
			fired[string(ev.Cue)] = true
			own, ok := at[string(ev.Cue)]
			switch {
			case !ok:
				t.Fatalf("cue %s fired, not in the chains the GOs started: %v", ev.Cue, at)
			case l.Cue == ev.Cue && !l.At.Equal(own):
				t.Fatalf("cue %s fired for %v, its GO set %v", ev.Cue, l.At, own)
			case l.Cue != ev.Cue && (l.At.Before(own) || !l.At.Equal(at[string(l.Cue)])):
				t.Fatalf("cue %s (moment %v) fired; the last fired is cue %s for %v (its GO set %v)", ev.Cue, own, l.Cue, l.At, at[string(l.Cue)])
			}
			if l.Failed != 0 || len(l.Errors) != 0 || l.Boards == 0 {
				t.Fatalf("cue %s: %+v", l.Cue, l)
			}
			if len(ev.State.Running) == 0 {
				break
			}
		}
	}
	// Each cue fired for the moment its chain says, to the nanosecond:
	// moments chain from moments. (Cues of one moment complete in any
	// order.)
	ms := time.Millisecond
	for _, gap := range []struct {
		from, to string
		d        time.Duration
	}{
		{"1", "2", 0}, {"2", "3", 100*ms + 150*ms}, {"3", "4", 0},
		{"5", "6", 0}, {"6", "7", 100*ms + 150*ms}, {"7", "8", 0},
		{"9", "10", 200 * ms},
	} {
		if at[gap.from].IsZero() || at[gap.to].Sub(at[gap.from]) != gap.d {
			t.Errorf("cue %s at %v, cue %s at %v: want %v apart", gap.from, at[gap.from], gap.to, at[gap.to], gap.d)
		}
	}
	if len(at) != 10 || len(fired) != 10 {
		t.Fatalf("%d cues scheduled, %d fired: %v", len(at), len(fired), fired)
	}
	// Cue 10 addressed every group last.
	for _, id := range r.ids {
		deadline := time.Now().Add(20 * time.Second)
		for c := r.colour(t, id); c != colours[9]; c = r.colour(t, id) {
			if time.Now().After(deadline) {
				v, _ := r.fleet.Board(id)
				t.Fatalf("%s (%v) is %s, not in cue 10's colour %s", id, v.Transports, c, colours[9])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
