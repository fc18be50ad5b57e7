package broker_test

import (
	"fmt"
	"sync"
	"testing"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// TestRetainedWhileSubscribing stores retained messages while wildcard
// subscriptions scan for them, as the broker does when one client
// publishes retained and another subscribes at the same moment. mochi
// v2.7.9 read the retained path without the lock its writer holds; the
// race detector caught it in gateway/mqtt (third_party/mochi-mqtt-server
// is the patched copy). Run with -race, which make test does.
func TestRetainedWhileSubscribing(t *testing.T) {
	t.Parallel()
	x := mochi.NewTopicsIndex()
	const rounds = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range rounds {
			topic := fmt.Sprintf("holo/%d/state", i%8)
			x.RetainMessage(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true},
				TopicName: topic, Payload: []byte("on")})
			if i%3 == 0 {
				x.RetainMessage(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true},
					TopicName: topic}) // an empty payload clears it
			}
		}
	})
	wg.Go(func() {
		for range rounds {
			for _, f := range []string{"holo/#", "holo/+/state", "holo/3/state"} {
				for _, pk := range x.Messages(f) {
					if string(pk.Payload) != "on" {
						t.Errorf("%s: retained %q, want on", f, pk.Payload)
					}
				}
			}
		}
	})
	wg.Wait()
}
