package lan

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
	"github.com/holofleet/holofleet/gateway/nettest"
)

// testBoard is an in-process board serving HTTP on a fixed address.
type testBoard = boardtest.InProc

// startBoard runs a board from dir (a new one when empty) on addr
// ("127.0.0.1:0" for any port).
func startBoard(t testing.TB, dir, addr string) *testBoard {
	t.Helper()
	return boardtest.StartInProcess(t, boardtest.InProcOptions{Dir: dir, Addr: addr})
}

// newProxy puts a TCP proxy in front of a board (cut and restore it to
// take the board's network away and back).
func newProxy(t testing.TB, target string) *nettest.Proxy { return nettest.NewProxy(t, target) }

// recSink records what a driver reports.
type recSink = fleettest.Sink

func newRecSink() *recSink { return fleettest.NewSink() }

// field reads a top-level field of a JSON object as text.
var field = fleettest.Field

// startLAN runs a driver until the test ends.
func startLAN(t testing.TB, o Options) (*LAN, *recSink) {
	t.Helper()
	if o.MinBackoff == 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 200 * time.Millisecond
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

// waitUptime waits until the board at url has been up a whole second: a
// restart shows as its uptime (whole seconds) going back.
func waitUptime(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		var info struct {
			Uptime float64 `json:"uptime_s"`
		}
		if resp, err := http.Get(url + "/api/v1/info"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if err == nil && info.Uptime >= 1 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not up a second after 20 s", url)
		}
	}
}
