package cluster_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// mosquittoAddr is the machine's Mosquitto (.ci/run starts it).
const mosquittoAddr = "127.0.0.1:1883"

// mqttWatch records every message under some filters of one broker,
// keeping each topic's last payload.
type mqttWatch struct {
	t      *testing.T
	client paho.Client
	mu     sync.Mutex
	last   map[string][]byte
	all    []mqttMsg
}

type mqttMsg struct {
	topic   string
	payload []byte
}

func watchMQTT(t *testing.T, broker string, filters ...string) *mqttWatch {
	t.Helper()
	w := &mqttWatch{t: t, last: map[string][]byte{}}
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(fmt.Sprintf("clustertest-%d-%d", os.Getpid(), time.Now().UnixNano())).
		SetCleanSession(true).SetOrderMatters(true)
	w.client = paho.NewClient(o)
	if tok := w.client.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt connect %s: %v", broker, tok.Error())
	}
	t.Cleanup(func() { w.client.Disconnect(100) })
	subs := map[string]byte{}
	for _, f := range filters {
		subs[f] = 1
	}
	tok := w.client.SubscribeMultiple(subs, func(_ paho.Client, m paho.Message) {
		w.mu.Lock()
		defer w.mu.Unlock()
		p := append([]byte(nil), m.Payload()...)
		w.last[m.Topic()] = p
		w.all = append(w.all, mqttMsg{m.Topic(), p})
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt subscribe: %v", tok.Error())
	}
	return w
}

// get decodes topic's last payload into v; false when there is none.
func (w *mqttWatch) get(topic string, v any) bool {
	w.mu.Lock()
	p, ok := w.last[topic]
	w.mu.Unlock()
	return ok && len(p) > 0 && json.Unmarshal(p, v) == nil
}

// since returns the messages on topic received after mark (a count of
// messages, from mark()).
func (w *mqttWatch) since(mark int, topic string) [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out [][]byte
	for _, m := range w.all[mark:] {
		if m.topic == topic {
			out = append(out, m.payload)
		}
	}
	return out
}

func (w *mqttWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.all)
}

func (w *mqttWatch) publish(topic, payload string) {
	w.t.Helper()
	if tok := w.client.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		w.t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// dupWindow is how long a test looks for a second answer after the first
// (an absence cannot be waited for; this bounds the looking).
const dupWindow = 500 * time.Millisecond

// request publishes a bridge request and returns every response carrying
// its transaction within settle after the first (answered once: one).
func (w *mqttWatch) request(base, verb, body string, settle time.Duration) []map[string]any {
	w.t.Helper()
	tx := fmt.Sprintf("tx-%d", time.Now().UnixNano())
	m := map[string]any{}
	if body != "" {
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			w.t.Fatal(err)
		}
	}
	m["transaction"] = tx
	b, _ := json.Marshal(m)
	mark := w.mark()
	w.publish(base+"/bridge/request/"+verb, string(b))
	var got []map[string]any
	deadline := time.Now().Add(slack * 15 * time.Second)
	for time.Now().Before(deadline) {
		got = got[:0]
		for _, p := range w.since(mark, base+"/bridge/response/"+verb) {
			var r map[string]any
			if json.Unmarshal(p, &r) == nil && r["transaction"] == tx {
				got = append(got, r)
			}
		}
		if len(got) > 0 {
			time.Sleep(settle)
			deadline = time.Now() // one more pass takes late duplicates
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	got = got[:0]
	for _, p := range w.since(mark, base+"/bridge/response/"+verb) {
		var r map[string]any
		if json.Unmarshal(p, &r) == nil && r["transaction"] == tx {
			got = append(got, r)
		}
	}
	return got
}

// boardInfo is a board's <b>/info as the bridges publish it.
type boardInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Online  bool   `json:"online"`
	Gateway string `json:"gateway"`
	Groups  []int  `json:"groups"`
}

// TestClusterMQTT runs three gateways of a cluster (hub runs the engine;
// gw2 joins through a proxy) sharing one base topic on the machine's
// Mosquitto, with a LAN board given to gw1 and gw2. Each gateway's bridge
// mirrors only the boards it owns, under its own state topic; requests
// are answered once, for the whole installation; a group command reaches
// every member once; board commands reach the board through its owner.
// Cut off from the engine, gw2 goes on serving its boards over MQTT. When
// gw1 dies the shared board and the answering move to gw2, discovery
// naming gw2.
func TestClusterMQTT(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	t.Parallel()
	if c, err := net.DialTimeout("tcp", mosquittoAddr, time.Second); err != nil {
		t.Skipf("no Mosquitto on %s (.ci/run starts one): %v", mosquittoAddr, err)
	} else {
		c.Close()
	}
	base := fmt.Sprintf("holoclu-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	ha := base + "-ha"
	broker := "tcp://" + mosquittoAddr
	w := watchMQTT(t, broker, base+"/#", ha+"/#")
	mq := []string{"--no-mqtt=false", "--mqtt", broker, "--mqtt-base", base, "--ha-prefix", ha}

	hubSite, site1, site2, shared := startSite(t, 2, 0), startSite(t, 2, 0), startSite(t, 2, 0), startSite(t, 0, 1)
	hub := startGateway(t, "hub", "embedded", hubSite, mq...)
	gw1 := startGateway(t, "gw1", hub.join, site1, append(mq, "--board", shared.lanURLs[0])...)
	ju, err := url.Parse(strings.Split(hub.join, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, ju.Host)
	gw2URL := "nats://" + ju.User.String() + "@" + strings.TrimPrefix(px.URL(), "nats://")
	owner := map[string]string{shared.lanURLs[0]: "gw1"}
	lines := map[string]bool{}
	for g, s := range map[string]*site{"hub": hubSite, "gw1": site1, "gw2": site2} {
		for _, u := range s.lineURLs {
			owner[u], lines[u] = g, true
		}
	}
	tc := &testCluster{gws: []*gwProc{hub, gw1}, owner: map[string]string{}, lines: lines}
	for u, g := range owner {
		if g != "gw2" {
			tc.owner[u] = g
		}
	}
	tc.waitListing(t, 30*time.Second) // gw1 owns the shared board before gw2 reaches it
	gw2 := startGateway(t, "gw2", gw2URL, site2, append(mq, "--board", shared.lanURLs[0])...)
	tc.gws, tc.owner = append(tc.gws, gw2), owner
	boards := tc.waitListing(t, 30*time.Second)
	byURL := map[string]boardJSON{}
	for _, b := range boards {
		byURL[b.URL] = b
	}
	sharedID := byURL[shared.lanURLs[0]].ID
	t.Logf("%d boards; the shared board %s is gw1's", len(boards), sharedID)

	// Every board mirrored by its owner: <b>/info names the owner, each
	// gateway's own list holds its boards and no other's, discovery names
	// the owner's bridge.
	names := map[string]string{} // id -> topic name
	eventually(t, 20*time.Second, "every bridge's state and boards", func() error {
		for _, g := range []string{"hub", "gw1", "gw2"} {
			var st struct {
				State, Gateway string
				Partitioned    bool
			}
			if !w.get(base+"/bridge/gateway/"+g+"/state", &st) || st.State != "online" || st.Gateway != g || st.Partitioned {
				return fmt.Errorf("%s state %+v", g, st)
			}
			var list []boardInfo
			if !w.get(base+"/bridge/gateway/"+g+"/boards", &list) {
				return fmt.Errorf("no boards list of %s", g)
			}
			var want, have []string
			for _, b := range boards {
				if b.Gateway == g {
					want = append(want, b.ID)
				}
			}
			for _, e := range list {
				have = append(have, e.ID)
				names[e.ID] = e.Name
				if e.Gateway != g {
					return fmt.Errorf("%s lists %+v", g, e)
				}
			}
			if !slices.Equal(want, have) {
				return fmt.Errorf("%s lists %v, owns %v", g, have, want)
			}
		}
		var all []boardInfo
		if !w.get(base+"/bridge/boards", &all) || len(all) != len(boards) {
			return fmt.Errorf("bridge/boards %+v", all)
		}
		for _, b := range boards {
			var info boardInfo
			if !w.get(base+"/"+names[b.ID]+"/info", &info) || info.Gateway != b.Gateway || !info.Online {
				return fmt.Errorf("%s/info %+v, owner %s", names[b.ID], info, b.Gateway)
			}
			var avail struct{ State, Gateway string }
			if !w.get(base+"/"+names[b.ID]+"/availability", &avail) || avail.State != "online" || avail.Gateway != b.Gateway {
				return fmt.Errorf("%s/availability %+v", names[b.ID], avail)
			}
			if err := discoveryNames(w, ha, b.ID, base, b.Gateway); err != nil {
				return err
			}
		}
		return nil
	})
	// The per-board metrics: each board exported by its owner only, with
	// the owner's name (gw2 stands by for the shared board).
	series := func(g *gwProc) string { _, m := get(g.base() + "/metrics"); return m }
	sharedSeries := `holo_gateway_board_online{board="` + sharedID + `",gateway=`
	eventually(t, 15*time.Second, "gw1's metrics export the shared board", func() error {
		if m := series(gw1); !strings.Contains(m, sharedSeries+`"gw1"} 1`) {
			return fmt.Errorf("gw1's metrics lack %sgw1", sharedSeries)
		}
		return nil
	})
	if m := series(gw2); strings.Contains(m, sharedSeries) {
		t.Errorf("gw2 exports the shared board it stands by for")
	}
	w.mu.Lock()
	_, single := w.last[base+"/bridge/state"]
	w.mu.Unlock()
	if single {
		t.Errorf("a clustered bridge published %s/bridge/state", base)
	}

	// Requests are answered once, for the whole installation.
	rs := w.request(base, "boards", "", dupWindow)
	if len(rs) != 1 {
		t.Fatalf("boards request: %d responses, want 1", len(rs))
	}
	if data, _ := rs[0]["data"].([]any); len(data) != len(boards) {
		t.Errorf("boards request lists %d boards, want %d: %v", len(data), len(boards), rs[0])
	}
	// Group 2 is the second line board of each gateway (a LAN board's
	// groups are read later: the shared board's may not be known yet).
	var group2 []string
	for _, b := range boards {
		if slices.Contains(b.Groups, 2) {
			group2 = append(group2, b.ID)
		}
	}
	if len(group2) != 3 {
		t.Fatalf("group 2: %v, want a board behind each gateway", group2)
	}
	rs = w.request(base, "do", `{"selector":{"groups":[2]},"action":{"kind":"leds","body":{"mode":"solid","brightness":41}}}`, dupWindow)
	if len(rs) != 1 || rs[0]["status"] != "ok" {
		t.Fatalf("do request: %v", rs)
	}
	var done []string
	for _, r := range rs[0]["data"].([]any) {
		m := r.(map[string]any)
		if m["error"] != nil {
			t.Errorf("do result %v", m)
		}
		done = append(done, m["id"].(string))
	}
	slices.Sort(done)
	if !slices.Equal(done, group2) {
		t.Errorf("do on group 2: results for %v, want each of %v once", done, group2)
	}

	// A group command reaches every member, behind every gateway.
	mark := w.mark()
	w.publish(base+"/group/2/set/leds", `{"mode":"solid","brightness":33}`)
	for _, b := range boards {
		if slices.Contains(b.Groups, 2) {
			waitLEDs(t, b, 33)
		}
	}
	// A board command through its owner; an unknown board is reported
	// once.
	var hubBoard boardJSON
	for _, b := range boards {
		if b.Gateway == "hub" {
			hubBoard = b
		}
	}
	w.publish(base+"/"+names[hubBoard.ID]+"/set/leds", `{"brightness":27}`)
	waitLEDs(t, hubBoard, 27)
	w.publish(base+"/nosuchboard/set/leds", `{"brightness":27}`)
	// Reported once: by the bridge that leads, whichever that is (the
	// first by name among those alive, as each sees the heartbeats).
	errs := func() []string {
		var out []string
		for _, p := range w.since(mark, base+"/bridge/event") {
			var e struct{ Type, Topic, Gateway, Error string }
			if json.Unmarshal(p, &e) == nil && e.Type == "command_error" {
				out = append(out, e.Gateway+": "+e.Topic+": "+e.Error)
			}
		}
		return out
	}
	eventually(t, 15*time.Second, "the command error about nosuchboard", func() error {
		if len(errs()) == 0 {
			return fmt.Errorf("none")
		}
		return nil
	})
	time.Sleep(dupWindow) // a second report would come now
	if es := errs(); len(es) != 1 || !strings.Contains(es[0], "nosuchboard") {
		t.Errorf("command errors %q, want one, about nosuchboard", es)
	}

	// gw2 cut off from the engine: its state says so, it goes on serving
	// its boards over MQTT, and gw1 still answers.
	px.cut()
	eventually(t, 15*time.Second, "gw2 says it is partitioned", func() error {
		var st struct {
			State       string
			Partitioned bool
		}
		if !w.get(base+"/bridge/gateway/gw2/state", &st) || st.State != "online" || !st.Partitioned {
			return fmt.Errorf("gw2 state %+v", st)
		}
		return nil
	})
	for _, b := range boards {
		if b.Gateway == "gw2" {
			w.publish(base+"/"+names[b.ID]+"/set/leds", `{"brightness":61}`)
			waitLEDs(t, b, 61)
			eventually(t, 15*time.Second, "partitioned gw2's board "+b.ID+" online", func() error {
				var avail struct{ State string }
				if !w.get(base+"/"+names[b.ID]+"/availability", &avail) || avail.State != "online" {
					return fmt.Errorf("availability %+v", avail)
				}
				return nil
			})
		}
	}
	// One answer, and not from the bridge cut off: one that is not cut
	// off leads (which one depends on the heartbeats each sees).
	if rs := w.request(base, "health", "", dupWindow); len(rs) != 1 || rs[0]["data"].(map[string]any)["Gateway"] == "gw2" {
		t.Errorf("health while gw2 is cut off: %v, want one answer, from hub or gw1", rs)
	}
	px.heal()
	eventually(t, 15*time.Second, "gw2 joined again", func() error {
		var st struct{ Partitioned bool }
		if !w.get(base+"/bridge/gateway/gw2/state", &st) || st.Partitioned {
			return fmt.Errorf("gw2 state %+v", st)
		}
		return nil
	})

	// gw1 dies: its last will says so, gw2 takes the shared board (and
	// keeps its name), discovery names gw2, and gw2 answers.
	gw1.kill()
	eventually(t, 20*time.Second, "the shared board moves to gw2", func() error {
		var st struct{ State string }
		if !w.get(base+"/bridge/gateway/gw1/state", &st) || st.State != "offline" {
			return fmt.Errorf("gw1 state %+v", st)
		}
		var info boardInfo
		if !w.get(base+"/"+names[sharedID]+"/info", &info) || info.Gateway != "gw2" || !info.Online {
			return fmt.Errorf("shared board info %+v", info)
		}
		var avail struct{ State, Gateway string }
		if !w.get(base+"/"+names[sharedID]+"/availability", &avail) || avail.State != "online" || avail.Gateway != "gw2" {
			return fmt.Errorf("shared board availability %+v", avail)
		}
		return discoveryNames(w, ha, sharedID, base, "gw2")
	})
	if rs := w.request(base, "health", "", dupWindow); len(rs) != 1 || rs[0]["data"].(map[string]any)["Gateway"] == "gw1" {
		t.Errorf("health after gw1 died: %v, want one answer, from gw2 or hub", rs)
	}
	w.publish(base+"/"+names[sharedID]+"/set/leds", `{"brightness":72}`)
	waitLEDs(t, byURL[shared.lanURLs[0]], 72)
	eventually(t, 15*time.Second, "gw2's metrics export the shared board", func() error {
		if m := series(gw2); !strings.Contains(m, sharedSeries+`"gw2"} 1`) {
			return fmt.Errorf("gw2's metrics lack %sgw2 after the takeover", sharedSeries)
		}
		return nil
	})
}

// TestClusterMQTTEmbedded runs two gateways of a cluster, each with its
// own embedded broker: each broker shows its gateway's bridge state and
// own boards under the cluster's topics, takes commands for them, and
// answers requests for the whole installation. Then GET /v1/cluster and
// removing a stopped gateway (testClusterAPI), and the cluster's metrics.
func TestClusterMQTTEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	t.Parallel()
	mq := []string{"--no-mqtt=false", "--mqtt-port", "0"}
	s1, s2 := startSite(t, 1, 0), startSite(t, 1, 0)
	hub := startGateway(t, "hub", "embedded", s1, mq...)
	gw1 := startGateway(t, "gw1", hub.join, s2, mq...)
	tc := &testCluster{gws: []*gwProc{hub, gw1}, owner: map[string]string{s1.lineURLs[0]: "hub", s2.lineURLs[0]: "gw1"}}
	boards := tc.waitListing(t, 30*time.Second)
	brokerLine := regexp.MustCompile(`embedded broker (tcp://\S+)`)
	for _, g := range tc.gws {
		m := brokerLine.FindStringSubmatch(g.out.String())
		if m == nil {
			t.Fatalf("%s printed no broker:\n%s", g.name, g.out.String())
		}
		w := watchMQTT(t, m[1], "holo/#")
		var own boardJSON
		for _, b := range boards {
			if b.Gateway == g.name {
				own = b
			}
		}
		var name string
		eventually(t, 15*time.Second, g.name+"'s broker", func() error {
			var st struct{ State, Gateway string }
			if !w.get("holo/bridge/gateway/"+g.name+"/state", &st) || st.State != "online" || st.Gateway != g.name {
				return fmt.Errorf("state %+v", st)
			}
			var list []boardInfo
			if !w.get("holo/bridge/gateway/"+g.name+"/boards", &list) || len(list) != 1 || list[0].ID != own.ID {
				return fmt.Errorf("%s's broker lists %+v, want its board %s only", g.name, list, own.ID)
			}
			name = list[0].Name
			return nil
		})
		if rs := w.request("holo", "boards", "", dupWindow); len(rs) != 1 || len(rs[0]["data"].([]any)) != len(boards) {
			t.Errorf("%s's broker: boards request answered %d times: %v", g.name, len(rs), rs)
		}
		w.publish("holo/"+name+"/set/leds", `{"brightness":19}`)
		waitLEDs(t, own, 19)
	}

	// The cluster's metrics: promtool takes the scrape; each gateway's
	// lines and boards, the per-board series of its own boards only.
	_, scrape := get(hub.base() + "/metrics")
	for _, want := range []string{`holo_gateway_cluster_gateway_lines{gateway="hub",peer="gw1"} 1`,
		`holo_gateway_cluster_gateway_boards{gateway="hub",peer="gw1"} 1`, `holo_gateway_cluster_partitioned{gateway="hub"} 0`,
		`holo_gateway_cluster_gateway_heartbeat_age_seconds{gateway="hub",peer="gw1"}`} {
		if !strings.Contains(scrape, want) {
			t.Errorf("hub's metrics lack %s", want)
		}
	}
	for _, b := range boards {
		has := strings.Contains(scrape, `holo_gateway_board_online{board="`+b.ID+`",gateway="hub"}`)
		if has != (b.Gateway == "hub") {
			t.Errorf("hub exports board %s of %s: %v", b.ID, b.Gateway, has)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(scrape)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	} else {
		t.Log("promtool not installed: the scrape is not checked by it")
	}

	testClusterAPI(t, hub, gw1, boards)
}

// clusterJSON is GET /v1/cluster's answer.
type clusterJSON struct {
	Name        string `json:"name"`
	Partitioned bool   `json:"partitioned"`
	Coordinator string `json:"coordinator"`
	Boards      int    `json:"boards"`
	Gateways    []struct {
		Name          string `json:"name"`
		Alive         bool   `json:"alive"`
		LastHeartbeat string `json:"last_heartbeat"`
		Boards        int    `json:"boards"`
		Lines         int    `json:"lines"`
	} `json:"gateways"`
}

// testClusterAPI: GET /v1/cluster on hub describes both gateways; once
// gw1 is dead, DELETE /v1/cluster/gateways/gw1 forgets it and its board,
// and hub itself cannot be removed. (It stops gw1.)
func testClusterAPI(t *testing.T, hub, gw1 *gwProc, boards []boardJSON) {
	t.Helper()
	var cl clusterJSON
	eventually(t, 10*time.Second, "GET /v1/cluster", func() error {
		if err := httpJSON(hub.base()+"/v1/cluster", &cl); err != nil {
			return err
		}
		if cl.Name != "hub" || cl.Partitioned || cl.Coordinator == "" || cl.Boards != len(boards) || len(cl.Gateways) != 2 {
			return fmt.Errorf("%+v", cl)
		}
		for i, want := range []string{"gw1", "hub"} {
			g := cl.Gateways[i]
			if g.Name != want || !g.Alive || g.Boards != 1 || g.Lines != 1 || g.LastHeartbeat == "" {
				return fmt.Errorf("gateway %d: %+v, want %s alive with 1 board and 1 line", i, g, want)
			}
		}
		return nil
	})
	if code, body := hub.rest(t, "DELETE", "/v1/cluster/gateways/gw1", nil); code != 412 {
		t.Errorf("removing gw1 while it lives: %d %s", code, body)
	}
	gw1.stop()
	var gone string
	for _, b := range boards {
		if b.Gateway == "gw1" {
			gone = b.ID
		}
	}
	eventually(t, 10*time.Second, "gw1 removed", func() error {
		code, body := hub.rest(t, "DELETE", "/v1/cluster/gateways/gw1", nil)
		if code != 200 {
			return fmt.Errorf("%d %s", code, body)
		}
		if want := `{"name":"gw1","boards":["` + gone + `"]}`; string(body) != want {
			t.Errorf("removed %s, want %s", body, want)
		}
		return nil
	})
	eventually(t, 5*time.Second, "gw1 forgotten", func() error {
		if err := httpJSON(hub.base()+"/v1/cluster", &cl); err != nil {
			return err
		}
		if len(cl.Gateways) != 1 || cl.Gateways[0].Name != "hub" {
			return fmt.Errorf("%+v", cl)
		}
		if bs := hub.boards(t, ""); len(bs) != len(boards)-1 || slices.ContainsFunc(bs, func(b boardJSON) bool { return b.ID == gone }) {
			return fmt.Errorf("hub lists %+v", bs)
		}
		return nil
	})
	if code, body := hub.rest(t, "DELETE", "/v1/cluster/gateways/hub", nil); code != 412 {
		t.Errorf("removing hub on hub: %d %s", code, body)
	}
	if code, body := hub.rest(t, "DELETE", "/v1/cluster/gateways/nosuch", nil); code != 404 {
		t.Errorf("removing an unknown gateway: %d %s", code, body)
	}
}

// discoveryNames checks board id's HA discovery: behind gateway gw's
// bridge device, available while gw's bridge is.
func discoveryNames(w *mqttWatch, ha, id, base, gw string) error {
	var d struct {
		Dev struct {
			Via string `json:"via_device"`
		} `json:"dev"`
		Availability []struct {
			Topic string `json:"topic"`
		} `json:"availability"`
		Cmps map[string]map[string]any `json:"cmps"`
	}
	if !w.get(ha+"/device/holo_"+id+"/config", &d) {
		return fmt.Errorf("no discovery of %s", id)
	}
	if d.Dev.Via != "holo-gw_"+gw || len(d.Availability) != 2 || d.Availability[0].Topic != base+"/bridge/gateway/"+gw+"/state" ||
		d.Cmps["gateway"] == nil {
		return fmt.Errorf("discovery of %s: %+v, want it behind %s", id, d, gw)
	}
	var gd struct {
		Dev struct {
			Identifiers []string `json:"identifiers"`
		} `json:"dev"`
	}
	if !w.get(ha+"/device/holo-gw_"+gw+"/config", &gd) || len(gd.Dev.Identifiers) != 1 {
		return fmt.Errorf("no gateway device of %s", gw)
	}
	return nil
}

// waitLEDs waits until board b's strip is at brightness.
func waitLEDs(t *testing.T, b boardJSON, brightness float64) {
	t.Helper()
	eventually(t, 10*time.Second, "leds of "+b.ID, func() error {
		var leds map[string]any
		if err := httpJSON(b.URL+"/api/v1/leds", &leds); err != nil {
			return err
		}
		if leds["brightness"] != brightness {
			return fmt.Errorf("board %s (%s) leds %v, want brightness %v", b.ID, b.Gateway, leds, brightness)
		}
		return nil
	})
}
