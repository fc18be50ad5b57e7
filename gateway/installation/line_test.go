package installation_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
	"github.com/holofleet/holofleet/store"
)

const lineDesc = `
version: 1
content:
  logo: {file: $MEDIA/image-240.png}
profiles:
  p:
    files: {/images/logo.png: logo}
    scenes:
      logo: {slot: 2, screen: {path: /images/logo.png}}
      blue: {slot: 3, leds: {mode: solid, colour: blue}}
    settings:
      boot_scene: logo
      screen: {backlight: 55}
assignments:
  - {profile: p, group: 1}
`

// TestLineOnlyBoard: a board the gateway reaches only over an RS485 line
// takes its scenes and settings over JSON lines; the scene naming a file
// it lacks waits, and so does the boot scene, and the board is reported
// needing the LAN. Once the file is there (put by hand over the board's
// own HTTP, which the gateway does not use), the next apply finishes it.
// A board on the line and the LAN beside it takes everything.
func TestLineOnlyBoard(t *testing.T) {
	needMedia(t)
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
	lineOnly, both := boards[0], boards[1]
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ClockEvery: -1})
	if err := ld.Add(both.URL, ""); err != nil {
		t.Fatal(err)
	}
	rl := rs485.New(rs485.Options{Name: "line0", Port: master, Addresses: []int{lineOnly.Address, both.Address}})
	fl := fleet.New(fleet.Options{Drivers: []fleet.Driver{rl, ld}})
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	contents, _ := installation.OpenContents(filepath.Join(t.TempDir(), "content"))
	in, err := installation.New(installation.Options{DB: db, Fleet: fl, Contents: contents, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fl.Run(ctx) })
	wg.Go(func() { in.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait(); db.Close() })
	waitFor(t, 30*time.Second, "boards online on their transports", func() bool {
		a, errA := fl.Board(lineOnly.ID)
		b, errB := fl.Board(both.ID)
		return errA == nil && errB == nil && a.Online && len(b.Transports) == 2 && len(a.Groups) == 1 && len(b.Groups) == 1
	})

	d, err := installation.Parse("line.yaml", []byte(strings.ReplaceAll(lineDesc, "$MEDIA", media)))
	if err != nil {
		t.Fatal(err)
	}
	if err := contents.Load(d, ""); err != nil {
		t.Fatal(err)
	}
	apply := func() (installation.RunStatus, map[string]installation.RunBoard) {
		t.Helper()
		_, st, err := in.Apply(ctx, d, "test", "")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the run", func() bool {
			st, _ = in.RunStatus(st.ID)
			return st.Finished
		})
		bs, _ := in.RunBoards(st.ID)
		out := map[string]installation.RunBoard{}
		for _, b := range bs {
			out[b.Board] = b
		}
		return st, out
	}
	_, bs := apply()
	if b := bs[both.ID]; b.Phase != installation.PhaseInSync {
		t.Errorf("board on both: %+v", b)
	}
	b := bs[lineOnly.ID]
	if b.Phase != installation.PhaseNeedsLAN || !strings.Contains(b.Error, "files need the LAN") {
		t.Fatalf("line-only board: %+v", b)
	}
	names := map[string]bool{}
	for _, s := range scenesOf(t, lineOnly.URL) {
		names[s.Name] = true
	}
	if !names["blue"] || names["logo"] {
		t.Errorf("line-only board's scenes %v: want blue saved and logo waiting for its file", names)
	}
	var set struct {
		BootScene *string `json:"boot_scene"`
		Screen    struct{ Backlight int }
	}
	get(t, lineOnly.URL, "/settings", &set)
	if set.BootScene != nil || set.Screen.Backlight != 55 {
		t.Errorf("line-only settings: boot %v backlight %d; want no boot scene yet and 55", set.BootScene, set.Screen.Backlight)
	}
	checkNoDanglingScene(t, lineOnly.URL)

	// Someone carries the file to the board; the next apply finishes it.
	img, _ := os.ReadFile(filepath.Join(media, "image-240.png"))
	req, _ := http.NewRequest(http.MethodPut, lineOnly.URL+"/api/v1/fs/file?parents=true&path=/images/logo.png", bytes.NewReader(img))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("putting the file by hand: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	_, bs = apply()
	if b := bs[lineOnly.ID]; b.Phase != installation.PhaseInSync {
		t.Fatalf("line-only board after the file came: %+v", b)
	}
	get(t, lineOnly.URL, "/settings", &set)
	if set.BootScene == nil || *set.BootScene != "logo" {
		t.Errorf("boot scene %v, want logo", set.BootScene)
	}
	checkNoDanglingScene(t, lineOnly.URL)
}
