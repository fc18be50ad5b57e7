package rs485

import (
	"context"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
)

// TestSlowLine: at 9600 baud, with the master's default waits, the
// boards are found, identified, read and polled, and answer calls. A
// follow-up in JSON lines used to wait PollWait (217 ms at 9600), less
// than a GET /info reply's wire time (some 600 ms): it timed out, asked
// again over the reply and never read a board.
func TestSlowLine(t *testing.T) {
	t.Parallel()
	line := newLineAt(t, 9600, simline.Faults{})
	for _, a := range []int{2, 3} {
		startBoard(t, line, a, nil)
	}
	l, sink := startMaster(t, line, Options{Baud: 9600, Addresses: addrs(4), PollWait: -1, DiscoverWait: -1})
	sink.Wait(t, 60*time.Second, "both boards read", func(s *recSink) bool {
		return len(s.SeenN) == 2 && s.States["2"]["leds"] != nil && s.States["3"]["leds"] != nil
	})
	afterPolls(t, l, 10)
	if _, err := l.Call(context.Background(), "3", "GET", "/info", nil); err != nil {
		t.Fatal(err)
	}
	// No exchange was asked again over a reply still on the wire.
	if c := line.Stats().Collisions; c != 0 {
		t.Errorf("%d bytes collided", c)
	}
	if st := l.Stats(); st.Garbage != 0 || st.BadCRC != 0 {
		t.Errorf("garbage %d, bad CRC %d on a quiet line", st.Garbage, st.BadCRC)
	}
}
