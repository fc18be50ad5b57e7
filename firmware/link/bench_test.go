package link_test

import (
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/simline"
)

// BenchmarkRoundTrip115200 measures a native PING and a JSON GET /leds
// round trip between a master and a board on a simulated RS485 line at
// 115200 baud, as a ratio to the pure wire time of request plus reply
// (the physical limit) measured in the same run. Target: under 1.2.
func BenchmarkRoundTrip115200(b *testing.B) {
	for _, kind := range []string{"native-ping", "json-get-leds"} {
		b.Run(kind, func(b *testing.B) {
			_, master, boards := rs485Line(b, 1, simline.Faults{})
			line := boards[0]
			_ = line
			h := newHost(b, master)
			var elapsed, wire time.Duration
			req, _ := frame.AppendRequest(nil, 1, 1, &frame.PingRequest{})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				var reqN, repN int
				if kind == "native-ping" {
					f, _, _, ok := h.native(1, &frame.PingRequest{})
					if !ok {
						b.Fatal("no reply")
					}
					reqN = len(req)
					enc, _ := frame.AppendEncode(nil, f)
					repN = len(enc)
				} else {
					rep, _, ok := h.line("@1 GET /leds")
					if !ok || rep.Status != 200 {
						b.Fatal("no reply")
					}
					reqN = len("@1 GET /leds\n")
					repN = len(jsonline.AppendReply(nil, rep))
				}
				elapsed += time.Since(start)
				wire += time.Duration(reqN+repN) * 10 * time.Second / 115200
			}
			b.ReportMetric(float64(elapsed)/float64(wire), "wire-ratio")
		})
	}
}
