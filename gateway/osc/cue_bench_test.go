package osc

import (
	"context"
	"encoding/json"
	"image/color"
	"net"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// BenchmarkCueGo is a GO over OSC (/holo/cue/<n>/start over UDP on
// loopback, two cues alternating red and blue on group 1) to each
// board's change, its LED strip latching the new colour
// (boardtest.StripWatch): the error of each change against the cue's
// moment (the fires_at of the GO's reply), p50 and p99, and the skew
// between the first and the last board of a GO (p99). Beside them, in the
// same run, the host's own wake-up lateness: a goroutine waiting on a
// timer for a deadline, p99. The target is the skew p99 within 1.2 times
// the host's wake-up p99 (cue-skew-p99-vs-wakeup-ratio): a show cannot be
// tighter than the scheduler that wakes its senders. line: 4 boards on a
// polled 115200-baud simulated line (one group frame, timed on the wire);
// lan: 4 LAN boards (told the moment ahead when their clocks are aligned).
func BenchmarkCueGo(b *testing.B) {
	for _, onLine := range []bool{true, false} {
		name := "lan"
		if onLine {
			name = "line"
		}
		b.Run(name, func(b *testing.B) {
			r := newBenchRig(b, 4, onLine, 0)
			eng, err := cue.New(cue.Options{Fleet: r.f})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(eng.Close)
			leds := func(c string) []cue.Action {
				return []cue.Action{{Kind: "leds", Selector: fleet.Selector{Groups: []int{1}}, Body: json.RawMessage(`{"mode":"solid","loop":true,"colour":"` + c + `"}`)}}
			}
			if _, err := eng.Put(cue.List{Name: "bench", Cues: []cue.Cue{{Number: "1", Actions: leds("#ff0000")}, {Number: "2", Actions: leds("#0000ff")}}}); err != nil {
				b.Fatal(err)
			}
			r.osc.o.Cues = eng
			c := r.oscConn(b)
			buf := make([]byte, MaxPacket)
			red := func(px color.RGBA) bool { return px.R > 0 && px.B == 0 }
			blue := func(px color.RGBA) bool { return px.B > 0 && px.R == 0 }
			var errs, skews []time.Duration
			n := 0
			one := func() {
				n++
				addr, match := "/holo/cue/1/start", red
				if n%2 == 0 {
					addr, match = "/holo/cue/2/start", blue
				}
				start := time.Now()
				send(b, c, addr)
				at := readMoment(b, c, buf, addr)
				var first, last time.Time
				for _, s := range r.strips {
					w, ok := s.Await(start, match, 5*time.Second)
					if !ok {
						b.Fatal("a strip did not change")
					}
					errs = append(errs, w.At.Sub(at))
					if first.IsZero() || w.At.Before(first) {
						first = w.At
					}
					if w.At.After(last) {
						last = w.At
					}
				}
				skews = append(skews, last.Sub(first))
				b.StopTimer()
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
			}
			b.ReportAllocs()
			b.StartTimer()
			for b.Loop() {
				one()
			}
			b.StopTimer()
			for len(skews) < benchSamples {
				one()
			}
			wake := wakeups(benchSamples, 20*time.Millisecond)
			abs := make([]time.Duration, len(errs))
			for i, e := range errs {
				abs[i] = e.Abs()
			}
			b.ReportMetric(float64(quantile(abs, .5).Microseconds()), "error-p50-µs")
			b.ReportMetric(float64(quantile(abs, .99).Microseconds()), "error-p99-µs")
			b.ReportMetric(float64(quantile(skews, .99).Microseconds()), "skew-p99-µs")
			b.ReportMetric(float64(quantile(wake, .99).Microseconds()), "wakeup-p99-µs")
			b.ReportMetric(float64(quantile(skews, .99))/float64(max(quantile(wake, .99), time.Microsecond))/1.2, "cue-skew-p99-vs-wakeup-ratio")
		})
	}
}

// readMoment reads the reply to addr and returns the moment of the cue it
// started (its fires_at in the state).
func readMoment(b *testing.B, c *net.UDPConn, buf []byte, addr string) time.Time {
	b.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, err := c.Read(buf)
		if err != nil {
			b.Fatalf("no reply to %s: %v", addr, err)
		}
		p, err := Decode(buf[:n])
		m, ok := p.(*Message)
		if err != nil || !ok || m.Address != "/reply"+addr || len(m.Args) != 1 {
			continue
		}
		s, _ := m.Args[0].(string)
		var rep struct {
			Status string    `json:"status"`
			Data   cue.State `json:"data"`
		}
		if err := json.Unmarshal([]byte(s), &rep); err != nil || rep.Status != StatusOK || len(rep.Data.Running) == 0 {
			b.Fatalf("reply to %s: %s", addr, s)
		}
		return rep.Data.Running[0].FiresAt
	}
}

// wakeups measures n times how late a goroutine waiting on a timer for a
// deadline d ahead wakes up.
func wakeups(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, 0, n)
	ctx := context.Background()
	for range n {
		deadline := time.Now().Add(d)
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		out = append(out, time.Since(deadline))
	}
	return out
}
