package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

// streamFleet is a fleet.Service whose event stream the benchmark feeds.
type streamFleet struct {
	boards []fleet.BoardView
	ch     chan fleet.Event
}

func (s *streamFleet) Boards(fleet.Filter) []fleet.BoardView { return slices.Clone(s.boards) }
func (s *streamFleet) Board(id string) (fleet.BoardView, error) {
	for _, b := range s.boards {
		if b.ID == id {
			return b, nil
		}
	}
	return fleet.BoardView{}, fleet.ErrUnknownBoard
}
func (s *streamFleet) SetLabels(string, map[string]string) (fleet.BoardView, error) {
	return fleet.BoardView{}, fleet.ErrUnknownBoard
}
func (s *streamFleet) Call(context.Context, string, string, string, []byte) (fleet.Reply, error) {
	return fleet.Reply{}, fleet.ErrUnreachable
}
func (s *streamFleet) Do(context.Context, fleet.Selector, fleet.Action) ([]fleet.Result, error) {
	return nil, fleet.ErrUnreachable
}
func (s *streamFleet) Watch(ctx context.Context, _ fleet.Filter, _ uint64) *fleet.Watcher {
	return &fleet.Watcher{C: s.ch, Dropped: func() uint64 { return 0 }}
}

// benchBroker is the machine's Mosquitto, else an embedded broker.
func benchBroker(b *testing.B) (string, string) {
	if c, err := net.DialTimeout("tcp", mosquittoAddr, time.Second); err == nil {
		c.Close()
		return "tcp://" + mosquittoAddr, "mosquitto"
	}
	br, err := broker.Start(broker.Options{Addr: "127.0.0.1:0", Anonymous: auth.RoleAdmin})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close() })
	return br.URL(), "embedded"
}

// counter counts messages on a filter.
func counter(b *testing.B, url, filter string) (*atomic.Int64, func()) {
	var n atomic.Int64
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("bench-sub-%d-%d", os.Getpid(), time.Now().UnixNano())).
		SetOrderMatters(false).SetMessageChannelDepth(1 << 16)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	if tok := c.Subscribe(filter, 0, func(paho.Client, paho.Message) { n.Add(1) }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	return &n, func() { c.Disconnect(50) }
}

func waitN(b *testing.B, n *atomic.Int64, want int64) {
	deadline := time.Now().Add(120 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d arrived", n.Load(), want)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkMirror measures happenings per second the bridge mirrors to the
// broker (Mosquitto when it runs) against raw paho QoS 1 publishes of the
// same payloads to the same broker in the same run, each counted at a
// subscriber; mirror-ratio is bridge/raw (target at least 0.7).
func BenchmarkMirror(b *testing.B) {
	url, which := benchBroker(b)
	base := fmt.Sprintf("holobench-%d-%d", os.Getpid(), time.Now().UnixNano())
	const boards = 8
	sf := &streamFleet{ch: make(chan fleet.Event, 1<<16)}
	for i := range boards {
		sf.boards = append(sf.boards, fleet.BoardView{ID: fmt.Sprintf("b%02d", i), Hostname: fmt.Sprintf("bench-%02d", i),
			Online: true, Groups: []int{}, Labels: map[string]string{}})
	}
	br, err := mqtt.New(mqtt.Options{Fleet: sf, Broker: url, Base: base, HAPrefix: base + "-ha", SpoolMem: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = br.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	for !br.Stats().Connected {
		time.Sleep(5 * time.Millisecond)
	}
	n := max(b.N, 2000)
	data := json.RawMessage(`{"action":"down","x":120,"y":80,"seq":1,"t_ms":123456}`)
	events := make([]fleet.Event, n)
	for i := range events {
		events[i] = fleet.Event{N: uint64(i + 1), Board: sf.boards[i%boards].ID, Type: fleet.EventHappening, Kind: "touch",
			Seq: uint16(i/boards%65535 + 1), Data: data, Time: time.Now()}
	}
	// The same payloads, as the bridge would publish them.
	got, stop := counter(b, url, base+"/+/event/#")
	defer stop()
	rawGot, rawStop := counter(b, url, base+"-raw/#")
	defer rawStop()

	// Raw paho: publish every payload with QoS 1, then wait.
	pc := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(base + "-raw"))
	if tok := pc.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	defer pc.Disconnect(50)
	payload := []byte(`{"event_type":"touch","board":"b00","n":1,"time":"2026-01-02T03:04:05.123456Z","action":"down","x":120,"y":80,"seq":1,"t_ms":123456}`)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	toks := make([]paho.Token, 0, n)
	for i := range n {
		toks = append(toks, pc.Publish(fmt.Sprintf("%s-raw/bench-%02d/event/touch", base, i%boards), 1, false, payload))
	}
	for _, t := range toks {
		t.Wait()
	}
	waitN(b, rawGot, int64(n))
	raw := time.Since(t0)

	t1 := time.Now()
	for _, ev := range events {
		sf.ch <- ev
	}
	waitN(b, got, int64(n))
	ours := time.Since(t1)
	b.StopTimer()
	b.ReportMetric(float64(n)/ours.Seconds(), "happenings/s")
	b.ReportMetric(float64(n)/raw.Seconds(), "raw-publishes/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "mirror-ratio")
	b.Logf("%s: %d happenings in %v, raw %v", which, n, ours, raw)
}

// BenchmarkHappeningLatency measures the time from a simulated board's
// happening (its event hub) to its arrival at an MQTT subscriber, through
// the LAN driver, the fleet core and the bridge; reports p50 and p99.
func BenchmarkHappeningLatency(b *testing.B) {
	url, _ := benchBroker(b)
	r := startRig(b, url, rigOptions{n: 1, lanOnly: true})
	names := r.waitOnline(b)
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("lat-%d", time.Now().UnixNano()))
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	defer c.Disconnect(50)
	c.Subscribe(r.base+"/+/event/touch", 1, func(_ paho.Client, m paho.Message) {
		var v struct {
			Seq uint16 `json:"seq"`
		}
		_ = json.Unmarshal(m.Payload(), &v)
		mu.Lock()
		arrived[fmt.Sprintf("%s/%d", m.Topic(), v.Seq)] = time.Now()
		mu.Unlock()
	}).Wait()
	var lat []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		bd, _ := r.fm.Board(0)
		t0 := time.Now()
		h := bd.Current().Hub.Emit("touch", map[string]any{"action": "down", "x": i % 240, "y": 0})
		key := fmt.Sprintf("%s/%s/event/touch/%d", r.base, names[0], h.Seq)
		deadline := t0.Add(10 * time.Second)
		for {
			mu.Lock()
			at, ok := arrived[key]
			mu.Unlock()
			if ok {
				lat = append(lat, at.Sub(t0))
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("happening %s did not arrive", key)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
}
