package broker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

// TestRetainedWhileSubscribing: the bridge stores retained messages while
// a client subscribes with wildcards over and over, as happens when Home
// Assistant starts while the gateway publishes board states. mochi looks
// the retained messages up without the lock it stores them under; the
// broker's hook serialises the two (retainlock.go). Without it the race
// detector (make test runs with -race) fails this test. Afterwards a new
// subscription gets every retained state, each the last one published.
func TestRetainedWhileSubscribing(t *testing.T) {
	f := start(t, broker.Options{})
	connect := func(user, pass string) paho.Client {
		t.Helper()
		o := paho.NewClientOptions().AddBroker(f.b.URL()).SetClientID(fmt.Sprint(user, time.Now().UnixNano())).
			SetUsername(user).SetPassword(pass).SetConnectTimeout(10 * time.Second)
		c := paho.NewClient(o)
		if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", user, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(50) })
		return c
	}
	gw := connect(gwUser, gwPass)
	viewer := connect("viewer", f.secrets["viewer"])

	const boards, rounds = 8, 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range rounds {
			for b := range boards {
				payload := fmt.Sprint("state-", r)
				if r%5 == 4 && r != rounds-1 {
					payload = "" // clears the retained message now and then
				}
				gw.Publish(fmt.Sprintf("holo/board%d/state", b), 1, true, payload).Wait()
			}
		}
	})
	wg.Go(func() {
		for range rounds {
			for _, filter := range []string{"holo/#", "holo/+/state"} {
				if tok := viewer.Subscribe(filter, 0, func(paho.Client, paho.Message) {}); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
					t.Errorf("subscribe %s: %v", filter, tok.Error())
					return
				}
				if tok := viewer.Unsubscribe(filter); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
					t.Errorf("unsubscribe %s: %v", filter, tok.Error())
					return
				}
			}
		}
	})
	wg.Wait()

	got := make(chan string, boards*2)
	late := connect("viewer", f.secrets["viewer"])
	late.Subscribe("holo/+/state", 1, func(_ paho.Client, m paho.Message) {
		got <- m.Topic() + "=" + string(m.Payload())
	})
	want := map[string]bool{}
	for b := range boards {
		want[fmt.Sprintf("holo/board%d/state=state-%d", b, rounds-1)] = true
	}
	for len(want) > 0 {
		select {
		case m := <-got:
			if !want[m] {
				t.Fatalf("retained %s, want the last state of each board (%d left)", m, len(want))
			}
			delete(want, m)
		case <-time.After(30 * time.Second):
			t.Fatalf("retained states missing: %v", want)
		}
	}
}
