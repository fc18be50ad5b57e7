package mqtt_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

// TestAccept: with an external broker the bridge cannot tell who
// published, so Options.Accept caps what it takes: a command its role
// may not send is answered with the refusal and never runs.
func TestAccept(t *testing.T) {
	br, err := broker.Start(broker.Options{Addr: "127.0.0.1:0", Anonymous: auth.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	url := br.URL()
	const forbidden = "role does not allow"
	for i, tt := range []struct {
		accept, topic, payload string
		refused                bool
	}{
		{"operator", "bridge/request/rollout", `{"action":"create","plan":{},"transaction":"t"}`, true},
		{"operator", "bridge/request/call", `{"board":"bench-00","method":"POST","path":"/ota/pull","transaction":"t"}`, true},
		{"operator", "bridge/request/call", `{"board":"bench-00","method":"PATCH","path":"/leds","transaction":"t"}`, false},
		{"operator", "bench-00/set/update", `install`, true},
		{"operator", "bench-00/set/leds", `{"mode":"off"}`, false},
		{"viewer", "bench-00/set/leds", `{"mode":"off"}`, true},
		{"viewer", "bridge/request/boards", `{"transaction":"t"}`, false},
		{"none", "bridge/request/boards", `{"transaction":"t"}`, true},
		{"", "bridge/request/rollout", `{"action":"create","plan":{},"transaction":"t"}`, false},
		{"admin", "bench-00/set/update", `install`, false},
	} {
		t.Run(fmt.Sprintf("%02d-%s", i, tt.accept), func(t *testing.T) {
			base := uniqueBase(t)
			sf := &streamFleet{ch: make(chan fleet.Event), boards: []fleet.BoardView{{ID: "b00", Hostname: "bench-00",
				Online: true, Groups: []int{1}, Labels: map[string]string{}}}}
			b, err := mqtt.New(mqtt.Options{Fleet: sf, Broker: url, Base: base, HAPrefix: base + "-ha", Accept: tt.accept})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = b.Run(ctx) })
			defer func() { cancel(); wg.Wait() }()
			rc := newRecorder(t, url, base+"/#")
			rc.wait(10*time.Second, "bridge online", func(m rec) bool { return m.Topic == base+"/bridge/state" })
			publish(t, url, base+"/"+tt.topic, tt.payload)
			answer := base + "/bridge/event"
			if verb, ok := strings.CutPrefix(tt.topic, "bridge/request/"); ok {
				answer = base + "/bridge/response/" + verb
			}
			// Every case here gets an answer: the refusal, or what the
			// command met beyond it (no rollouts, an unreachable board).
			m := rc.wait(10*time.Second, "the answer", func(m rec) bool { return m.Topic == answer })
			if got := strings.Contains(string(m.Payload), forbidden); got != tt.refused {
				t.Errorf("Accept %q, %s %s: %s (want refused=%v)", tt.accept, tt.topic, tt.payload, m.Payload, tt.refused)
			}
		})
	}
	if _, err := mqtt.New(mqtt.Options{Fleet: &streamFleet{}, Broker: url, Accept: "root"}); err == nil {
		t.Error("Accept root was taken")
	}
}
