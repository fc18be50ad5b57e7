package mqtt_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
)

// callFleet counts the calls commands make.
type callFleet struct {
	streamFleet
	calls atomic.Int64
}

func (c *callFleet) Call(context.Context, string, string, string, []byte) (fleet.Reply, error) {
	c.calls.Add(1)
	return fleet.Reply{Status: 200, Body: []byte(`{}`)}, nil
}

// TestRateLimit floods one board's set topic: only the burst and the
// rate reach the board, the rest are refused on bridge/event, and another
// board is not starved. The limiter runs on a fake clock: no time passes
// while the flood is handled, however slowly a loaded machine handles it,
// so exactly the burst passes; a second later exactly the rate does.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	url := brokerCases()[0].start(t)
	base := uniqueBase(t)
	cf := &callFleet{streamFleet: streamFleet{ch: make(chan fleet.Event),
		boards: []fleet.BoardView{{ID: "a1", Hostname: "a", Online: true}, {ID: "b1", Hostname: "b", Online: true}}}}
	clk := clock.NewFake(time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC))
	const rate, burst = 5, 5
	br, err := mqtt.New(mqtt.Options{Fleet: cf, Broker: url, Base: base, BoardRate: rate, TopicRate: rate, Burst: burst, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = br.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	rc := newRecorder(t, url, base+"/#")
	rc.waitLast(10*time.Second, base+"/a/availability", func(v map[string]any) bool { return v["state"] == "online" })
	pub := publisher(t, url)
	for range 60 {
		pub(base+"/a/set/leds", `{"mode":"solid"}`)
	}
	publish(t, url, base+"/b/set/leds", `{"mode":"solid"}`)
	handled := func(n int) {
		t.Helper()
		waitUntil(t, 20*time.Second, fmt.Sprintf("%d commands handled", n), func() bool {
			st := br.Stats()
			return st.Commands == uint64(n) && cf.calls.Load()+int64(st.RateLimited) == int64(n)
		})
	}
	handled(61)
	if allowed := cf.calls.Load() - 1; allowed != burst { // less b's one
		t.Errorf("%d of 60 reached board a with no time passing, want the burst (%d)", allowed, burst)
	}
	// A second later the buckets hold the rate's worth again.
	clk.Advance(time.Second)
	for range 20 {
		pub(base+"/a/set/leds", `{"mode":"solid"}`)
	}
	handled(81)
	if allowed := cf.calls.Load() - 1 - burst; allowed != rate {
		t.Errorf("%d of 20 reached board a a second later, want the rate (%d)", allowed, rate)
	}
	rc.wait(5*time.Second, "rate limit error", func(m rec) bool {
		return m.Topic == base+"/bridge/event" && strings.Contains(string(m.Payload), "rate limited")
	})
}
