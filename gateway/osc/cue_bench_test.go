package osc

import (
	"context"
	"encoding/json"
	"image/color"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/fleet/fleettest"
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
// lan: 4 LAN boards (told the moment ahead when their clocks are aligned);
// fleet: both at once and more, 2 polled lines of 4 boards and 8 LAN
// boards, all in the cue's group (two timed group frames and 8 timed LAN
// calls for one moment). Per transport, line-error and lan-error (p50,
// p99, signed: one transport late as a whole against the other is an
// offset between them, not jitter), frame-end (p50, p99, signed: a line's
// frame's last byte against the moment, by the line's measure, which a
// line board's change follows by its decoding and applying), and
// gateway-fired: LAN changes the gateway called at the moment, the
// board's clock not aligned well enough to be told it (0 now that the
// rig waits for the LAN boards' first clock round; before, the first
// dozen GOs of a run, of 200, each had LAN boards called a round trip
// late, in the skew's tail).
func BenchmarkCueGo(b *testing.B) {
	for _, tc := range []struct {
		name  string
		shape rigShape
	}{
		{"line", rigShape{Lines: 1, PerLine: 4}},
		{"lan", rigShape{LAN: 4}},
		{"fleet", rigShape{Lines: 2, PerLine: 4, LAN: 8}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := newShapedRig(b, tc.shape)
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
			// Boards told ahead whose clock was not aligned well enough
			// (fleet.DefaultFireUncertainty) are called at the moment
			// instead, a round trip late.
			// A line's frame end against the moment (the gateway's own
			// part of a line board's error: the board decodes and
			// applies after it).
			var gwFired atomic.Int64
			var wireMu sync.Mutex
			var wire []time.Duration
			r.f.ObserveFire(func(rep fleet.FireReport) {
				wireMu.Lock()
				defer wireMu.Unlock()
				for _, c := range rep.Changes {
					switch c.How {
					case fleet.FireGateway:
						gwFired.Add(1)
					case fleet.FireLine:
						wire = append(wire, c.Lateness(rep.At))
					}
				}
			})
			c := r.oscConn(b)
			buf := make([]byte, MaxPacket)
			red := func(px color.RGBA) bool { return px.R > 0 && px.B == 0 }
			blue := func(px color.RGBA) bool { return px.B > 0 && px.R == 0 }
			var errs, skews []time.Duration
			var byWay [2][]time.Duration // signed errors: [0] line boards, [1] LAN boards
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
				for i, s := range r.strips {
					w, ok := s.Await(start, match, 5*time.Second)
					if !ok {
						b.Fatal("a strip did not change")
					}
					errs = append(errs, w.At.Sub(at))
					way := 0
					if i >= r.lineBoards {
						way = 1
					}
					byWay[way] = append(byWay[way], w.At.Sub(at))
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
			for way, name := range []string{"line", "lan"} {
				if len(byWay[way]) == 0 {
					continue
				}
				// Signed: a transport late (or early) as a whole against
				// the other is an offset between them, not jitter.
				b.ReportMetric(float64(quantile(byWay[way], .5).Microseconds()), name+"-error-p50-µs")
				b.ReportMetric(float64(quantile(byWay[way], .99).Microseconds()), name+"-error-p99-µs")
			}
			b.ReportMetric(float64(quantile(wake, .99).Microseconds()), "wakeup-p99-µs")
			b.ReportMetric(float64(gwFired.Load()), "gateway-fired")
			wireMu.Lock()
			if len(wire) > 0 {
				b.ReportMetric(float64(quantile(wire, .5).Microseconds()), "frame-end-p50-µs")
				b.ReportMetric(float64(quantile(wire, .99).Microseconds()), "frame-end-p99-µs")
			}
			wireMu.Unlock()
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

// timedFleet records when each action reached the fleet, and its body
// (which names the cue).
type timedFleet struct {
	*fakeFleet
	at chan fired
}

type fired struct {
	at   time.Time
	body string
}

func (f *timedFleet) Do(_ context.Context, _ fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	f.at <- fired{time.Now(), string(a.Body)}
	return []fleet.Result{{Board: "b", Via: "group"}}, nil
}

// BenchmarkTimecodeChase is timecode at 30 fps over OSC (/holo/timecode
// h m s f, UDP on loopback, sent one frame time apart by a sender in the
// benchmark) to the fleet action of the cue the frame passes (a cue every
// 10 frames): from the frame's send to the action reaching the fleet core
// (whose timed fire then goes out at once, the moment being passed),
// p50 and p99 of its size. Each cue's action names it, so a fire is paired
// with its own cue's frame: a sender the loaded host stalls for 1.5 frame
// times lets the chase freewheel onto a cue before its frame (counted in
// early-fires), and the frame after chases the cue again (not counted).
// The target is within one frame at p99
// (timecode-fire-p99-vs-frame-ratio under 1).
func BenchmarkTimecodeChase(b *testing.B) {
	const fps = 30
	fl := &timedFleet{fakeFleet: newFakeFleet(), at: make(chan fired, 1024)}
	var list cue.List
	list.Name = "tc"
	for i := range 200 {
		f := 10 * (i + 1)
		list.Cues = append(list.Cues, cue.Cue{Number: cue.Number(itoa(i + 1)),
			Timecode: twoDigits(f/fps/3600) + ":" + twoDigits(f/fps/60%60) + ":" + twoDigits(f/fps%60) + ":" + twoDigits(f%fps),
			Actions:  []cue.Action{{Kind: "scene_apply", Selector: fleet.Selector{All: true}, Body: json.RawMessage(`{"name":"c` + itoa(i+1) + `"}`)}}})
	}
	eng, err := cue.New(cue.Options{Fleet: fl})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(eng.Close)
	if _, err := eng.Put(list); err != nil {
		b.Fatal(err)
	}
	s, err := Listen(Options{Addr: "127.0.0.1:0", Fleet: fl.fakeFleet, Cues: eng, Guard: &auth.Guard{}, Role: auth.RoleOperator})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	to, _ := net.ResolveUDPAddr("udp", s.Addr())
	c, err := net.DialUDP("udp", nil, to)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	frame := time.Second / fps
	var ds []time.Duration
	early := 0
	firstFire := map[string]time.Time{} // by body: the cue's first fire
	f := 0
	tick := time.NewTicker(frame)
	defer tick.Stop()
	one := func() {
		// Ten frames, the last passing a cue.
		var sent time.Time
		for range 10 {
			f++
			sent = time.Now()
			send(b, c, "/holo/timecode", int32(f/fps/3600), int32(f/fps/60%60), int32(f/fps%60), int32(f%fps), int32(fps))
			<-tick.C
		}
		want := `{"name":"c` + itoa(f/10) + `"}`
		timeout := time.After(5 * time.Second)
		for {
			if at, ok := firstFire[want]; ok {
				if at.Before(sent) {
					early++
				}
				ds = append(ds, at.Sub(sent).Abs())
				return
			}
			select {
			case x := <-fl.at:
				if _, seen := firstFire[x.body]; !seen {
					firstFire[x.body] = x.at
				}
			case <-timeout:
				b.Fatalf("frame %d fired no cue", f)
			}
		}
	}
	// The first frame chases (a cue may fire for it): start on a frame
	// before every cue, then drain.
	send(b, c, "/holo/timecode", int32(0), int32(0), int32(0), int32(0), int32(fps))
	time.Sleep(50 * time.Millisecond)
	for len(fl.at) > 0 {
		<-fl.at
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(ds) >= len(list.Cues)-1 {
			break
		}
		one()
	}
	for len(ds) < 100 && len(ds) < len(list.Cues)-1 {
		one()
	}
	b.ReportMetric(float64(quantile(ds, .5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(quantile(ds, .99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(early), "early-fires")
	b.ReportMetric(float64(quantile(ds, .99))/float64(frame), "timecode-fire-p99-vs-frame-ratio")
}

func itoa(i int) string { return strconv.Itoa(i) }

func twoDigits(i int) string {
	if i < 10 {
		return "0" + strconv.Itoa(i)
	}
	return strconv.Itoa(i)
}

// BenchmarkCueFirstGo is the first GO after the show has been quiet: the
// gateway idles (no OSC, no fire, the line not polled) for a quiet spell,
// then /holo/cue/go over UDP fires a cue (at once: every GO asap, so no
// lead hides the path) whose action becomes a group COLOUR frame on a
// simulated 115200-baud line of 4 boards; timed from the send to the
// frame's last bit on the wire (fleettest.FrameProbe), 50 times. The
// target is p99 under 1.1 times the frame's wire time plus 1 ms
// (first-go-p99-vs-limit-ratio under 1), as for a message on a warm path
// (BenchmarkOSCToLastBit/quiet): a cold path after idle must not cost
// more. The quiet spell is a real one, on the real clock, so that what
// idling does to the process (parked goroutines and threads, timers, the
// scheduler's and the caches' state) is in the measure: a minute with
// HOLO_SOAK=1 (50 minutes in all), 3 s otherwise (quiet-ms says which).
func BenchmarkCueFirstGo(b *testing.B) {
	const samples = 50
	quiet := testlevel.Pick(3*time.Second, time.Minute)
	r := newShapedRig(b, rigShape{Lines: 1, PerLine: 4, Poll: time.Hour})
	probe, err := fleettest.AttachProbe(r.line)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := cue.New(cue.Options{Fleet: r.f, ASAP: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(eng.Close)
	colour := func(c string) []cue.Action {
		return []cue.Action{{Kind: "screen_show", Selector: fleet.Selector{Groups: []int{1}}, Body: json.RawMessage(`{"colour":"` + c + `"}`)}}
	}
	// Two cues of two colours; past the end the standby goes back to the
	// first (off the clock), so every GO changes the colour.
	if _, err := eng.Put(cue.List{Name: "bench", Cues: []cue.Cue{{Number: "1", Actions: colour("#ff0000")}, {Number: "2", Actions: colour("#0000ff")}}}); err != nil {
		b.Fatal(err)
	}
	r.osc.o.Cues = eng
	c := r.oscConn(b)
	wire, _ := frame.AppendRequest(nil, frame.GroupAddress(1), 0, frame.ColourRequest{R: 255})
	pure := r.line.WireTime(len(wire))
	limit := pure*11/10 + time.Millisecond
	var ds []time.Duration
	one := func() {
		b.StopTimer()
		if st, _ := eng.State("bench"); st.Standby == "" {
			if _, err := eng.SetStandby("bench", "1"); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(quiet)
		b.StartTimer()
		start := time.Now()
		send(b, c, "/holo/cue/go")
		end, ok := probe.Await(start, frame.GroupAddress(1), frame.TypeColour, 5*time.Second)
		if !ok {
			b.Fatal("no frame on the line")
		}
		ds = append(ds, end.Sub(start))
	}
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
	b.StopTimer()
	for len(ds) < samples {
		one()
	}
	b.ReportMetric(float64(quantile(ds, .5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(quantile(ds, .99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(pure.Microseconds()), "wire-µs")
	b.ReportMetric(float64(quiet.Milliseconds()), "quiet-ms")
	// The host's own wake-up lateness in the same run, for what limits
	// the tail (a goroutine waiting for a deadline).
	b.ReportMetric(float64(quantile(wakeups(samples, 20*time.Millisecond), .99).Microseconds()), "wakeup-p99-µs")
	b.ReportMetric(float64(quantile(ds, .99))/float64(limit), "first-go-p99-vs-limit-ratio")
}

// BenchmarkTimecodeToBoards is timecode at 30 fps over OSC (/holo/timecode
// from a sender in the benchmark, one frame time apart) to the boards'
// change: a cue every 10 frames sets group 1's LED colour (red and blue
// in turn), and each board's strip latching it (boardtest.StripWatch) is
// timed from the send of the frame that should fire it. p50 and p99 of
// that error over every board of every cue; the target is within one
// frame at p99 (timecode-change-p99-vs-frame-ratio under 1). line: 4
// boards on a polled 115200-baud simulated line; lan: 4 LAN boards.
//
// A change before its frame
// was sent (early-changes) is the chase freewheeling over a sender the
// host kept off the processor (stall-max-µs: the longest gap between two
// sends): a timecode source keeps its rate, so such a change is measured
// against the moment the frame was due, the last frame sent before the
// change plus the frames between, not against the stalled send. Before
// the chase took late frames as the source catching up, those late frames
// also fired the cue before and then the cue again.
func BenchmarkTimecodeToBoards(b *testing.B) {
	const fps, cues = 30, 60
	frameTime := time.Second / fps
	for _, tc := range []struct {
		name  string
		shape rigShape
	}{
		{"line", rigShape{Lines: 1, PerLine: 4}},
		{"lan", rigShape{LAN: 4}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := newShapedRig(b, tc.shape)
			list := cue.List{Name: "tc"}
			colours := []string{"#ff0000", "#0000ff"}
			for i := range cues {
				f := 10 * (i + 1)
				list.Cues = append(list.Cues, cue.Cue{Number: cue.Number(itoa(i + 1)),
					Timecode: twoDigits(f/fps/3600) + ":" + twoDigits(f/fps/60%60) + ":" + twoDigits(f/fps%60) + ":" + twoDigits(f%fps),
					Actions: []cue.Action{{Kind: "leds", Selector: fleet.Selector{Groups: []int{1}},
						Body: json.RawMessage(`{"mode":"solid","loop":true,"colour":"` + colours[i%2] + `"}`)}}})
			}
			eng, err := cue.New(cue.Options{Fleet: r.f})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(eng.Close)
			if _, err := eng.Put(list); err != nil {
				b.Fatal(err)
			}
			r.osc.o.Cues = eng
			c := r.oscConn(b)
			red := func(px color.RGBA) bool { return px.R > 0 && px.B == 0 }
			blue := func(px color.RGBA) bool { return px.B > 0 && px.R == 0 }
			sendFrame := func(f int) {
				send(b, c, "/holo/timecode", int32(f/fps/3600), int32(f/fps/60%60), int32(f/fps%60), int32(f%fps), int32(fps))
			}
			// The chase starts before every cue.
			sendFrame(0)
			var ds []time.Duration
			early := 0
			f := 0
			var stall time.Duration
			var lastSent time.Time
			tick := time.NewTicker(frameTime)
			defer tick.Stop()
			one := func() {
				var sends [10]time.Time
				for i := range sends { // ten frames, the last passing a cue
					<-tick.C
					f++
					sends[i] = time.Now()
					if !lastSent.IsZero() {
						stall = max(stall, sends[i].Sub(lastSent))
					}
					lastSent = sends[i]
					sendFrame(f)
				}
				first, sent := sends[0], sends[9]
				match := red
				if (f/10)%2 == 0 {
					match = blue
				}
				// A sender the host stalls for more than 1.5 frame
				// times lets the chase freewheel onto the cue before
				// its frame is sent (as it should): such a change is
				// found from the group's first frame, and counted early.
				for _, s := range r.strips {
					w, ok := s.Await(first, match, 5*time.Second)
					if !ok {
						b.Fatalf("a strip did not change for frame %d", f)
					}
					due := sent
					if w.At.Before(sent) {
						early++
						g := 0
						for i, at := range sends {
							if !at.After(w.At) {
								g = i
							}
						}
						due = sends[g].Add(time.Duration(9-g) * frameTime)
					}
					ds = append(ds, w.At.Sub(due).Abs())
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if f >= 10*cues {
					break
				}
				one()
			}
			for f < 10*cues {
				one()
			}
			b.ReportMetric(float64(quantile(ds, .5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(quantile(ds, .99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(early), "early-changes")
			b.ReportMetric(float64(stall.Microseconds()), "stall-max-µs")
			// The host's wake-up lateness in the same run (a goroutine
			// waiting for a deadline, p99): what a sender, a poller or a
			// board thread woken that late adds to a change.
			b.ReportMetric(float64(quantile(wakeups(100, 20*time.Millisecond), .99).Microseconds()), "wakeup-p99-µs")
			b.ReportMetric(float64(quantile(ds, .99))/float64(frameTime), "timecode-change-p99-vs-frame-ratio")
		})
	}
}
