package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

var mqttLine = regexp.MustCompile(`mqtt:\s+embedded broker (tcp://\S+)`)

// TestDemoMQTT runs the demo with the embedded broker on a free port: the
// banner names it, the bridge says it is online, each demo board has its
// availability and Home Assistant discovery.
func TestDemoMQTT(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	_, out := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "1", "--mqtt-port", "0", "--mqtt-base", "demo-holo", "--ha-prefix", "demo-ha")
	m := mqttLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no MQTT line in the banner:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "clients without credentials are operator (loopback only)") {
		t.Errorf("the banner does not say who may connect without credentials:\n%s", out.String())
	}
	var mu sync.Mutex
	got := map[string]string{}
	o := paho.NewClientOptions().AddBroker(m[1]).SetClientID(fmt.Sprintf("t-%d", os.Getpid()))
	o.SetOnConnectHandler(func(c paho.Client) {
		c.SubscribeMultiple(map[string]byte{"demo-holo/#": 1, "demo-ha/#": 1}, func(_ paho.Client, msg paho.Message) {
			mu.Lock()
			got[msg.Topic()] = string(msg.Payload())
			mu.Unlock()
		})
	})
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(50)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		online, avail, disc := got["demo-holo/bridge/state"] == `{"state":"online"}`, 0, 0
		for k, v := range got {
			if strings.HasSuffix(k, "/availability") && strings.Contains(v, `"online"`) {
				avail++
			}
			if strings.HasPrefix(k, "demo-ha/device/") && k != "demo-ha/device/holo_show/config" {
				disc++
			}
		}
		// The demo's show has its GO button (docs/show.md).
		show := strings.Contains(got["demo-ha/device/holo_show/config"], `"GO demo"`)
		mu.Unlock()
		if online && avail == 2 && disc == 2 && show {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge online %v, boards online %d, discovery %d, the show's button %v", online, avail, disc, show)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The bridge has the rollout engine: the rollout request answers.
	if tok := c.Publish("demo-holo/bridge/request/rollout", 1, false, `{"action":"list","transaction":"w"}`); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	for {
		mu.Lock()
		resp := got["demo-holo/bridge/response/rollout"]
		mu.Unlock()
		if strings.Contains(resp, `"transaction":"w"`) {
			if !strings.Contains(resp, `"status":"ok"`) || !strings.Contains(resp, `"data":[]`) {
				t.Fatalf("rollout list response %s", resp)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rollout response (%q)", resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMQTTFlags checks the MQTT flags' bad values fail as usage errors
// before anything starts, even while the embedded broker's default port
// is taken (a gateway used to skip MQTT there, never looked at the bad
// flag, and served until the test timed out).
func TestMQTTFlags(t *testing.T) {
	holdDefaultBrokerPort(t)
	for _, args := range [][]string{
		{"--mqtt-base", "a/+/b"},
		{"--ha-prefix", "$SYS"},
		{"--mqtt", "gopher://x:1"},
		{"--mqtt", "ssl://127.0.0.1:1", "--mqtt-cert", "only-cert.pem"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-update-channel", "Not A Channel"},
		{"--mqtt-update-channel", "Not A Channel"},
		{"--mqtt-port", "seventy"},
		{"--mqtt-port", "127.0.0.1:99999"},
		{"--line", "gopher://nowhere"},
		{"--line", "serial:///dev/ttyX?baud=fast"},
		{"--listen", "no-port"},
		{"--mqtt-port", "0", "--mqtt-user", "shared"},
		{"--mqtt-port", "0", "--mqtt-password", "shared"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-password", "shared"},
		{"--mqtt", "tcp://holo:shared@127.0.0.1:1"},
		{"--mqtt-port", "0", "--mqtt-accept", "root"},
		{"--mqtt-port", "0", "--mqtt-accept", ""},
		{"--mqtt-port", "0", "--mqtt-anonymous", "god"},
		{"--mqtt-port", "0.0.0.0:0", "--mqtt-anonymous", "viewer"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-password-file", "/nonexistent/password"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-password-file", "/dev/null"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-anonymous", "viewer"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-allow-anonymous-remote"},
	} {
		var out, errb syncBuffer
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		start := time.Now()
		code := run(ctx, append([]string{"--data", t.TempDir(), "--listen", "127.0.0.1:0"}, args...), &out, &errb)
		cancel()
		if code != 2 || errb.String() == "" {
			t.Errorf("%v: exit %d %s", args, code, errb.String())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: took %v to refuse", args, d)
		}
		if strings.Contains(out.String(), "API:") {
			t.Errorf("%v: started before refusing:\n%s", args, out.String())
		}
	}
}

// TestDefaultBrokerPortTaken: with the embedded broker's default port
// taken and no MQTT flag, the gateway exits at once with an error that
// names the ways out, instead of running without MQTT.
func TestDefaultBrokerPortTaken(t *testing.T) {
	holdDefaultBrokerPort(t)
	var out, errb syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	code := run(ctx, []string{"--data", t.TempDir(), "--listen", "127.0.0.1:0"}, &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	for _, want := range []string{"--mqtt-port", "--no-mqtt", strconv.Itoa(defaultBrokerPort)} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("error does not name %s: %s", want, errb.String())
		}
	}
	// --no-mqtt is a way out.
	_, banner := start(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--no-mqtt")
	if !strings.Contains(banner.String(), "mqtt:     off (--no-mqtt)") {
		t.Errorf("banner: %s", banner.String())
	}
}

// holdDefaultBrokerPort takes a free loopback port and makes it the
// embedded broker's default for the test, as `make run` holds 1884.
func holdDefaultBrokerPort(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	old := defaultBrokerPort
	defaultBrokerPort = ln.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { defaultBrokerPort = old })
}

// TestMQTTAcceptDefault: with an external broker the bridge takes
// commands as an operator unless told; the banner says so.
func TestMQTTAcceptDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "commands taken as operator (--mqtt-accept)"},
		{[]string{"--mqtt-accept", "admin"}, "commands taken as admin (--mqtt-accept)"},
	} {
		_, out := start(t, append([]string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--mqtt", "tcp://127.0.0.1:1"}, tt.args...)...)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), tt.want) {
			if time.Now().After(deadline) {
				t.Fatalf("%v: banner without %q:\n%s", tt.args, tt.want, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestMQTTSubscriptionLimitFlags: the embedded broker's subscription
// limits have flags, with the broker's defaults.
func TestMQTTSubscriptionLimitFlags(t *testing.T) {
	o, err := parseServe([]string{"--data", t.TempDir()}, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l := o.mq.limits; l.MaxSubscriptions != broker.DefaultMaxSubscriptions || l.MaxFilters != broker.DefaultMaxFilters ||
		l.MaxSubscriptionsTotal != broker.DefaultMaxSubscriptionsTotal {
		t.Errorf("defaults %+v", l)
	}
	o, err = parseServe([]string{"--data", t.TempDir(), "--mqtt-max-subscriptions", "7", "--mqtt-max-filters", "3",
		"--mqtt-max-subscriptions-total", "70"}, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l := o.mq.limits; l.MaxSubscriptions != 7 || l.MaxFilters != 3 || l.MaxSubscriptionsTotal != 70 {
		t.Errorf("flags %+v", l)
	}
}
