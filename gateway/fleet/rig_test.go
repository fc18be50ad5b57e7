package fleet_test

import (
	"context"
	"image/color"
	"strconv"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
)

// rig is a show installation in one process: simulated RS485 lines with
// boards on them and boards on the LAN, every board in group 1 with its
// LED strip watched (boardtest.StripWatch: when it latched a frame), under
// the real line masters, LAN driver and fleet core.
type rig struct {
	f      *fleet.Fleet
	lines  []*simline.Line
	boards []rigBoard
}

type rigBoard struct {
	id    string
	lan   bool
	strip *boardtest.StripWatch
	proc  *boardtest.InProc
}

type rigOptions struct {
	Lines, PerLine, LAN int
	// ClockEvery is the LAN driver's clock alignment period (default
	// 200 ms, so that the clocks are sharp soon; negative: none, and the
	// gateway fires the LAN boards itself).
	ClockEvery      time.Duration
	FireUncertainty time.Duration
	// PollInterval of the lines (0: the default 100 ms).
	PollInterval time.Duration
	// LineClockEvery is the lines' clock alignment period (0: the
	// default 30 s).
	LineClockEvery time.Duration
	// ClockPPM, when set, gives board k (in the rig's order: the lines'
	// boards, then the LAN's) a crystal that many ppm off.
	ClockPPM func(k int) float64
}

const rigGroup = 1

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	if o.ClockEvery == 0 {
		o.ClockEvery = 200 * time.Millisecond
	}
	r := &rig{}
	var drivers []fleet.Driver
	for li := range o.Lines {
		line, err := simline.New(simline.Config{Baud: 115200})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { line.Close() })
		r.lines = append(r.lines, line)
		var addrs []int
		for a := 1; a <= o.PerLine; a++ {
			node, err := line.Attach(simline.NodeOptions{Name: "board" + strconv.Itoa(a)})
			if err != nil {
				t.Fatal(err)
			}
			s := link.DefaultSettings()
			s.Mode, s.Address, s.Groups = link.ModeRS485, a, []int{rigGroup}
			hw, strip := boardtest.WatchedHardware()
			p := boardtest.StartInProcess(t, boardtest.InProcOptions{Port: node, PortName: "rs485", Link: &s, Hardware: hw,
				Clock: rigClock(o, len(r.boards))})
			r.boards = append(r.boards, rigBoard{id: p.Board.Identity().ID, strip: strip, proc: p})
			addrs = append(addrs, a)
		}
		master, err := line.Attach(simline.NodeOptions{Name: "gateway"})
		if err != nil {
			t.Fatal(err)
		}
		drivers = append(drivers, rs485.New(rs485.Options{Name: "line" + strconv.Itoa(li), Port: master, Addresses: addrs,
			PollInterval: o.PollInterval, DiscoverWait: 150 * time.Millisecond, PollWait: 300 * time.Millisecond,
			ClockEvery: o.LineClockEvery}))
	}
	if o.LAN > 0 {
		ld := lan.New(lan.Options{ClockEvery: o.ClockEvery, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		for range o.LAN {
			s := link.DefaultSettings()
			s.Groups = []int{rigGroup}
			hw, strip := boardtest.WatchedHardware()
			p := boardtest.StartInProcess(t, boardtest.InProcOptions{Link: &s, Hardware: hw, Clock: rigClock(o, len(r.boards))})
			if err := ld.Add(p.URL, ""); err != nil {
				t.Fatal(err)
			}
			r.boards = append(r.boards, rigBoard{id: p.Board.Identity().ID, lan: true, strip: strip, proc: p})
		}
		drivers = append(drivers, ld)
	}
	r.f = fleet.New(fleet.Options{Drivers: drivers, FireUncertainty: o.FireUncertainty})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if b, ok := t.(*testing.B); ok {
		b.StopTimer()
		defer b.StartTimer()
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		ready := 0
		for _, b := range r.boards {
			v, err := r.f.Board(b.id)
			if err == nil && v.Online && len(v.Groups) == 1 && (!b.lan || o.ClockEvery < 0 ||
				v.Clock != nil && time.Duration(v.Clock.UncertaintyUS)*time.Microsecond <= fireUncertainty(o)) {
				ready++
			}
		}
		if ready == len(r.boards) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d boards ready", ready, len(r.boards))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// rigClock is board k's clock: the real one, or a crystal ClockPPM(k) off.
func rigClock(o rigOptions, k int) clock.Clock {
	if o.ClockPPM == nil {
		return nil
	}
	return clock.Skewed(clock.Real, o.ClockPPM(k))
}

func fireUncertainty(o rigOptions) time.Duration {
	if o.FireUncertainty > 0 {
		return o.FireUncertainty
	}
	return fleet.DefaultFireUncertainty
}

// colours alternates two colours a fire sets (loop given: the native
// LEDS frame goes on the lines), and how a strip's first pixel shows
// each (scaled by the brightness).
var colours = []struct {
	body string
	is   func(color.RGBA) bool
}{
	{`{"mode":"solid","colour":"#ff0000","loop":true}`, func(c color.RGBA) bool { return c.R > 0 && c.B == 0 }},
	{`{"mode":"solid","colour":"#0000ff","loop":true}`, func(c color.RGBA) bool { return c.B > 0 && c.R == 0 }},
}

// changes waits for every board's strip to latch colour i's frame at or
// after since and returns each board's moment, in r.boards' order.
func (r *rig) changes(t testing.TB, i int, since time.Time) []time.Time {
	t.Helper()
	out := make([]time.Time, len(r.boards))
	for k, b := range r.boards {
		w, ok := b.strip.Await(since, colours[i%2].is, 10*time.Second)
		if !ok {
			t.Fatalf("board %s (lan %v) never changed", b.id, b.lan)
		}
		out[k] = w.At
	}
	return out
}

// spread is the time from the earliest to the latest of ts.
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
