package lan

import (
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/logtest"
)

// TestLogKeys: the driver's records of a board found and lost name the
// transport and, once GET /info gave it, the board's id.
func TestLogKeys(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	p := newProxy(t, tb.Addr)
	logs, log := logtest.New()
	l, sink := startLAN(t, Options{Log: log})
	if err := l.Add("http://"+p.Addr(), ""); err != nil {
		t.Fatal(err)
	}
	ref := "http://" + p.Addr()
	sink.Wait(t, 10*time.Second, "seen", func(s *recSink) bool { return s.SeenN[ref] == 1 })
	p.Cut()
	sink.Wait(t, 10*time.Second, "lost", func(s *recSink) bool { return len(s.LostWhy[ref]) == 1 })
	id := tb.Board.Identity().ID
	logs.WantKeys(t, "lan: board found", map[string]string{"board": id, "transport": "lan", "url": ref})
	logs.WantKeys(t, "lan: board lost", map[string]string{"board": id, "transport": "lan", "url": ref, "reason": "*"})
}
