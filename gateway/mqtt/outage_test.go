package mqtt_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
	"github.com/holofleet/holofleet/gateway/nettest"
)

// TestBrokerOutage kills the broker while boards keep reporting
// happenings, starts it again on the same port, and counts: every
// happening reaches MQTT, each board's in order of first arrival.
func TestBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	// up starts a broker on port (0: a free one, chosen by the broker's
	// own listen where it can, so no other process takes it in between)
	// and returns its kill and its port.
	cases := []struct {
		name string
		up   func(t *testing.T, port int) (kill func(), bound int)
	}{
		{"embedded", func(t *testing.T, port int) (func(), int) {
			br, err := broker.Start(broker.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), Anonymous: auth.RoleAdmin})
			if err != nil {
				t.Fatal(err)
			}
			_, p, _ := net.SplitHostPort(br.Addr())
			bound, err := strconv.Atoi(p)
			if err != nil {
				t.Fatalf("broker address %q: %v", br.Addr(), err)
			}
			var once sync.Once
			kill := func() { once.Do(func() { _ = br.Close() }) }
			t.Cleanup(kill)
			return kill, bound
		}},
		{"mosquitto", func(t *testing.T, port int) (func(), int) {
			if port == 0 {
				port = freePort(t)
			}
			cmd := startMosquitto(t, port)
			return func() { _ = cmd.Process.Signal(syscall.SIGKILL); _, _ = cmd.Process.Wait() }, port
		}},
	}
	t.Parallel()
	for _, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			kill, port := bc.up(t, 0)
			url := fmt.Sprintf("tcp://127.0.0.1:%d", port)
			// The bridge reaches the broker through a gate the test opens
			// once the recorder (connected directly) has subscribed on the
			// new broker: a message the bridge sends before that would
			// reach no subscriber, which is the test's doing, not a loss.
			g := nettest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", port))
			r := startRig(t, "tcp://"+g.Addr(), rigOptions{n: 3, lanOnly: true})
			rc := newRecorder(t, url, r.base+"/+/event/#")
			names := r.waitOnline(t)
			const perPhase = 20
			want := map[string][]uint16{}
			emit := func(n int) {
				for k := range n {
					for i := range r.infos {
						want[names[i]] = append(want[names[i]], r.emit(t, i, k%240))
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			count := func() map[string][]uint16 {
				got := map[string][]uint16{}
				seen := map[string]bool{}
				for _, m := range rc.all() {
					var v struct {
						Seq uint16 `json:"seq"`
					}
					if json.Unmarshal(m.Payload, &v) != nil {
						continue
					}
					key := m.Topic + "/" + strconv.Itoa(int(v.Seq))
					if seen[key] {
						continue // at-least-once: a repeat around the reconnect
					}
					seen[key] = true
					name := m.Topic[len(r.base)+1:]
					name = name[:len(name)-len("/event/touch")]
					got[name] = append(got[name], v.Seq)
				}
				return got
			}
			emit(perPhase) // broker up
			waitCount(t, rc, count, len(r.infos)*perPhase)
			g.Cut()
			kill()
			emit(perPhase) // broker down: the spool keeps them
			waitUntil(t, 20*time.Second, "the bridge to queue the happenings of the outage", func() bool {
				return r.bridge.Stats().Happenings >= uint64(len(r.infos)*2*perPhase)
			})
			bc.up(t, port) // the same port: the bridge and the proxy know it
			if !rc.until(20*time.Second, func([]rec) bool { return rc.subs.Load() >= 2 }) {
				t.Fatal("the recorder did not subscribe again")
			}
			g.Restore()
			emit(perPhase) // back up
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("bridge %+v; recorder connected %v", r.bridge.Stats(), rc.client.IsConnectionOpen())
				}
			})
			waitCount(t, rc, count, len(r.infos)*3*perPhase)
			got := count()
			for n, seqs := range want {
				if fmt.Sprint(got[n]) != fmt.Sprint(seqs) {
					t.Errorf("%s: got %v\nwant %v", n, got[n], seqs)
				}
			}
			st := r.bridge.Stats()
			t.Logf("stats %+v", st)
			if st.Spool.Dropped != 0 || st.Connects < 2 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func waitCount(t *testing.T, rc *recorder, count func() map[string][]uint16, n int) {
	t.Helper()
	total := func() int {
		k := 0
		for _, s := range count() {
			k += len(s)
		}
		return k
	}
	if !rc.until(40*time.Second, func([]rec) bool { return total() >= n }) {
		t.Fatalf("%d of %d happenings reached MQTT", total(), n)
	}
}
