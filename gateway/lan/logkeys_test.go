package lan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLogKeys: the driver's records of a board found and lost name the
// transport and, once GET /info gave it, the board's id.
func TestLogKeys(t *testing.T) {
	tb := startBoard(t, "", "127.0.0.1:0")
	p := newProxy(t, tb.addr)
	logs, log := newLogCapture()
	l, sink := startLAN(t, Options{Log: log})
	if err := l.Add(p.url(), ""); err != nil {
		t.Fatal(err)
	}
	ref := p.url()
	sink.wait(t, 10*time.Second, "seen", func(s *recSink) bool { return s.seen[ref] == 1 })
	p.cut()
	sink.wait(t, 10*time.Second, "lost", func(s *recSink) bool { return len(s.lost[ref]) == 1 })
	id := tb.b.Identity().ID
	logs.wantKeys(t, "lan: board found", map[string]string{"board": id, "transport": "lan", "url": ref})
	logs.wantKeys(t, "lan: board lost", map[string]string{"board": id, "transport": "lan", "url": ref, "reason": "*"})
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
