package fleet

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/logtest"
)

// TestLogKeys: a board going online, restarting, lost on one transport and
// offline is logged with its id, the driver, the place and a reason.
func TestLogKeys(t *testing.T) {
	logs, log := logtest.New()
	f := New(Options{Log: log})
	lanRef := Ref{Driver: "lan", Addr: "http://10.0.0.7"}
	lineRef := Ref{Driver: "rs485:line0", Addr: "7"}
	f.Seen(lanRef, json.RawMessage(`{"id":"b7","hostname":"holo-b7"}`))
	f.Seen(lineRef, json.RawMessage(`{"id":"b7","hostname":"holo-b7"}`))
	f.Restarted(lineRef)
	f.Lost(lineRef, "no reply to 3 polls")
	f.Lost(lanRef, "stream closed")

	logs.WantKeys(t, "fleet: board online", map[string]string{"board": "b7", "driver": "lan", "transport": "lan",
		"addr": "http://10.0.0.7", "reason": "new board"})
	logs.WantKeys(t, "fleet: board reachable on another transport", map[string]string{"board": "b7",
		"driver": "rs485:line0", "transport": "rs485:line0", "addr": "7", "reason": "*"})
	logs.WantKeys(t, "fleet: board restarted", map[string]string{"board": "b7", "driver": "rs485:line0",
		"transport": "rs485:line0", "addr": "7", "reason": "*"})
	logs.WantKeys(t, "fleet: board lost on one transport", map[string]string{"board": "b7", "driver": "rs485:line0",
		"addr": "7", "reason": "no reply to 3 polls"})
	logs.WantKeys(t, "fleet: board offline", map[string]string{"board": "b7", "driver": "lan", "transport": "lan",
		"addr": "http://10.0.0.7", "reason": "stream closed", "level": "WARN"})

	f.Seen(lanRef, json.RawMessage(`{"id":"b7"}`))
	if rec := logs.Find(t, "fleet: board online"); rec == nil {
		t.Fatal("no online record")
	}
	var back int
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"fleet: board online"`) && strings.Contains(line, `"reason":"answers again"`) &&
			strings.Contains(line, `"was":"stream closed"`) {
			back++
		}
	}
	if back != 1 {
		t.Errorf("%d records of the board answering again:\n%s", back, logs.String())
	}
}
