package rs485

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
)

// TestLogKeys: the master's records name the line as transport, the bus
// address, and the board's id once GET /info gave it.
func TestLogKeys(t *testing.T) {
	line := newLine(t, simline.Faults{})
	b := startBoard(t, line, 4, nil)
	logs, log := newLogCapture()
	_, sink := startMaster(t, line, Options{Addresses: addrs(5), PollInterval: 20 * time.Millisecond, Log: log})
	sink.wait(t, 20*time.Second, "seen", func(s *recSink) bool { return s.seen["4"] == 1 })
	b.node.SetSilent(true)
	sink.wait(t, 10*time.Second, "lost", func(s *recSink) bool { return len(s.lost["4"]) == 1 })
	id := b.b.Identity().ID
	logs.wantKeys(t, "rs485: board found", map[string]string{"transport": "rs485:test", "line": "rs485:test", "addr": "4"})
	logs.wantKeys(t, "rs485: board identified", map[string]string{"transport": "rs485:test", "addr": "4", "board": id})
	logs.wantKeys(t, "rs485: board lost", map[string]string{"transport": "rs485:test", "addr": "4", "board": id, "reason": "*"})
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
