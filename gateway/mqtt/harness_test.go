package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/logtest"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
	"github.com/holofleet/holofleet/gateway/rs485"
	"github.com/holofleet/holofleet/store"
)

// mosquittoAddr is the machine's Mosquitto (.ci/run starts it).
const mosquittoAddr = "127.0.0.1:1883"

// brokerCase is one broker the suite runs against.
type brokerCase struct {
	name  string
	start func(t *testing.T) string // returns the broker URL
}

// brokerCases are the embedded broker and the machine's Mosquitto.
func brokerCases() []brokerCase {
	return []brokerCase{
		{"embedded", func(t *testing.T) string {
			br, err := broker.Start(broker.Options{Addr: "127.0.0.1:0", Anonymous: auth.RoleAdmin})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = br.Close() })
			return br.URL()
		}},
		{"mosquitto", func(t *testing.T) string {
			c, err := net.DialTimeout("tcp", mosquittoAddr, time.Second)
			if err != nil {
				t.Skipf("no Mosquitto on %s (.ci/run starts one): %v", mosquittoAddr, err)
			}
			c.Close()
			return "tcp://" + mosquittoAddr
		}},
	}
}

// uniqueBase gives each test its own topic root so parallel runs on one
// Mosquitto do not meet.
func uniqueBase(t testing.TB) string {
	return fmt.Sprintf("holotest-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rec is one message a recorder received.
type rec struct {
	Topic    string
	Payload  []byte
	Retained bool
	At       time.Time
}

// recorder subscribes to a filter and keeps every message.
type recorder struct {
	t      *testing.T
	client paho.Client
	mu     sync.Mutex
	msgs   []rec
	// more is closed (and replaced) when a message arrives.
	more chan struct{}
	// subs counts the connections whose subscription is in place.
	subs atomic.Int32
}

func newRecorder(t *testing.T, url, filter string) *recorder {
	t.Helper()
	r := &recorder{t: t, more: make(chan struct{})}
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("rec-%d-%d", os.Getpid(), time.Now().UnixNano())).
		SetAutoReconnect(true).SetMaxReconnectInterval(100 * time.Millisecond).SetConnectRetry(true).
		SetConnectRetryInterval(50 * time.Millisecond).SetOrderMatters(true).SetCleanSession(true)
	o.SetOnConnectHandler(func(c paho.Client) {
		c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
			r.mu.Lock()
			r.msgs = append(r.msgs, rec{m.Topic(), append([]byte(nil), m.Payload()...), m.Retained(), time.Now()})
			close(r.more)
			r.more = make(chan struct{})
			r.mu.Unlock()
		}).Wait()
		r.mu.Lock()
		r.subs.Add(1)
		close(r.more)
		r.more = make(chan struct{})
		r.mu.Unlock()
	})
	r.client = paho.NewClient(o)
	if tok := r.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("recorder connect: %v", tok.Error())
	}
	t.Cleanup(func() { r.client.Disconnect(100) })
	return r
}

// all returns a copy of what was received.
func (r *recorder) all() []rec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rec(nil), r.msgs...)
}

// snapshot returns a copy of what was received and a channel closed when
// more arrives.
func (r *recorder) snapshot() ([]rec, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rec(nil), r.msgs...), r.more
}

// until waits until ok holds on what was received (checked again on every
// arrival) and reports whether it did before d ran out. The bound only
// ends a failing test: a passing one returns on the message it needs.
func (r *recorder) until(d time.Duration, ok func([]rec) bool) bool {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		msgs, more := r.snapshot()
		if ok(msgs) {
			return true
		}
		select {
		case <-more:
		case <-timeout.C:
			msgs, _ := r.snapshot()
			return ok(msgs)
		}
	}
}

// wait returns the first message (from the start) passing match.
func (r *recorder) wait(d time.Duration, what string, match func(rec) bool) rec {
	r.t.Helper()
	var got rec
	if !r.until(d, func(msgs []rec) bool {
		for _, m := range msgs {
			if match(m) {
				got = m
				return true
			}
		}
		return false
	}) {
		r.t.Fatalf("timed out waiting for %s", what)
	}
	return got
}

// last returns the last message on topic.
func (r *recorder) last(topic string) (rec, bool) { return lastOf(r.all(), topic) }

// lastOf returns the last message on topic in msgs.
func lastOf(msgs []rec, topic string) (rec, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Topic == topic {
			return msgs[i], true
		}
	}
	return rec{}, false
}

// waitLast waits until the last message on topic passes match.
func (r *recorder) waitLast(d time.Duration, topic string, match func(map[string]any) bool) map[string]any {
	r.t.Helper()
	var v map[string]any
	if !r.until(d, func(msgs []rec) bool {
		m, ok := lastOf(msgs, topic)
		v = nil
		return ok && json.Unmarshal(m.Payload, &v) == nil && match(v)
	}) {
		m, _ := r.last(topic)
		var seen []string
		for _, x := range r.all() {
			if x.Topic == topic {
				seen = append(seen, fmt.Sprintf("%s (retained %v, at %s)", x.Payload, x.Retained, x.At.Format("15:04:05.000")))
			}
		}
		r.t.Fatalf("timed out waiting on %s (last %s; all on it: %v)", topic, m.Payload, seen)
	}
	return v
}

// waitUntil polls a state that announces no change (the bridge's and
// the fleet's counters) until cond holds, or fails the test after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// publisher connects one client and returns what publishes through it
// (for floods: a connection per message costs more than the message).
func publisher(t *testing.T, url string) func(topic, payload string) {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("pub-%d-%d", os.Getpid(), time.Now().UnixNano()))
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(50) })
	return func(topic, payload string) {
		t.Helper()
		if tok := c.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
}

// publish sends a message as a client would.
func publish(t *testing.T, url, topic, payload string) {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("pub-%d-%d", os.Getpid(), time.Now().UnixNano()))
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	defer c.Disconnect(50)
	if tok := c.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
}

// rig is fleet-mode boards on a simulated line and the LAN, the real
// drivers and fleet core, and a bridge.
type rig struct {
	fm     *fleetmode.Fleet
	line   *simline.Line
	fleet  *fleet.Fleet
	db     *store.DB
	bridge *mqtt.Bridge
	base   string
	url    string
	infos  []fleetmode.Info
	cancel context.CancelFunc
	done   chan struct{}
}

type rigOptions struct {
	n       int
	lanOnly bool
	ota     bool // boards with the update service
	// opts tunes the bridge's options; r.fleet and r.db are set then.
	opts func(r *rig, o *mqtt.Options)
}

func startRig(t testing.TB, url string, ro rigOptions) *rig {
	t.Helper()
	if ro.n == 0 {
		ro.n = 4
	}
	r := &rig{base: uniqueBase(t), url: url, done: make(chan struct{})}
	fo := fleetmode.Options{N: ro.n, BaseDir: t.TempDir(), Groups: func(i int) []int { return []int{i%2 + 1} }}
	if ro.ota {
		fo.OTA = &fleetmode.OTAOptions{}
	}
	var drivers []fleet.Driver
	if !ro.lanOnly {
		line, err := simline.New(simline.Config{Baud: 115200})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { line.Close() })
		r.line, fo.Line = line, line
	}
	fm, err := fleetmode.Start(context.Background(), fo)
	if err != nil {
		t.Fatal(err)
	}
	r.fm = fm
	t.Cleanup(func() { fm.Stop() })
	if r.line != nil {
		master, err := r.line.Attach(simline.NodeOptions{Name: "gateway"})
		if err != nil {
			t.Fatal(err)
		}
		addrs := make([]int, ro.n+2)
		for i := range addrs {
			addrs[i] = i + 1
		}
		drivers = append(drivers, rs485.New(rs485.Options{Name: "line0", Port: master, Addresses: addrs}))
	}
	ld := lan.New(lan.Options{})
	r.infos = fm.Boards()
	for _, in := range r.infos {
		if err := ld.Add(in.URL, ""); err != nil {
			t.Fatal(err)
		}
	}
	drivers = append(drivers, ld)
	r.fleet = fleet.New(fleet.Options{Drivers: drivers})
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.db = db
	// The bridge's log goes with a failure's output: a bridge that
	// stopped connecting says why only there.
	logs, log := logtest.New()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge log:\n%s", logs.String())
		}
	})
	o := mqtt.Options{Fleet: r.fleet, Broker: url, Base: r.base, HAPrefix: r.base + "-ha", DB: db,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Log: log}
	if ro.opts != nil {
		ro.opts(r, &o)
	}
	if r.bridge, err = mqtt.New(o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.fleet.Run(ctx) })
	wg.Go(func() { _ = r.bridge.Run(ctx) })
	go func() { wg.Wait(); close(r.done) }()
	t.Cleanup(r.stop)
	return r
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
}

// waitOnline waits until every board is online in the fleet with its
// groups known, and returns the boards' topic names by index.
func (r *rig) waitOnline(t testing.TB) []string {
	t.Helper()
	waitUntil(t, 60*time.Second, "the boards online", func() bool {
		for _, in := range r.infos {
			v, err := r.fleet.Board(in.ID)
			if err != nil || !v.Online || r.line != nil && len(v.Groups) != len(in.Groups) || r.bridge.Name(in.ID) == "" {
				return false
			}
		}
		return true
	})
	names := make([]string, len(r.infos))
	for i, in := range r.infos {
		names[i] = r.bridge.Name(in.ID)
	}
	return names
}

// emit makes board i report a happening (a touch) now, and returns its seq.
func (r *rig) emit(t *testing.T, i, x int) uint16 {
	t.Helper()
	b, err := r.fm.Board(i)
	if err != nil {
		t.Fatal(err)
	}
	h := b.Current().Hub.Emit("touch", map[string]any{"action": "down", "x": x, "y": 1})
	return h.Seq
}

// startMosquitto runs a private mosquitto on port (for kill tests).
func startMosquitto(t *testing.T, port int) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/mosquitto"); err2 != nil {
			t.Skip("mosquitto not installed")
		}
		bin = "/usr/sbin/mosquitto"
	}
	conf := filepath.Join(t.TempDir(), "m.conf")
	if err := os.WriteFile(conf, []byte("listener "+strconv.Itoa(port)+" 127.0.0.1\nallow_anonymous true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("mosquitto did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}
