package dmx

import (
	"context"
	"image/color"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/dmx/sacn"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
)

// dmxFrame is one DMX512 frame's time at full rate (44 Hz).
const dmxFrame = 22700 * time.Microsecond

// benchBoard is a board of the bench rig.
type benchBoard struct {
	id    string
	lan   bool
	line  int
	group int
	strip *boardtest.StripWatch
}

// benchRig is a gateway in one process: Lines simulated 115200-baud lines
// of PerLine boards each (board a of line l in group 1 + 4l + (a-1)%4,
// when Groups), LAN boards, the real drivers and fleet core, the DMX
// engine and its sACN listener on loopback.
type benchRig struct {
	f      *fleet.Fleet
	e      *Engine
	boards []benchBoard
	sacn   *net.UDPConn
	seq    uint8
}

type benchOptions struct {
	Lines, PerLine, LAN int
	Groups              bool
	// Patch makes the patch from the boards.
	Patch func([]benchBoard) *Patch
	// ClockEvery aligns the LAN boards' clocks (0: none).
	ClockEvery time.Duration
	SyncLead   time.Duration
	// GroupQuiet is the lines' rs485.Options.GroupQuiet (0: the default;
	// negative: every member re-read after each group frame).
	GroupQuiet time.Duration
}

func newBenchRig(b *testing.B, o benchOptions) *benchRig {
	b.Helper()
	r := &benchRig{}
	var drivers []fleet.Driver
	for li := range o.Lines {
		line, err := simline.New(simline.Config{Baud: 115200})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { line.Close() })
		var addrs []int
		for a := 1; a <= o.PerLine; a++ {
			node, err := line.Attach(simline.NodeOptions{Name: "board" + strconv.Itoa(a)})
			if err != nil {
				b.Fatal(err)
			}
			s := link.DefaultSettings()
			s.Mode, s.Address = link.ModeRS485, a
			g := 0
			if o.Groups {
				g = 1 + 4*li + (a-1)%4
				s.Groups = []int{g}
			}
			hw, strip := boardtest.WatchedHardware()
			p := boardtest.StartInProcess(b, boardtest.InProcOptions{Port: node, PortName: "rs485", Link: &s, Hardware: hw})
			r.boards = append(r.boards, benchBoard{id: p.Board.Identity().ID, line: li, group: g, strip: strip})
			addrs = append(addrs, a)
		}
		master, err := line.Attach(simline.NodeOptions{Name: "gateway"})
		if err != nil {
			b.Fatal(err)
		}
		drivers = append(drivers, rs485.New(rs485.Options{Name: "line" + strconv.Itoa(li), Port: master, Addresses: addrs,
			DiscoverWait: 150 * time.Millisecond, PollWait: 300 * time.Millisecond, GroupQuiet: o.GroupQuiet}))
	}
	if o.LAN > 0 {
		ld := lan.New(lan.Options{ClockEvery: o.ClockEvery, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		for range o.LAN {
			s := link.DefaultSettings()
			hw, strip := boardtest.WatchedHardware()
			p := boardtest.StartInProcess(b, boardtest.InProcOptions{Link: &s, Hardware: hw})
			if err := ld.Add(p.URL, ""); err != nil {
				b.Fatal(err)
			}
			r.boards = append(r.boards, benchBoard{id: p.Board.Identity().ID, lan: true, line: -1, strip: strip})
		}
		drivers = append(drivers, ld)
	}
	r.f = fleet.New(fleet.Options{Drivers: drivers})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.f.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok := 0
		for _, bb := range r.boards {
			if v, err := r.f.Board(bb.id); err == nil && v.Online && (bb.group == 0 || len(v.Groups) == 1) &&
				(o.ClockEvery == 0 || !bb.lan || v.Clock != nil) {
				ok++
			}
		}
		if ok == len(r.boards) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d boards ready", ok, len(r.boards))
		}
		time.Sleep(20 * time.Millisecond)
	}
	e, err := New(Options{Fleet: r.f, Patch: o.Patch(r.boards), Role: auth.RoleOperator, SyncLead: o.SyncLead})
	if err != nil {
		b.Fatal(err)
	}
	r.e = e
	l, err := ListenSACN("127.0.0.1:0", e, nil)
	if err != nil {
		b.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(context.Background())
	edone := make(chan struct{}, 2)
	go func() { _ = e.Run(ectx); edone <- struct{}{} }()
	go func() { _ = l.Run(ectx); edone <- struct{}{} }()
	b.Cleanup(func() { ecancel(); <-edone; <-edone })
	ua, _ := net.ResolveUDPAddr("udp4", l.Addr())
	if r.sacn, err = net.DialUDP("udp4", nil, ua); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.sacn.Close() })
	return r
}

// send sends universe 1 (sync address sync, 0 for none) and returns when.
func (r *benchRig) send(b *testing.B, slots []byte, sync uint16) time.Time {
	r.seq++
	pkt, _ := sacn.AppendData(nil, sacn.Data{CID: [16]byte{1}, SourceName: "bench", Priority: 100, Sequence: r.seq,
		SyncAddr: sync, Universe: 1, Slots: slots})
	at := time.Now()
	if _, err := r.sacn.Write(pkt); err != nil {
		b.Fatal(err)
	}
	return at
}

func (r *benchRig) sendSync(b *testing.B, addr uint16) time.Time {
	r.seq++
	at := time.Now()
	if _, err := r.sacn.Write(sacn.AppendSync(nil, sacn.Sync{CID: [16]byte{1}, Sequence: r.seq, SyncAddr: addr})); err != nil {
		b.Fatal(err)
	}
	return at
}

// look is universe 1 with every fixture at full dimmer in red (i even)
// or blue (i odd).
func look(p *Patch, i int) []byte {
	s := make([]byte, Slots)
	for _, f := range p.Fixtures {
		v := []byte{255, 255, 0, 0, 0}
		if i%2 == 1 {
			v = []byte{255, 0, 0, 255, 0}
		}
		copy(s[f.Address-1:], v)
	}
	return s
}

func isLook(i int) func(color.RGBA) bool {
	if i%2 == 1 {
		return func(c color.RGBA) bool { return c.B > 0 && c.R == 0 }
	}
	return func(c color.RGBA) bool { return c.R > 0 && c.B == 0 }
}

func quantile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// benchLooks is how many look changes the percentiles are taken over.
const benchLooks = 60

// BenchmarkDMXToChange: one universe sent at 44 Hz (a frame every 22.7
// ms) driving 4 group fixtures on each of two 115200-baud lines of 16
// boards (8 group frames per look), and 16 LAN boards as single
// fixtures. The look changes every 4th frame (the desk refreshes the
// same look every frame); each board's change is when its LED strip
// latched the new colour. Over benchLooks changes it reports the p99 from
// the packet in to the last board's change, for the group fixtures' boards
// and the LAN boards, in µs and against one DMX frame
// (group-p99-vs-frame-ratio, lan-p99-vs-frame-ratio: under 1 is met).
//
// It runs twice in one run: first with the lines re-reading every member
// after each group frame (rs485 GroupQuiet negative, the rule before
// group re-reads were merged), then with the lines' defaults; the second
// also reports its group p99 against the first's
// (group-p99-vs-every-frame-reread-ratio) and the JSON requests (state
// re-reads) the lines sent per look in each (json-requests-per-look).
func BenchmarkDMXToChange(b *testing.B) {
	var everyFrame time.Duration
	b.Run("reread=every-frame", func(b *testing.B) { everyFrame = benchToChange(b, -1, 0) })
	b.Run("reread=merged", func(b *testing.B) { benchToChange(b, 0, everyFrame) })
}

// benchToChange is BenchmarkDMXToChange with the lines' GroupQuiet quiet;
// it returns the group p99 (of the last b.N round) and, given the group
// p99 of another run (base), reports this one's against it.
func benchToChange(b *testing.B, quiet, base time.Duration) time.Duration {
	var groupP99 time.Duration
	r := newBenchRig(b, benchOptions{Lines: 2, PerLine: 16, LAN: 16, Groups: true, GroupQuiet: quiet, Patch: func(bs []benchBoard) *Patch {
		p := &Patch{}
		for g := 1; g <= 8; g++ {
			p.Fixtures = append(p.Fixtures, Fixture{Universe: 1, Address: 1 + 5*(g-1), Profile: ProfileRGB, Group: g})
		}
		n := 0
		for _, bb := range bs {
			if bb.lan {
				p.Fixtures = append(p.Fixtures, Fixture{Universe: 1, Address: 41 + 5*n, Profile: ProfileRGB, Board: bb.id})
				n++
			}
		}
		return p
	}})
	r.settled(b)
	p := r.e.Patch()
	// The desk: universe 1 every frame, whatever look is current.
	var mu sync.Mutex
	cur := look(p, 0)
	stop := make(chan struct{})
	deskDone := make(chan struct{})
	go func() {
		defer close(deskDone)
		tick := time.NewTicker(dmxFrame)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			r.send(b, cur, 0)
			mu.Unlock()
		}
	}()
	defer func() { close(stop); <-deskDone }()
	b.ResetTimer()
	for range b.N {
		var groups, lans []time.Duration
		reads0 := r.rereads()
		for i := 1; i <= benchLooks; i++ {
			mu.Lock()
			cur = look(p, i)
			start := r.send(b, cur, 0)
			mu.Unlock()
			var lastG, lastL time.Time
			for _, bb := range r.boards {
				w, ok := bb.strip.Await(start, isLook(i), 10*time.Second)
				if !ok {
					b.Fatalf("board %s never changed", bb.id)
				}
				if bb.lan {
					lastL = later(lastL, w.At)
				} else {
					lastG = later(lastG, w.At)
				}
			}
			groups, lans = append(groups, lastG.Sub(start)), append(lans, lastL.Sub(start))
			time.Sleep(time.Until(start.Add(4 * dmxFrame))) // a look every 4th frame at most
		}
		b.ReportMetric(float64(quantile(groups, .99).Microseconds()), "group-p99-µs")
		b.ReportMetric(float64(quantile(lans, .99).Microseconds()), "lan-p99-µs")
		b.ReportMetric(float64(quantile(groups, .50).Microseconds()), "group-p50-µs")
		b.ReportMetric(float64(quantile(groups, .99))/float64(dmxFrame), "group-p99-vs-frame-ratio")
		b.ReportMetric(float64(quantile(lans, .99))/float64(dmxFrame), "lan-p99-vs-frame-ratio")
		b.ReportMetric(float64(r.rereads()-reads0)/benchLooks, "json-requests-per-look")
		groupP99 = quantile(groups, .99)
		if base > 0 {
			b.ReportMetric(float64(groupP99)/float64(base), "group-p99-vs-every-frame-reread-ratio")
		}
	}
	return groupP99
}

// rereads is how many JSON requests the lines sent so far: with no
// happenings in the rig, the state re-reads (GET /leds) and a clock
// sample now and then.
func (r *benchRig) rereads() uint64 {
	var n uint64
	for _, st := range r.f.Stats().Lines {
		n += st.LinesOut
	}
	return n
}

// settled waits until the lines' start-up reads are done (each board's
// states, events and clock sample, about a second of line time once the
// boards are online), so the looks measure a line running a show: as
// many polls as the rig has boards (more than a whole cycle of each line)
// with no JSON request written. A line sampling a clock meanwhile makes it wait for
// the next quiet cycle; after 20 s it gives up and says so.
func (r *benchRig) settled(b *testing.B) {
	boards := uint64(len(r.boards))
	polls := func() uint64 {
		var n uint64
		for _, st := range r.f.Stats().Lines {
			n += st.Polls
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	reads, from := r.rereads(), polls()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		switch now := r.rereads(); {
		case now != reads:
			reads, from = now, polls()
		case polls()-from >= boards:
			return
		}
	}
	b.Logf("the lines never had a poll cycle without a JSON request in 20 s")
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// BenchmarkDMXLineRate: 16 single fixtures on one 115200-baud line, all
// changing every frame at 44 Hz for 3 s. DMX may take DefaultLineShare of
// the line's time; the line's capacity for these changes is that share
// over the line time one change takes (measured: what the engine charged
// per change). It reports the changes sent a second against that
// capacity (rate-vs-capacity-ratio, at least 0.9 is met), the line time
// per change (ms-per-change), the looks replaced unsent
// (coalesced-per-s) and the most targets waiting at once (max-waiting:
// bounded by the 16 targets, never a queue).
func BenchmarkDMXLineRate(b *testing.B) {
	r := newBenchRig(b, benchOptions{Lines: 1, PerLine: 16, Patch: func(bs []benchBoard) *Patch {
		p := &Patch{}
		for i, bb := range bs {
			p.Fixtures = append(p.Fixtures, Fixture{Universe: 1, Address: 1 + 5*i, Profile: ProfileRGB, Board: bb.id})
		}
		return p
	}})
	p := r.e.Patch()
	b.ResetTimer()
	for range b.N {
		sent0 := testutil.ToFloat64(r.e.m.changes.WithLabelValues("board", "rs485"))
		co0 := testutil.ToFloat64(r.e.m.coalesced.WithLabelValues("board"))
		line0 := testutil.ToFloat64(r.e.m.lineTime.WithLabelValues("line0"))
		tick := time.NewTicker(dmxFrame)
		start := time.Now()
		maxWaiting := 0
		for i := 0; time.Since(start) < 3*time.Second; i++ {
			s := make([]byte, Slots)
			for _, f := range p.Fixtures {
				copy(s[f.Address-1:], []byte{255, byte(i), byte(i >> 8), 100, 0})
			}
			r.send(b, s, 0)
			r.e.mu.Lock()
			w := 0
			for _, t := range r.e.targets {
				if t.pending != nil {
					w++
				}
			}
			r.e.mu.Unlock()
			maxWaiting = max(maxWaiting, w)
			<-tick.C
		}
		tick.Stop()
		d := time.Since(start).Seconds()
		sent := testutil.ToFloat64(r.e.m.changes.WithLabelValues("board", "rs485")) - sent0
		per := (testutil.ToFloat64(r.e.m.lineTime.WithLabelValues("line0")) - line0) / sent
		capacity := DefaultLineShare / per
		b.ReportMetric(sent/d, "changes-per-s")
		b.ReportMetric(per*1000, "ms-per-change")
		b.ReportMetric(capacity, "capacity-per-s")
		b.ReportMetric(sent/d/capacity, "rate-vs-capacity-ratio")
		b.ReportMetric((testutil.ToFloat64(r.e.m.coalesced.WithLabelValues("board"))-co0)/d, "coalesced-per-s")
		b.ReportMetric(float64(maxWaiting), "max-waiting")
	}
}

// BenchmarkDMXSync: universe 1 latched (sACN sync address 1) over two
// lines of 4 boards (group 1 on line 0, group 5 on line 1, one group
// fixture each) and 8 LAN boards as single fixtures with aligned clocks;
// each sync packet releases a new look as one timed fire. Over benchLooks
// syncs it reports, as the timed-fire benchmark does (fleet's
// BenchmarkTimedFire): skew-lines-p99-µs (first to last change among the
// line boards), skew-all-p99-µs (all 16 boards), late-p99-µs (a change
// after the moment: the sync's arrival plus SyncLead), and the ratios
// skew-lines-vs-1ms-ratio and skew-all-vs-2ms-ratio (under 1 is met).
func BenchmarkDMXSync(b *testing.B) {
	r := newBenchRig(b, benchOptions{Lines: 2, PerLine: 4, LAN: 8, Groups: true, ClockEvery: 200 * time.Millisecond, SyncLead: DefaultSyncLead,
		Patch: func(bs []benchBoard) *Patch {
			p := &Patch{Fixtures: []Fixture{{Universe: 1, Address: 1, Profile: ProfileRGB, Group: 1}, {Universe: 1, Address: 6, Profile: ProfileRGB, Group: 5}}}
			n := 0
			for _, bb := range bs {
				if bb.lan {
					p.Fixtures = append(p.Fixtures, Fixture{Universe: 1, Address: 11 + 5*n, Profile: ProfileRGB, Board: bb.id})
					n++
				}
			}
			return p
		}})
	// Only group 1 (line 0) and group 5 (line 1) are patched: the other
	// line boards stay out of the figures.
	var boards []benchBoard
	for _, bb := range r.boards {
		if bb.lan || bb.group == 1 || bb.group == 5 {
			boards = append(boards, bb)
		}
	}
	p := r.e.Patch()
	r.sendSync(b, 1) // sync mode on
	b.ResetTimer()
	for range b.N {
		var skewLines, skewAll, late []time.Duration
		for i := range benchLooks {
			r.send(b, look(p, i), 1)
			waitLatched(b, r.e)
			at := r.sendSync(b, 1).Add(r.e.o.SyncLead)
			var lines, all []time.Time
			for _, bb := range boards {
				w, ok := bb.strip.Await(at.Add(-r.e.o.SyncLead), isLook(i), 10*time.Second)
				if !ok {
					b.Fatalf("board %s never changed", bb.id)
				}
				all = append(all, w.At)
				if !bb.lan {
					lines = append(lines, w.At)
				}
				late = append(late, w.At.Sub(at).Abs())
			}
			if testing.Verbose() && i < 5 {
				var offs []time.Duration
				for _, x := range all {
					offs = append(offs, x.Sub(at).Round(100*time.Microsecond))
				}
				b.Logf("sync %d: changes after the moment %v", i, offs)
			}
			skewLines, skewAll = append(skewLines, spread(lines)), append(skewAll, spread(all))
			time.Sleep(2 * r.e.o.SyncLead) // the next look after this fire
		}
		b.ReportMetric(float64(quantile(skewLines, .99).Microseconds()), "skew-lines-p99-µs")
		b.ReportMetric(float64(quantile(skewAll, .99).Microseconds()), "skew-all-p99-µs")
		b.ReportMetric(float64(quantile(late, .99).Microseconds()), "late-p99-µs")
		b.ReportMetric(float64(quantile(skewLines, .99))/float64(time.Millisecond), "skew-lines-vs-1ms-ratio")
		b.ReportMetric(float64(quantile(skewAll, .99))/float64(2*time.Millisecond), "skew-all-vs-2ms-ratio")
	}
}

func waitLatched(b *testing.B, e *Engine) {
	deadline := time.Now().Add(10 * time.Second)
	for !latched(e, 1) {
		if time.Now().After(deadline) {
			b.Fatal("the look was not latched")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func spread(ts []time.Time) time.Duration {
	lo, hi := ts[0], ts[0]
	for _, x := range ts[1:] {
		if x.Before(lo) {
			lo = x
		}
		if x.After(hi) {
			hi = x
		}
	}
	return hi.Sub(lo)
}
