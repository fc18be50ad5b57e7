package rs485

import (
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
)

// TestRhythmHoldsRereads: while group frames come every 91 ms (a desk
// changing a group fixture every fourth DMX frame), a member's re-read
// and a clock sample start only when they end before the next frame is
// expected (less the guard), or once that moment passed without one; a
// poll's follow-up (STATUS) is never held; a re-read held for
// GroupReread goes anyway (a rhythm leaving no gap); frames of one look
// written back to back are one beat. Under the injected clock.
func TestRhythmHoldsRereads(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const period = 91 * time.Millisecond
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	type step struct {
		at     time.Duration // since t0
		frame  bool          // a LEDs group frame to group 1 then
		needs  need          // else: the board's follow-ups then
		dirty  kinds
		wantOK bool // needy returns the board
	}
	// A held exchange costs 192 bytes at 115200 baud plus 2 ms: 18.7 ms.
	// The guard is period/8: 11.4 ms, so after a beat at T a re-read may
	// start until T+60.9 ms, and again from T+102.4 ms.
	beats := []step{{at: 0, frame: true}, {at: ms(0.5), frame: true}, {at: period, frame: true}, {at: period + ms(1), frame: true}}
	for _, tc := range []struct {
		name  string
		most  time.Duration // GroupReread
		steps []step
	}{
		{"no rhythm yet: a re-read goes", 0, []step{
			{at: 0, frame: true},
			{at: ms(80), dirty: kLEDs, wantOK: true},
		}},
		{"right after a beat: it goes", 0, append(beats,
			step{at: period + ms(2), dirty: kLEDs, wantOK: true},
			step{at: period + ms(60), needs: needClock, wantOK: true})},
		{"running into the next beat: held, then goes after the guard", 0, append(beats,
			step{at: period + ms(62), dirty: kLEDs},
			step{at: period + ms(95), needs: needAlign},
			step{at: 2*period + ms(11), dirty: kScenes},
			step{at: 2*period + ms(12), dirty: kLEDs, wantOK: true})},
		{"a poll's follow-up is not held", 0, append(beats,
			step{at: period + ms(80), needs: needPolled, dirty: kLEDs, wantOK: true},
			step{at: period + ms(80), needs: needFetch, wantOK: true})},
		{"the next beat reopens the wire", 0, append(beats,
			step{at: period + ms(85), dirty: kLEDs},
			step{at: 2 * period, frame: true},
			step{at: 2*period + ms(1), dirty: kLEDs, wantOK: true})},
		{"held for GroupReread: goes", 30 * time.Millisecond, []step{
			{at: 0, frame: true}, {at: ms(10), frame: true}, {at: ms(20), frame: true},
			{at: ms(21), dirty: kLEDs}, {at: ms(30), frame: true},
			{at: ms(40), frame: true}, {at: ms(51), dirty: kLEDs, wantOK: true},
			{at: ms(60), frame: true}, {at: ms(61), dirty: kLEDs}, // held afresh
		}},
		{"frames seconds apart keep no rhythm", 0, []step{
			{at: 0, frame: true}, {at: time.Second, frame: true},
			{at: 2*time.Second - ms(10), dirty: kLEDs, wantOK: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, b, clk := groupMember(Options{GroupReread: tc.most}, t0)
			for i, s := range tc.steps {
				clk.Set(t0.Add(s.at))
				if s.frame {
					l.afterGroup(frame.GroupAddress(1), kLEDs, groupSend{req: &frame.LEDsRequest{}}, clk.Now())
					continue
				}
				b.needs, b.dirty = s.needs, s.dirty
				if got := l.needy() == b; got != s.wantOK {
					t.Fatalf("step %d (%v, needs %b, dirty %b): needy gives the board %v, want %v", i, s.at, s.needs, s.dirty, got, s.wantOK)
				}
				if !s.wantOK && !l.sched.held {
					t.Fatalf("step %d: passed over without being held", i)
				}
			}
		})
	}
}
