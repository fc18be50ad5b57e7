package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestLogKeys: a board going online, restarting, lost on one transport and
// offline is logged with its id, the driver, the place and a reason.
func TestLogKeys(t *testing.T) {
	logs, log := newLogCapture()
	f := New(Options{Log: log})
	lanRef := Ref{Driver: "lan", Addr: "http://10.0.0.7"}
	lineRef := Ref{Driver: "rs485:line0", Addr: "7"}
	f.Seen(lanRef, json.RawMessage(`{"id":"b7","hostname":"holo-b7"}`))
	f.Seen(lineRef, json.RawMessage(`{"id":"b7","hostname":"holo-b7"}`))
	f.Restarted(lineRef)
	f.Lost(lineRef, "no reply to 3 polls")
	f.Lost(lanRef, "stream closed")

	logs.wantKeys(t, "fleet: board online", map[string]string{"board": "b7", "driver": "lan", "transport": "lan",
		"addr": "http://10.0.0.7", "reason": "new board"})
	logs.wantKeys(t, "fleet: board reachable on another transport", map[string]string{"board": "b7",
		"driver": "rs485:line0", "transport": "rs485:line0", "addr": "7", "reason": "*"})
	logs.wantKeys(t, "fleet: board restarted", map[string]string{"board": "b7", "driver": "rs485:line0",
		"transport": "rs485:line0", "addr": "7", "reason": "*"})
	logs.wantKeys(t, "fleet: board lost on one transport", map[string]string{"board": "b7", "driver": "rs485:line0",
		"addr": "7", "reason": "no reply to 3 polls"})
	logs.wantKeys(t, "fleet: board offline", map[string]string{"board": "b7", "driver": "lan", "transport": "lan",
		"addr": "http://10.0.0.7", "reason": "stream closed", "level": "WARN"})

	f.Seen(lanRef, json.RawMessage(`{"id":"b7"}`))
	if rec := logs.find(t, "fleet: board online"); rec == nil {
		t.Fatal("no online record")
	}
	var back int
	for line := range strings.SplitSeq(logs.buf.String(), "\n") {
		if strings.Contains(line, `"msg":"fleet: board online"`) && strings.Contains(line, `"reason":"answers again"`) &&
			strings.Contains(line, `"was":"stream closed"`) {
			back++
		}
	}
	if back != 1 {
		t.Errorf("%d records of the board answering again:\n%s", back, logs.buf.String())
	}
}

// logCapture collects the records of a JSON slog handler.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLogCapture() (*logCapture, *slog.Logger) {
	c := &logCapture{}
	return c, slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// find returns the first record with message msg, or nil.
func (c *logCapture) find(t testing.TB, msg string) map[string]any {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for line := range strings.SplitSeq(c.buf.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}

// wantKeys checks that the record msg exists with these key values ("*":
// present with any value).
func (c *logCapture) wantKeys(t testing.TB, msg string, want map[string]string) {
	t.Helper()
	rec := c.find(t, msg)
	if rec == nil {
		t.Errorf("no %q record", msg)
		return
	}
	for k, v := range want {
		got, ok := rec[k]
		if !ok || v != "*" && fmt.Sprint(got) != v {
			t.Errorf("%q record: %s = %v, want %s (record %v)", msg, k, got, v, rec)
		}
	}
}
