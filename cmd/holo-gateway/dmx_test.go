package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/dmx/artnet"
	"github.com/holofleet/holofleet/gateway/dmx/sacn"
	"github.com/holofleet/holofleet/gateway/nettest"
)

var (
	sacnLine   = regexp.MustCompile(`sacn:\s+udp (\S+)`)
	artnetLine = regexp.MustCompile(`artnet:\s+udp (\S+)`)
)

// demoBoards waits for n boards online and returns their ids by bus
// address.
func demoBoards(t *testing.T, base string, n int) map[int]string {
	t.Helper()
	ids := map[int]string{}
	waitOnline(t, base, n, func(boards []onlineBoard) bool {
		clear(ids)
		for _, b := range boards {
			ids[b.Address] = b.ID
		}
		for a := 1; a <= n; a++ {
			if ids[a] == "" {
				return false
			}
		}
		return true
	})
	return ids
}

// boardsUp bounds the wait for a demo's boards to come online: about a
// second on a quiet machine, but a demo boots its boards beside the other
// tests' demos, and beside make flaky's CPU hogs (load 30 to 50 on two
// cores) that took over 30 s. It only catches a demo that never brings
// them up.
const boardsUp = 2 * time.Minute

// onlineBoard is a board as GET /v1/boards lists it.
type onlineBoard struct {
	ID      string `json:"id"`
	Address int    `json:"address"`
	Groups  []int  `json:"groups"`
}

// waitOnline waits until the gateway at base lists n boards online and
// ok (when not nil) accepts them, and returns them.
func waitOnline(t *testing.T, base string, n int, ok func([]onlineBoard) bool) []onlineBoard {
	t.Helper()
	var boards []onlineBoard
	last, met := "", false
	defer func() {
		if !met {
			t.Logf("the last listing of the boards online: %s", last)
		}
	}()
	waitFor(t, fmt.Sprintf("%d boards online", n), boardsUp, func() bool {
		code, body := get(t, base+"/v1/boards?online=true", "")
		boards, last = nil, body
		return code == 200 && json.Unmarshal([]byte(body), &boards) == nil && len(boards) == n && (ok == nil || ok(boards))
	})
	met = true
	return boards
}

// desk sends to addr the packet that packet makes of a sequence number
// every 100 ms, as a lighting desk refreshes its universes, until stop is
// called or the test ends. A desk that sent once would be dropped after
// the source loss time (2.5 s for sACN), which a loaded machine may take
// between two steps of a test.
func desk(t *testing.T, addr string, packet func(seq uint8) []byte) (stop func()) {
	t.Helper()
	c := nettest.DialUDP(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for seq := uint8(1); ; seq++ {
			_, _ = c.Write(packet(seq))
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	})
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

// TestDMXDemo: the demo comes patched: sACN on universe 1 drives group
// 1's fixture, Art-Net Port-Address 1 (universe 2) drives board 1's; an
// ArtPoll finds the gateway; the patch view lists both sources.
func TestDMXDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	base, out := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "1", "--mqtt", noBroker)
	ms, ma := sacnLine.FindStringSubmatch(out.String()), artnetLine.FindStringSubmatch(out.String())
	if ms == nil || ma == nil || !strings.Contains(out.String(), "universe 1 address 1-11 holo -> group 1") ||
		!strings.Contains(out.String(), "universe 2 address 12-22 holo -> line demo address 2") {
		t.Fatalf("banner:\n%s", out.String())
	}
	ids := demoBoards(t, base, 2)

	slots := make([]byte, 512)
	copy(slots, []byte{255, 255, 0, 0, 0})
	desk(t, ms[1], func(seq uint8) []byte {
		pkt, _ := sacn.AppendData(nil, sacn.Data{CID: [16]byte{7}, SourceName: "test desk", Priority: 100, Sequence: seq, Universe: 1, Slots: slots})
		return pkt
	})
	for _, id := range ids {
		waitFor(t, id+" red", 10*time.Second, func() bool { return boardLEDs(t, base, id)["colour"] == "#ff0000" })
	}

	ac := nettest.DialUDP(t, ma[1])
	ac.Write(artnet.AppendPoll(nil, artnet.Poll{}))
	buf := make([]byte, 600)
	ac.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := ac.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := artnet.DecodePollReply(buf[:n]); err != nil || r.ShortName != "holo-gateway" || len(r.Ports) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	desk(t, ma[1], func(seq uint8) []byte {
		pkt, _ := artnet.AppendDmx(nil, artnet.Dmx{Sequence: seq, PortAddress: 1, Slots: []byte{255, 0, 255, 0, 0, 0}})
		return pkt
	})
	waitFor(t, "board 1 green", 10*time.Second, func() bool { return boardLEDs(t, base, ids[1])["colour"] == "#00ff00" })
	if got := boardLEDs(t, base, ids[2])["colour"]; got != "#ff0000" {
		t.Errorf("board 2 is %v, want the group's red", got)
	}

	code, body := get(t, base+"/v1/dmx/patch", "")
	var v struct {
		Sources []struct {
			Universe int    `json:"universe"`
			Protocol string `json:"protocol"`
		} `json:"sources"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.Sources) != 2 {
		t.Fatalf("%d %s", code, body)
	}
}

// TestDMXFlags: bad DMX flags are refused before anything starts.
func TestDMXFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--dmx-access", "all"},
		{"--sacn", "nohost"},
		{"--artnet", "127.0.0.1:70000"},
		{"--dmx-line-share", "1.5"},
	} {
		_, err := parseServe(append([]string{"--data", t.TempDir()}, args...), false, &strings.Builder{})
		if err == nil {
			t.Errorf("%v taken", args)
		}
	}
}
