package ota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
)

// TestPullStallIsCut: a release site that sends the headers of a 200 kB
// image and 10 bytes, then nothing, no longer holds the long-operation
// lock: after the lock's idle timeout (the injected clock's) the session
// fails, saying so, and the lock is free.
func TestPullStallIsCut(t *testing.T) {
	img := testImage(t, "2.0.0", "holo-board", 200000)
	hang := make(chan struct{})
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(img)))
		_, _ = w.Write(img[:10])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	defer site.Close()
	defer close(hang)
	e := newEnv(t)
	e.svc.Close()
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	e.long.Idle, e.long.Clock = 3*time.Second, clk
	svc, err := New(Config{DataDir: e.dir, Running: 0, Expect: HostExpect(), Events: e.rec, Long: e.long, Clock: clk,
		Pull: PullConfig{Client: site.Client(), Current: "1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	url := site.URL + "/img.bin"
	if _, err := svc.Pull(context.Background(), PullRequest{URL: &url}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return svc.Session().Bytes == 10 })
	if !clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("the download never armed its watchdog")
	}
	if e.long.Holder() == "" {
		t.Fatal("the pull does not hold the lock")
	}
	clk.Advance(3 * time.Second)
	waitFor(t, func() bool { return svc.Session().State == StateFailed })
	if s := svc.Session(); s.Error == nil || !strings.Contains(*s.Error, "no bytes for 3s") || s.Bytes != 10 {
		t.Errorf("session %+v (error %v)", s, s.Error)
	}
	waitFor(t, func() bool { return e.long.Holder() == "" })
	if c := e.long.LastCut(); c == nil || c.What != "firmware pull" || c.Bytes != 10 {
		t.Errorf("cut %+v", c)
	}
	if got := strings.Join(e.rec.seen(), ","); !strings.HasSuffix(got, "downloading,failed") {
		t.Errorf("events %s", got)
	}
}
