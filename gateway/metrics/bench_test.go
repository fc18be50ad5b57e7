package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// BenchmarkScrapeFleet gathers the Fleet and Boards collectors over 250
// boards (a full line of 247 and a few LAN boards), as one scrape does.
func BenchmarkScrapeFleet(b *testing.B) {
	src := &fakeFleet{stats: fleet.Stats{PerBoard: map[string]uint64{}}, replies: map[string]fleet.Reply{}}
	boards := NewBoards(src, BoardsOptions{PollEvery: -1})
	for i := range 250 {
		id := fmt.Sprintf("b%03d", i)
		src.views = append(src.views, fleet.BoardView{ID: id, Hostname: "holo-" + id, Address: i%247 + 1, Line: "line0",
			Groups: []int{1 + i%4}, Online: true, Firmware: "1.2.0", LastSeen: t0, Transports: []string{"rs485:line0"}})
		src.stats.PerBoard[id] = uint64(i)
		boards.event(fleet.Event{Board: id, Type: fleet.EventState, Kind: "system", Time: t0,
			Data: []byte(`{"uptime_s":100,"heap_free":80000,"rssi":-60}`)})
		boards.event(fleet.Event{Board: id, Type: fleet.EventState, Kind: "link", Data: linkReply(100, 1).Body})
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, NewFleet(src), boards); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserve is the cost Commands adds to each command.
func BenchmarkObserve(b *testing.B) {
	c := NewCommands()
	o := fleet.Observation{Transport: fleet.ViaRS485, Kind: "GET /link", Duration: 20 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		c.Observe(o)
	}
}
