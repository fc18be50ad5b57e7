package rs485

import (
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/gateway/logtest"
)

// TestLogKeys: the master's records name the line as transport, the bus
// address, and the board's id once GET /info gave it.
func TestLogKeys(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	b := startBoard(t, line, 4, nil)
	logs, log := logtest.New()
	_, sink := startMaster(t, line, Options{Addresses: addrs(5), PollInterval: 20 * time.Millisecond, Log: log})
	sink.Wait(t, 20*time.Second, "seen", func(s *recSink) bool { return s.SeenN["4"] == 1 })
	b.node.SetSilent(true)
	sink.Wait(t, 10*time.Second, "lost", func(s *recSink) bool { return len(s.LostWhy["4"]) == 1 })
	id := b.Board.Identity().ID
	logs.WantKeys(t, "rs485: board found", map[string]string{"transport": "rs485:test", "line": "rs485:test", "addr": "4"})
	logs.WantKeys(t, "rs485: board identified", map[string]string{"transport": "rs485:test", "addr": "4", "board": id})
	logs.WantKeys(t, "rs485: board lost", map[string]string{"transport": "rs485:test", "addr": "4", "board": id, "reason": "*"})
}
