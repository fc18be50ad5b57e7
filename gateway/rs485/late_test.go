package rs485

import (
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
)

// TestLateDiscoveryAnswer: a board that answers its discovery PING after
// the wait (its reply heard while the master waits for the next address)
// is asked again at once, with the poll wait, and found then: not after
// the sweep has been over every other address and a slow sweep has come
// back to it.
func TestLateDiscoveryAnswer(t *testing.T) {
	line := newLine(t, simline.Faults{})
	sb := &scriptBoard{addr: 1, lateFirstPing: true}
	sb.start(t, line)
	var addrs []int
	for a := 1; a <= 30; a++ {
		addrs = append(addrs, a)
	}
	_, sink := startMaster(t, line, Options{Addresses: addrs})
	sink.Wait(t, 20*time.Second, "board 1 seen", func(s *recSink) bool { return s.SeenN["1"] > 0 })
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if len(sb.pings) < 2 || sb.pings[0] != 1 {
		t.Fatalf("PINGs on the line: %v", sb.pings)
	}
	again := slices.Index(sb.pings[1:], 1) + 1
	if again == 0 || slices.Contains(sb.pings[:again], addrs[len(addrs)-1]) {
		t.Fatalf("the late board was asked again only after the sweep (PINGs %v)", sb.pings)
	}
}
