package broker_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	mochiauth "github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

// deliver publishes n state messages as (user, pass) and waits until a
// subscriber logged in as (subUser, subPass) to holo/# got them all; it
// returns the time taken.
func deliver(b *testing.B, url, user, pass, subUser, subPass string, n int) time.Duration {
	b.Helper()
	dial := func(u, p string, h paho.MessageHandler) paho.Client {
		o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("bench-%s-%d", u, time.Now().UnixNano())).
			SetUsername(u).SetPassword(p).SetOrderMatters(false).SetMessageChannelDepth(1 << 16)
		if h != nil {
			o.SetDefaultPublishHandler(h)
		}
		c := paho.NewClient(o)
		if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		return c
	}
	var got atomic.Int64
	sub := dial(subUser, subPass, func(paho.Client, paho.Message) { got.Add(1) })
	defer sub.Disconnect(50)
	if tok := sub.Subscribe("holo/#", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	pub := dial(user, pass, nil)
	defer pub.Disconnect(50)
	payload := []byte(`{"mode":"solid","colour":"#00ff00","brightness":40}`)
	start := time.Now()
	var last paho.Token
	for i := range n {
		last = pub.Publish(fmt.Sprintf("holo/b%02d/leds", i%64), 1, false, payload)
	}
	last.WaitTimeout(30 * time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for got.Load() < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered", got.Load(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
	return time.Since(start)
}

// BenchmarkDelivery measures messages per second from the bridge's login
// to a viewer through the embedded broker with its access control,
// against plain mochi letting everyone do everything, in the same run:
// access-ratio is ours/plain (1 means the checks cost nothing).
func BenchmarkDelivery(b *testing.B) {
	b.ReportAllocs()
	f := start(b, broker.Options{})
	plain := mochi.New(&mochi.Options{InlineClient: false})
	if err := plain.AddHook(new(mochiauth.AllowHook), nil); err != nil {
		b.Fatal(err)
	}
	tcp := listeners.NewTCP(listeners.Config{Type: listeners.TypeTCP, ID: "plain", Address: "127.0.0.1:0"})
	if err := plain.AddListener(tcp); err != nil {
		b.Fatal(err)
	}
	if err := plain.Serve(); err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	const n = 5000
	var ours, base time.Duration
	for b.Loop() {
		ours += deliver(b, f.b.URL(), gwUser, gwPass, "viewer", f.secrets["viewer"], n)
		base += deliver(b, "tcp://"+tcp.Address(), "", "", "", "", n)
	}
	b.ReportMetric(float64(n)*float64(b.N)/ours.Seconds(), "msgs/s")
	b.ReportMetric(base.Seconds()/ours.Seconds(), "access-ratio")
}
