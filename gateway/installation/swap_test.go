package installation_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/rs485"
	"github.com/holofleet/holofleet/store"
)

// swapDesc gives the board at line0 address 1 two scenes and settings;
// nothing in it needs files, so a board on the line alone takes it all.
const swapDesc = `
version: 1
heal: true
profiles:
  p:
    scenes:
      blue: {slot: 3, leds: {mode: solid, colour: blue}}
      red: {slot: 4, leds: {mode: solid, colour: red}}
    settings:
      screen: {backlight: 55}
assignments:
  - {profile: p, line: line0, address: 1}
`

// TestLineBoardSwappedAtSameAddress: a board on an RS485 line only is
// swapped for a new one (another id, empty) at the same address, quicker
// than the master would call the old one lost. The master sees the new
// board, the fleet takes it for the board at that place, and the
// installation, whose revision says heal, sets it up without anyone
// asking and records that in the audit log. Before that, a board powered
// off is reported offline.
func TestLineBoardSwappedAtSameAddress(t *testing.T) {
	line, err := simline.New(simline.Config{Baud: 115200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: 2, BaseDir: t.TempDir(), Line: line,
		Groups: func(int) []int { return []int{1} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	master, err := line.Attach(simline.NodeOptions{Name: "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	boards := fm.Boards()
	rl := rs485.New(rs485.Options{Name: "line0", Port: master, Addresses: []int{boards[0].Address, boards[1].Address}})
	fl := fleet.New(fleet.Options{Drivers: []fleet.Driver{rl}})
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	contents, _ := installation.OpenContents(filepath.Join(t.TempDir(), "content"))
	aud := &memAudit{}
	in, err := installation.New(installation.Options{DB: db, Fleet: fl, Contents: contents, Tick: 20 * time.Millisecond,
		Audit: aud, CheckEvery: time.Hour, Settle: 50 * time.Millisecond, HealRetry: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fl.Run(ctx) })
	wg.Go(func() { in.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait(); db.Close() })
	old := boards[0]
	online := func(id string) bool {
		v, err := fl.Board(id)
		return err == nil && v.Online
	}
	waitFor(t, 30*time.Second, "the line boards online", func() bool { return online(old.ID) && online(boards[1].ID) })

	d, err := installation.Parse("swap.yaml", []byte(swapDesc))
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := in.Apply(ctx, d, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the run", func() bool {
		st, _ = in.RunStatus(st.ID)
		return st.Finished
	})
	if len(scenesOf(t, old.URL)) != 2 {
		t.Fatalf("the board at address 1 holds %d scenes after the apply, want 2", len(scenesOf(t, old.URL)))
	}

	// Powered off: reported offline (the master's polls go unanswered).
	if err := fm.PowerOff(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the powered-off board offline", func() bool { return !online(old.ID) })
	if err := fm.PowerOn(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the board back", func() bool { return online(old.ID) })
	back := time.Now()
	// The check its coming back asks for is done (else it could meet the
	// new board below under the old one's id, before the master has
	// noticed the swap).
	waitFor(t, 30*time.Second, "the board back checked in sync", func() bool {
		dr := in.Drifts()[old.ID]
		return dr.State == installation.StateInSync && dr.Checked.After(back)
	})

	// Swapped: off, and at once a new board (new id, nothing saved) on.
	if err := fm.PowerOff(0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(old.Dir); err != nil {
		t.Fatal(err)
	}
	if err := fm.PowerOn(0); err != nil {
		t.Fatal(err)
	}
	fresh := fm.Boards()[0]
	if fresh.ID == old.ID {
		t.Fatal("the new board has the old one's id")
	}
	waitFor(t, 30*time.Second, "the new board online at address 1", func() bool {
		v, err := fl.Board(fresh.ID)
		return err == nil && v.Online && v.Line == "line0" && v.Address == 1
	})
	t.Cleanup(func() {
		if t.Failed() {
			v, _ := fl.Board(fresh.ID)
			t.Logf("new board %+v drift %+v audit %+v", v, in.Drifts()[fresh.ID], aud.find("installation.heal"))
		}
	})
	waitFor(t, 30*time.Second, "the new board healed and the heal recorded", func() bool {
		for _, r := range aud.find("installation.heal") {
			if len(r.Boards) == 1 && r.Boards[0] == fresh.ID && r.Code == "OK" {
				return true
			}
		}
		return false
	})
	// Only the new board is healed. A heal of the old id that started
	// before the swap was seen may be recorded, refused by the fleet
	// ("another board answers at its place") with nothing written: on a
	// loaded machine that race is the scheduler's, the refusal is the
	// promise.
	for _, r := range aud.find("installation.heal") {
		if (len(r.Boards) != 1 || r.Boards[0] != fresh.ID) && r.Code == "OK" {
			t.Errorf("a heal applied to %v: only the new board needed one (%s)", r.Boards, r.Reason)
		}
	}
	names := map[string]bool{}
	for _, s := range scenesOf(t, fresh.URL) {
		names[s.Name] = true
	}
	if !names["blue"] || !names["red"] {
		t.Errorf("the new board's scenes %v, want blue and red", names)
	}
	var set struct{ Screen struct{ Backlight int } }
	get(t, fresh.URL, "/settings", &set)
	if set.Screen.Backlight != 55 {
		t.Errorf("the new board's backlight %d, want 55", set.Screen.Backlight)
	}
	if v, err := fl.Board(old.ID); err == nil && v.Online {
		t.Errorf("the old board is still online: %+v", v)
	}
	waitFor(t, 30*time.Second, "the new board checked in sync after its heal", func() bool {
		return in.Drifts()[fresh.ID].State == installation.StateInSync
	})
}
