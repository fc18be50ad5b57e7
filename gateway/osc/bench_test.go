package osc

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// doFleet is a fleet whose Do signals each call: the benchmark measures
// the OSC path (UDP in, decode, authorise, expand, fleet.Do), not a line.
type doFleet struct{ done chan struct{} }

func (f doFleet) Boards(fleet.Filter) []fleet.BoardView {
	return []fleet.BoardView{{ID: "b1", Groups: []int{1}}, {ID: "b2", Groups: []int{1}}}
}
func (f doFleet) Do(context.Context, fleet.Selector, fleet.Action) ([]fleet.Result, error) {
	f.done <- struct{}{}
	return nil, nil
}
func (f doFleet) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	return &fleet.Watcher{C: make(chan fleet.Event), Dropped: func() uint64 { return 0 }}
}

// BenchmarkUDPToDo is one OSC group command over UDP to the fleet.Do call
// for the group. Reported against the wire time of a group LEDS frame at
// 115200 baud (about 20 bytes: 1.7 ms), the time the line itself takes.
func BenchmarkUDPToDo(b *testing.B) {
	f := doFleet{done: make(chan struct{}, 1)}
	s, err := Listen(Options{Addr: "127.0.0.1:0", Fleet: f, Guard: &auth.Guard{}, Role: auth.RoleOperator})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	c, err := net.Dial("udp", s.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pkt, _ := Encode(&Message{Address: "/holo/group/1/leds/colour", Args: []any{"#ff0000"}})
	off, _ := Encode(&Message{Address: "/holo/alwaysReply", Args: []any{int32(0)}})
	_, _ = c.Write(off)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := c.Write(pkt); err != nil {
			b.Fatal(err)
		}
		<-f.done
	}
	per := time.Since(start) / time.Duration(b.N)
	wire := time.Duration(20*10) * time.Second / 115200
	b.ReportMetric(float64(per)/float64(wire), "osc-to-do-vs-wire-ratio")
}
