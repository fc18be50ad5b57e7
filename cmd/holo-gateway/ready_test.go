package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
)

// waitReady polls /readyz until its status is want.
func waitReady(t *testing.T, base string, want int) api.Probe {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := get(t, base+"/readyz", "")
		var p api.Probe
		_ = json.Unmarshal([]byte(body), &p)
		if code == want {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz: %d %s, want %d", code, body, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyz: a gateway whose MQTT broker is unreachable is alive but not
// ready, and says mqtt is why; one with MQTT off is ready once its store
// and drivers are.
func TestReadyz(t *testing.T) {
	t.Parallel()
	base, _ := start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-lab", "--mqtt", noBroker)
	if code, body := get(t, base+"/healthz", ""); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("healthz: %d %s", code, body)
	}
	p := waitReady(t, base, 503)
	if p.Checks["store"] != "ok" || !strings.Contains(p.Checks["mqtt"], "not connected to the broker tcp://127.0.0.1:1") ||
		!strings.Contains(p.Message, "mqtt") || p.Error != "unavailable" {
		t.Errorf("not ready: %+v", p)
	}

	base, _ = start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-lab", "--no-mqtt")
	p = waitReady(t, base, 200)
	if p.Checks["store"] != "ok" || p.Checks["drivers"] != "ok" || p.Checks["mqtt"] != "" {
		t.Errorf("ready: %+v", p)
	}
}

// TestReadyzWithBroker: with the embedded broker the bridge connects and
// the gateway becomes ready.
func TestReadyzWithBroker(t *testing.T) {
	t.Parallel()
	base, _ := start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--insecure-lab", "--mqtt-port", "0")
	p := waitReady(t, base, 200)
	if p.Checks["mqtt"] != "ok" {
		t.Errorf("ready: %+v", p)
	}
}

// TestDriverStates: a driver whose Run has not begun, or has returned,
// makes the drivers check fail, naming it; the wrappers keep the drivers'
// other interfaces.
func TestDriverStates(t *testing.T) {
	s := &driverStates{}
	ln := s.line(rs485.New(rs485.Options{Name: "line0"}))
	ld := s.lan(lan.New(lan.Options{}))
	if _, ok := ln.(fleet.Line); !ok {
		t.Error("a tracked line is not a fleet.Line")
	}
	if _, ok := ld.(fleet.RawCaller); !ok {
		t.Error("the tracked LAN driver is not a fleet.RawCaller")
	}
	if err := s.ready(); err == nil || !strings.Contains(err.Error(), "rs485:line0 not started") || !strings.Contains(err.Error(), "lan not started") {
		t.Errorf("before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ld.Run(ctx, nil) }()
	// The line's port is nil: its Run cannot work; use a run that fails.
	_ = s.run(s.states[0], ctx, func(context.Context) error { return errors.New("port gone") })
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := s.ready()
		if err != nil && strings.Contains(err.Error(), "rs485:line0 stopped: port gone") && !strings.Contains(err.Error(), "lan") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a stop: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if err := s.ready(); err == nil || !strings.Contains(err.Error(), "lan stopped") {
		t.Errorf("after the LAN stopped: %v", err)
	}
}

// TestHealthCommand runs `holo-gateway health` against a running gateway
// as the container's HEALTHCHECK does: 0 when alive, 0 with --ready only
// when ready, 1 otherwise, 2 for a bad command line.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	base, _ := start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--mqtt", noBroker)
	waitReady(t, base, 503)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"health", "--url", base}, 0, `"ok"`},
		{[]string{"health", "--url", base + "/", "--ready"}, 1, "mqtt"},
		{[]string{"health", "--url", "http://127.0.0.1:1"}, 1, ""},
		{[]string{"health", "--nope"}, 2, ""},
		{[]string{"health", "extra"}, 2, ""},
	} {
		var out, errb syncBuffer
		if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%v: exit %d, out %q, err %q; want %d with %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
	base, _ = start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-mqtt")
	waitReady(t, base, 200)
	var out, errb syncBuffer
	if code := run(context.Background(), []string{"health", "--url", base, "--ready"}, &out, &errb); code != 0 {
		t.Errorf("ready gateway: exit %d %s %s", code, out.String(), errb.String())
	}
}
