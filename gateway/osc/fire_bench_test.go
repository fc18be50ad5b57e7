package osc

import (
	"bytes"
	"context"
	"image/color"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
)

// benchRig is a gateway in one process for the OSC benchmarks: boards in
// group 1 on simulated 115200-baud lines and on the LAN, the real drivers
// and fleet core, and the OSC server on loopback.
type benchRig struct {
	f      *fleet.Fleet
	line   *simline.Line // the first line
	master *rs485.Line   // its master
	boards []*boardtest.InProc
	strips []*boardtest.StripWatch
	ids    []string
	// lineBoards: the first lineBoards of boards, strips and ids are on
	// lines, the others on the LAN.
	lineBoards int
	osc        *Server
}

// rigShape is how many boards a benchRig has where: Lines lines of
// PerLine boards each, polled every Poll (0: the driver's default), and
// LAN boards on the LAN only.
type rigShape struct {
	Lines, PerLine, LAN int
	Poll                time.Duration
}

// newBenchRig is n boards in group 1, all on one line or all on the LAN.
func newBenchRig(b *testing.B, n int, onLine bool, pollInterval time.Duration) *benchRig {
	if onLine {
		return newShapedRig(b, rigShape{Lines: 1, PerLine: n, Poll: pollInterval})
	}
	return newShapedRig(b, rigShape{LAN: n})
}

func newShapedRig(b *testing.B, shape rigShape) *benchRig {
	b.Helper()
	b.StopTimer()
	r := &benchRig{}
	var drivers []fleet.Driver
	start := func(o boardtest.InProcOptions) *boardtest.InProc {
		hw, strip := boardtest.WatchedHardware()
		o.Hardware = hw
		p := boardtest.StartInProcess(b, o)
		r.boards, r.strips, r.ids = append(r.boards, p), append(r.strips, strip), append(r.ids, p.Board.Identity().ID)
		return p
	}
	for l := range shape.Lines {
		line, err := simline.New(simline.Config{Baud: 115200})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { line.Close() })
		if l == 0 {
			r.line = line
		}
		var addrs []int
		for a := 1; a <= shape.PerLine; a++ {
			s := link.DefaultSettings()
			s.Groups = []int{1}
			s.Mode, s.Address = link.ModeRS485, a
			node, err := line.Attach(simline.NodeOptions{Name: "board" + strconv.Itoa(a)})
			if err != nil {
				b.Fatal(err)
			}
			start(boardtest.InProcOptions{Link: &s, Port: node, PortName: "rs485"})
			addrs = append(addrs, a)
		}
		node, err := line.Attach(simline.NodeOptions{Name: "gateway"})
		if err != nil {
			b.Fatal(err)
		}
		m := rs485.New(rs485.Options{Name: "line" + strconv.Itoa(l), Port: node, Addresses: addrs, PollInterval: shape.Poll,
			DiscoverWait: 150 * time.Millisecond, PollWait: 300 * time.Millisecond})
		if l == 0 {
			r.master = m
		}
		drivers = append(drivers, m)
	}
	if shape.LAN > 0 {
		ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		for range shape.LAN {
			s := link.DefaultSettings()
			s.Groups = []int{1}
			p := start(boardtest.InProcOptions{Link: &s})
			if err := ld.Add(p.URL, ""); err != nil {
				b.Fatal(err)
			}
		}
		drivers = append(drivers, ld)
	}
	r.f = fleet.New(fleet.Options{Drivers: drivers})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.f.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	// Ready: every board online in its group, and every LAN board's
	// clock aligned well enough to be told fire moments (its first clock
	// round comes within a second of it coming online; until then a
	// timed fire calls it at the moment, a round trip late), as in a
	// show's steady state.
	r.lineBoards = shape.Lines * shape.PerLine
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := 0
		for i, id := range r.ids {
			v, err := r.f.Board(id)
			if err == nil && v.Online && len(v.Groups) == 1 && (i < r.lineBoards ||
				v.Clock != nil && time.Duration(v.Clock.UncertaintyUS)*time.Microsecond <= fleet.DefaultFireUncertainty) {
				ok++
			}
		}
		if ok == len(r.ids) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d boards ready", ok, len(r.ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, err := Listen(Options{Addr: "127.0.0.1:0", Fleet: r.f, Guard: &auth.Guard{}, Role: auth.RoleOperator})
	if err != nil {
		b.Fatal(err)
	}
	r.osc = s
	octx, ocancel := context.WithCancel(context.Background())
	odone := make(chan struct{})
	go func() { _ = s.Run(octx); close(odone) }()
	b.Cleanup(func() { ocancel(); <-odone })
	return r
}

// oscConn is a UDP client of the rig's OSC server.
func (r *benchRig) oscConn(b *testing.B) *net.UDPConn {
	b.Helper()
	to, _ := net.ResolveUDPAddr("udp", r.osc.Addr())
	c, err := net.DialUDP("udp", nil, to)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func send(b *testing.B, c *net.UDPConn, addr string, args ...any) {
	b.Helper()
	pkt, err := Encode(&Message{Address: addr, Args: args})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Write(pkt); err != nil {
		b.Fatal(err)
	}
}

// quantile is the p-th quantile of ds (nearest rank).
func quantile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// benchSamples is how many samples the percentiles are taken over,
// whatever b.N is.
const benchSamples = 200

// BenchmarkOSCToLastBit is an OSC message (/holo/group/1/screen/colour
// over UDP on loopback) to the last bit of the group COLOUR frame it
// becomes on a 115200-baud simulated line of 4 boards (its end by the
// wire's schedule: fleettest.FrameProbe): decode, authorise, expand,
// fleet.Do, the line. The target is 1.1 times the frame's wire time plus
// 1 ms: osc-to-last-bit-vs-limit-ratio (p50, and -p99-), under 1 is met.
// quiet: the line is not polled (an installation at rest between
// cycles); polled: every 100 ms, so a message may wait for a poll
// exchange under way.
func BenchmarkOSCToLastBit(b *testing.B) {
	for _, tc := range []struct {
		name string
		poll time.Duration
	}{{"quiet", time.Hour}, {"polled", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			r := newBenchRig(b, 4, true, tc.poll)
			probe, err := fleettest.AttachProbe(r.line)
			if err != nil {
				b.Fatal(err)
			}
			c := r.oscConn(b)
			send(b, c, "/holo/alwaysReply", int32(0))
			colours := []string{"#ff0000", "#0000ff"}
			wire, _ := frame.AppendRequest(nil, frame.GroupAddress(1), 0, frame.ColourRequest{R: 255})
			pure := r.line.WireTime(len(wire))
			limit := pure*11/10 + time.Millisecond
			var ds []time.Duration
			one := func() {
				start := time.Now()
				send(b, c, "/holo/group/1/screen/colour", colours[len(ds)%2])
				end, ok := probe.Await(start, frame.GroupAddress(1), frame.TypeColour, 5*time.Second)
				if !ok {
					b.Fatal("no frame on the line")
				}
				ds = append(ds, end.Sub(start))
				b.StopTimer()
				time.Sleep(20 * time.Millisecond) // the boards take it and repaint
				b.StartTimer()
			}
			b.ReportAllocs()
			b.StartTimer()
			for b.Loop() {
				one()
			}
			b.StopTimer()
			for len(ds) < benchSamples {
				one()
			}
			b.ReportMetric(float64(quantile(ds, .5))/float64(limit), "osc-to-last-bit-vs-limit-ratio")
			b.ReportMetric(float64(quantile(ds, .99))/float64(limit), "osc-to-last-bit-p99-vs-limit-ratio")
			b.ReportMetric(float64(quantile(ds, .5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(quantile(ds, .99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(pure.Microseconds()), "wire-µs")
		})
	}
}

// BenchmarkFeedback is a board's change to the OSC feedback message at a
// subscribed client (/holo/subscribe /holo/board/*/leds, UDP on
// loopback). The change is made on the board itself (PATCH /leds on its
// own HTTP API, as its web page or a button would), and timed from the
// moment its LED strip latched the frame (boardtest.StripWatch) to the
// client's receipt of /holo/board/<id>/leds with the new colour. lan: 4
// LAN boards, whose event streams carry the change (target p99 under
// 5 ms: feedback-p99-vs-5ms-ratio); line: 4 boards on a simulated line
// polled every 100 ms, where the master sees the change at the board's
// next poll (by its status block: the change sets the brightness too, as
// a colour alone is not in the block) (target within one poll cycle, the interval or the cycle's
// length if longer: feedback-p99-vs-cycle-ratio).
func BenchmarkFeedback(b *testing.B) {
	for _, onLine := range []bool{false, true} {
		name := "lan"
		if onLine {
			name = "line"
		}
		b.Run(name, func(b *testing.B) {
			r := newBenchRig(b, 4, onLine, 0)
			c := r.oscConn(b)
			buf := make([]byte, MaxPacket)
			// Subscribed once the reply says so; replies off after.
			send(b, c, "/holo/subscribe", "/holo/board/*/leds")
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				n, err := c.Read(buf)
				if err != nil {
					b.Fatalf("no reply to subscribe: %v", err)
				}
				if p, err := Decode(buf[:n]); err == nil {
					if m, ok := p.(*Message); ok && m.Address == "/reply/holo/subscribe" {
						break
					}
				}
			}
			send(b, c, "/holo/alwaysReply", int32(0))
			client := &http.Client{Timeout: 10 * time.Second}
			var ds []time.Duration
			lost := 0
			lastThump := time.Now()
			rng := rand.New(rand.NewPCG(7, 9))
			one := func() {
				try := len(ds) + lost
				k := try % len(r.boards)
				if onLine {
					// At a random point of the poll cycle, not in step
					// with it (a change right after the feedback of the
					// last would meet the poll of the next board).
					b.StopTimer()
					time.Sleep(time.Duration(rng.Int64N(int64(rs485.DefaultPollInterval))))
					b.StartTimer()
				}
				colour := "#" + strings.Repeat("0", 4) + strconv.FormatInt(int64(16+try%200), 16)
				start := time.Now()
				req, _ := http.NewRequest(http.MethodPatch, r.boards[k].URL+"/api/v1/leds",
					strings.NewReader(`{"mode":"solid","colour":"`+colour+`","brightness":`+strconv.Itoa(20+try%60)+`}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				w, ok := r.strips[k].Await(start, func(px color.RGBA) bool { return px.B > 0 && px.R == 0 && px.G == 0 }, 5*time.Second)
				if !ok {
					b.Fatal("the strip did not change")
				}
				want := []byte(`"colour":"` + colour + `"`)
				addr := "/holo/board/" + r.ids[k] + "/leds"
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				for {
					n, err := c.Read(buf)
					if err != nil {
						// Counted, not fatal: one in a long run would
						// end the report; many are a failure below.
						lost++
						b.Logf("no feedback for %s %s within 2 s: %v", r.ids[k], colour, err)
						break
					}
					got := time.Now()
					p, err := Decode(buf[:n])
					m, isMsg := p.(*Message)
					if err != nil || !isMsg || m.Address != addr || len(m.Args) != 1 {
						continue
					}
					if s, _ := m.Args[0].(string); bytes.Contains([]byte(s), want) {
						ds = append(ds, got.Sub(w.At))
						break
					}
				}
				if time.Since(lastThump) > 10*time.Second {
					send(b, c, "/holo/thump")
					lastThump = time.Now()
				}
			}
			b.ReportAllocs()
			b.StartTimer()
			for b.Loop() {
				one()
			}
			b.StopTimer()
			for len(ds) < benchSamples {
				one()
			}
			if lost*100 > len(ds) {
				b.Fatalf("%d feedback messages lost of %d", lost, len(ds)+lost)
			}
			b.ReportMetric(float64(lost), "lost")
			p99 := quantile(ds, .99)
			b.ReportMetric(float64(quantile(ds, .5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
			if !onLine {
				b.ReportMetric(float64(p99)/float64(5*time.Millisecond), "feedback-p99-vs-5ms-ratio")
				return
			}
			cycle := max(rs485.DefaultPollInterval, r.master.Stats().PollCycle)
			b.ReportMetric(float64(cycle.Microseconds()), "cycle-µs")
			b.ReportMetric(float64(p99)/float64(cycle), "feedback-p99-vs-cycle-ratio")
		})
	}
}
