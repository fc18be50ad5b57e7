package mqtt_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// board is not starved.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	url := brokerCases()[0].start(t)
	base := uniqueBase(t)
	cf := &callFleet{streamFleet: streamFleet{ch: make(chan fleet.Event),
		boards: []fleet.BoardView{{ID: "a1", Hostname: "a", Online: true}, {ID: "b1", Hostname: "b", Online: true}}}}
	br, err := mqtt.New(mqtt.Options{Fleet: cf, Broker: url, Base: base, BoardRate: 5, TopicRate: 5, Burst: 5})
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
	start := time.Now()
	for range 60 {
		pub(base+"/a/set/leds", `{"mode":"solid"}`)
	}
	elapsed := time.Since(start)
	publish(t, url, base+"/b/set/leds", `{"mode":"solid"}`)
	waitUntil(t, 20*time.Second, "61 commands handled", func() bool {
		st := br.Stats()
		return st.Commands == 61 && cf.calls.Load()+int64(st.RateLimited) == 61
	})
	allowed := cf.calls.Load() - 1 // b's one
	if max := int64(5 + 5*elapsed.Seconds() + 1); allowed > max || allowed < 5 {
		t.Errorf("%d of 60 reached board a in %v (at most %d)", allowed, elapsed, max)
	}
	rc.wait(5*time.Second, "rate limit error", func(m rec) bool {
		return m.Topic == base+"/bridge/event" && strings.Contains(string(m.Payload), "rate limited")
	})
}
