// Package logtest captures the records of a JSON slog handler in tests so
// they can check which keys a log record carries.
package logtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Capture collects the records of a JSON slog handler, one per line. It is
// safe for concurrent use.
type Capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// New returns a capture and a debug-level logger writing JSON into it.
func New() (*Capture, *slog.Logger) {
	c := &Capture{}
	return c, slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Write appends log output.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// String returns everything logged so far.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Find returns the first record with message msg, or nil.
func (c *Capture) Find(t testing.TB, msg string) map[string]any {
	t.Helper()
	for line := range strings.SplitSeq(c.String(), "\n") {
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

// WantKeys checks that the record msg exists with these key values ("*":
// present with any value).
func (c *Capture) WantKeys(t testing.TB, msg string, want map[string]string) {
	t.Helper()
	rec := c.Find(t, msg)
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
