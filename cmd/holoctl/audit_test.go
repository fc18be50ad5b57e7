package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/audit"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/store"
)

// startAuditGateway runs the API with an audit log; it returns the URL and
// the admin's and an operator's secrets.
func startAuditGateway(t *testing.T) (string, string, string) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, _ := toks.Create("admin", auth.RoleAdmin)
	op, _, _ := toks.Create("ops", auth.RoleOperator)
	log, err := audit.Open(audit.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Fleet: &stubFleet{}, Tokens: toks, Registerer: reg, Gatherer: reg, Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = srv.Serve(ctx, ln); done <- struct{}{} }()
	go func() { _ = log.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("gateway did not stop")
			}
		}
	})
	return "http://" + ln.Addr().String(), admin, op
}

func TestHoloctlAudit(t *testing.T) {
	url, admin, op := startAuditGateway(t)
	ctl := func(token string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{args[0], "--gateway", url, "--token-file", tokenFile(t, token)}, args[1:]...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, errOut := ctl(op, "gw", "call", "aa01", "POST", "/ota/pull", `{"url":"http://x"}`); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("operator OTA: %d %s", code, errOut)
	}
	if code, out, errOut := ctl(op, "gw", "do", "group:1", "leds", `{"mode":"rainbow"}`); code != 0 {
		t.Fatalf("operator action: %d %s %s", code, out, errOut)
	}
	code, out, errOut := ctl(admin, "audit")
	if code != 0 {
		t.Fatalf("audit: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") {
		t.Fatalf("audit table:\n%s", out)
	}
	// Newest first: the action, then the refused OTA call.
	for _, w := range []string{"ops (operator)", "DoAction [holoctl]", "leds", "groups=1", "allowed", "OK"} {
		if !strings.Contains(lines[1], w) {
			t.Errorf("first record lacks %q: %s", w, lines[1])
		}
	}
	for _, w := range []string{"CallBoard", "POST /ota/pull", "boards=aa01", "denied", "PermissionDenied", "127.0.0.1:"} {
		if !strings.Contains(lines[2], w) {
			t.Errorf("second record lacks %q: %s", w, lines[2])
		}
	}
	if _, out, _ := ctl(admin, "audit", "--outcome", "denied", "-o", "json"); !strings.Contains(out, `"call": "POST /ota/pull"`) || strings.Contains(out, "DoAction") {
		t.Errorf("denied records as JSON:\n%s", out)
	}
	if _, out, _ := ctl(admin, "audit", "--since", "1h", "--who", "nobody"); strings.Count(out, "\n") != 1 {
		t.Errorf("no records expected:\n%s", out)
	}
	if _, out, _ := ctl(admin, "audit", "--until", "2000-01-01T00:00:00Z"); strings.Count(out, "\n") != 1 {
		t.Errorf("no records expected before 2000:\n%s", out)
	}
	if code, _, errOut := ctl(op, "audit"); code != 1 || !strings.Contains(errOut, "403") {
		t.Errorf("operator reads the audit log: %d %s", code, errOut)
	}
	if code, _, _ := ctl(admin, "audit", "--since", "yesterday"); code != 2 {
		t.Errorf("bad --since: exit %d", code)
	}
	if code, _, errOut := ctl(admin, "audit", "--outcome", "maybe"); code != 1 || !strings.Contains(errOut, "400") {
		t.Errorf("bad outcome: %d %s", code, errOut)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 5, 8, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-05-01T10:00:00Z": time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC),
		"90s":                  now.Add(-90 * time.Second),
		"2h":                   now.Add(-2 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
	} {
		if got, err := parseWhen(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "x", "-1h", "-2d", "d"} {
		if _, err := parseWhen(bad, now); err == nil {
			t.Errorf("parseWhen(%q) accepted", bad)
		}
	}
}
