package rs485

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
)

// TestGroupRereadsMerged: a group taking a new look after every poll is
// read back far less often than it takes frames (at most once a
// GroupReread while they keep coming, and once more when they stop), yet
// the state reported keeps up: looks of the run reach the sink while the
// frames still come, and the last frame's look once they stop. A board
// outside the group is not read back for them.
func TestGroupRereadsMerged(t *testing.T) {
	line := newLine(t, simline.Faults{})
	startBoard(t, line, 1, []int{1})
	startBoard(t, line, 2, []int{1})
	startBoard(t, line, 3, []int{2})
	const reread = 600 * time.Millisecond
	l, sink := startMaster(t, line, Options{Addresses: addrs(3), GroupQuiet: 100 * time.Millisecond, GroupReread: reread, ClockEvery: -1})
	sink.Wait(t, 20*time.Second, "three boards with leds and link", func(s *recSink) bool {
		for a := 1; a <= 3; a++ {
			if s.States[fmt.Sprint(a)]["leds"] == nil || s.States[fmt.Sprint(a)]["link"] == nil {
				return false
			}
		}
		return true
	})
	afterPolls(t, l, 6) // the reads of the start are done
	sink.Mu.Lock()
	before := maps.Clone(sink.ChangedN)
	sink.Mu.Unlock()

	ctx := context.Background()
	colour := func(i int) string { return fmt.Sprintf("#%02x00c8", i+1) }
	const frames = 40
	start := time.Now()
	midway := false // a look of the run reported while frames still came
	for i := range frames {
		if err := l.Group(ctx, 1, &frame.LEDsRequest{Mode: frame.LEDSolid, R: uint8(i + 1), B: 200, Brightness: 50, Flags: frame.LEDNewColour}); err != nil {
			t.Fatal(err)
		}
		afterPolls(t, l, 1)
		sink.Mu.Lock()
		for j := range i {
			if fleetField(sink, "1", "leds", "colour") == colour(j) {
				midway = true
			}
		}
		sink.Mu.Unlock()
	}
	elapsed := time.Since(start)
	last := colour(frames - 1)
	sink.Wait(t, 10*time.Second, "the last look on boards 1 and 2", func(s *recSink) bool {
		return fleetField(s, "1", "leds", "colour") == last && fleetField(s, "2", "leds", "colour") == last
	})
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	bound := int(elapsed/reread) + 2
	for _, a := range []string{"1", "2"} {
		n := sink.ChangedN[a+"/leds"] - before[a+"/leds"]
		t.Logf("board %s: %d leds reads for %d frames in %v", a, n, frames, elapsed.Round(time.Millisecond))
		if n > bound {
			t.Errorf("board %s read back %d times for %d frames in %v, want at most %d (one a GroupReread, one at the end)", a, n, frames, elapsed, bound)
		}
	}
	if n := sink.ChangedN["3/leds"] - before["3/leds"]; n != 0 {
		t.Errorf("board 3, outside the group, read back %d times", n)
	}
	if elapsed > 3*reread && !midway {
		t.Errorf("no look of the run reported while %v of frames came (GroupReread %v)", elapsed, reread)
	}
}

// fleetField reads a field of a state the sink holds (its lock held).
func fleetField(s *recSink, addr, kind, name string) string {
	return field(s.States[addr][kind], name)
}

// TestGroupedDue: when the kinds group frames changed on a board are read
// back, under the injected clock (GroupQuiet 200 ms, GroupReread 1 s).
func TestGroupedDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type step struct {
		at    time.Duration // since t0
		frame bool          // a LEDs group frame to group 1 at that time
		poll  kinds         // else a status read that saw these kinds change
		want  kinds         // b.dirty after the poll
	}
	for _, tc := range []struct {
		name  string
		quiet time.Duration
		steps []step
	}{
		{"one frame: read once quiet", 0, []step{
			{at: 0, frame: true},
			{at: 100 * time.Millisecond, poll: kLEDs, want: 0},
			{at: 200 * time.Millisecond, want: kLEDs},
		}},
		{"frames keep coming: read a GroupReread after the first", 0, []step{
			{at: 0, frame: true},
			{at: 150 * time.Millisecond, frame: true},
			{at: 300 * time.Millisecond, frame: true},
			{at: 400 * time.Millisecond, want: 0},
			{at: 450 * time.Millisecond, frame: true},
			{at: 999 * time.Millisecond, frame: true},
			{at: 999 * time.Millisecond, want: 0},
			{at: 1000 * time.Millisecond, want: kLEDs},
			{at: 1100 * time.Millisecond, frame: true},
			{at: 1400 * time.Millisecond, want: 0}, // quiet, but read back 400 ms ago
			{at: 2000 * time.Millisecond, want: kLEDs},
		}},
		{"a change of another kind is read at once", 0, []step{
			{at: 0, frame: true},
			{at: 50 * time.Millisecond, poll: kScreen | kLEDs, want: kScreen},
		}},
		{"negative GroupQuiet: after the next poll, every time", -1, []step{
			{at: 0, frame: true},
			{at: 10 * time.Millisecond, want: kLEDs},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, b, clk := groupMember(Options{GroupQuiet: tc.quiet}, t0)
			for i, s := range tc.steps {
				clk.Set(t0.Add(s.at))
				if s.frame {
					l.afterGroup(frame.GroupAddress(1), kindsOfNative(frame.TypeLEDs), groupSend{req: &frame.LEDsRequest{}}, clk.Now())
					continue
				}
				before := b.dirty
				b.dirty |= s.poll
				b.dirty |= b.recheck
				b.recheck = 0
				l.groupedDue(b, before)
				if b.dirty != s.want {
					t.Fatalf("step %d (%v): dirty %04b, want %04b", i, s.at, b.dirty, s.want)
				}
				b.dirty = 0 // read
			}
		})
	}
}

// groupMember is a line on a fake clock at t0 (no wire) knowing one
// present board, at address 1 in group 1.
func groupMember(o Options, t0 time.Time) (*Line, *board, *clock.Fake) {
	clk := clock.NewFake(t0)
	o.Clock, o.Port, o.Addresses = clk, nopPort{}, []int{1}
	l := New(o)
	b := &board{addr: 1, present: true, groups: []int{1}}
	l.boards[1] = b
	return l, b, clk
}

// nopPort is a line no test reads or writes.
type nopPort struct{}

func (nopPort) Read([]byte) (int, error)    { select {} }
func (nopPort) Write(p []byte) (int, error) { return len(p), nil }
