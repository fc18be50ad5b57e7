package rs485

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
)

// TestHoloBoardProcess puts a real holo-board process on the simulated
// line through a hub, next to an in-process board, and drives both.
func TestHoloBoardProcess(t *testing.T) {
	// Not parallel: the process's start (bootloader, firmware install,
	// a race-built binary) is the heaviest thing in the package, and the
	// line tests beside it run on the real clock.
	if testing.Short() {
		t.Skip("builds and runs holo-board")
	}
	line := newLine(t, simline.Faults{})
	sockDir, err := os.MkdirTemp("", "rs485hub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "hub.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hubDone := make(chan error, 1)
	go func() { hubDone <- simline.ServeHub(ctx, line, ln) }()
	t.Cleanup(func() { cancel(); <-hubDone })

	dir := t.TempDir()
	presetLink(t, dir, 12, []int{3})
	proc := boardtest.Start(t, dir, "--uart", "simline://"+sock)
	startBoard(t, line, 13, []int{3})
	l, sink := startMaster(t, line, Options{Addresses: []int{11, 12, 13}})
	sink.Wait(t, 30*time.Second, "both boards with states", func(s *recSink) bool {
		return s.States["12"]["leds"] != nil && s.States["13"]["leds"] != nil && s.States["12"]["link"] != nil
	})
	rep, err := l.Call(context.Background(), "12", "GET", "/info", nil)
	if err != nil || rep.Status != 200 || field(rep.Body, "api") != "1" {
		t.Fatalf("GET /info of the process: %+v %v", rep, err)
	}
	if err := l.Group(context.Background(), 3, &frame.LEDsRequest{Mode: frame.LEDFlicker, R: 255, Flags: frame.LEDNewColour}); err != nil {
		t.Fatal(err)
	}
	sink.Wait(t, 10*time.Second, "both flicker", func(s *recSink) bool {
		return field(s.States["12"]["leds"], "mode") == "flicker" && field(s.States["13"]["leds"], "mode") == "flicker"
	})
	// A change made over HTTP shows at the next poll (status block).
	if r := proc.Do("PATCH", "/leds", map[string]any{"mode": "rainbow"}); r.Status != 200 {
		t.Fatalf("PATCH over HTTP: %d", r.Status)
	}
	sink.Wait(t, 10*time.Second, "rainbow seen by polling", func(s *recSink) bool {
		return field(s.States["12"]["leds"], "mode") == "rainbow"
	})
	// Happenings of the process arrive: a touch cannot be made over HTTP,
	// a clip can; a colour shown replaces nothing, so use a scene-less
	// route that emits: showing an image is not a happening either, so
	// restart the board and expect Restarted.
	waitUptime(t, l, "12") // so that the restart shows
	if r := proc.Do("POST", "/restart", map[string]any{"delay_ms": 200}); r.Status != 202 {
		t.Fatalf("restart: %d", r.Status)
	}
	sink.Wait(t, 30*time.Second, "restart noticed", func(s *recSink) bool { return s.RestartedN["12"] == 1 && s.SeenN["12"] >= 2 })
}
