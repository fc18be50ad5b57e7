package cluster_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPartition runs three gateways on a three-node engine cluster, gw3
// joined through a proxy. Killing an engine node changes nothing the
// gateways do. Cutting gw3 off from the engine: gw3 says it is
// partitioned (readyz, metrics) and keeps serving its own boards (reads,
// calls, actions, events); the others show its boards offline. When the
// cut heals everything converges and the events gw3's boards had
// meanwhile reach the stream: none is lost.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway and engine processes")
	}
	t.Parallel()
	var px *proxy
	var nc *natsCluster
	tc := startClusterVia(t, "three-nodes", func(i int, url string) string {
		if i < 2 {
			return url
		}
		px = startProxy(t, strings.TrimPrefix(strings.Split(url, ",")[2], "nats://"))
		return px.URL()
	})
	nc = tc.nats
	boards := tc.waitListing(t, 60*time.Second)
	gw1, gw3 := tc.gws[0], tc.gws[2]
	var own3 []boardJSON
	var lan1, lan3 string // a LAN board of gw1's, of gw3's: their events come at once
	for _, b := range boards {
		if b.Gateway == "gw3" {
			own3 = append(own3, b)
		}
		if b.Line == "" && b.Gateway == "gw1" {
			lan1 = b.ID
		}
		if b.Line == "" && b.Gateway == "gw3" {
			lan3 = b.ID
		}
	}

	// The events from now on, as gw1 streams them: the watch goes on
	// when an engine node dies under it (it once fell silent for good).
	stream := watchEventsFrom(t, gw1, lan1)

	// One engine node dies: the cluster goes on.
	nc.nodes[0].kill()
	var res struct {
		Results []struct{ Board, Via, Error string } `json:"results"`
	}
	eventually(t, 30*time.Second, "an action on every board after an engine node died", func() error {
		_, b := gw1.rest(t, "POST", "/v1/actions", map[string]any{"kind": "leds", "selector": map[string]any{"all": true},
			"body": map[string]any{"mode": "solid", "brightness": 20}})
		res.Results = nil
		if err := jsonUnmarshal(b, &res); err != nil {
			return fmt.Errorf("%v: %s", err, b)
		}
		if len(res.Results) != len(boards) {
			return fmt.Errorf("%d results: %s", len(res.Results), b)
		}
		for _, r := range res.Results {
			if r.Error != "" {
				return fmt.Errorf("%+v", r)
			}
		}
		return nil
	})
	tc.waitListing(t, 60*time.Second)

	// gw3 is cut off.
	px.cut()
	eventually(t, 30*time.Second, "gw3 says it is partitioned", func() error {
		code, body := get(gw3.base() + "/readyz")
		if code != 503 || !strings.Contains(body, "partitioned") {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		if _, m := get(gw3.base() + "/metrics"); !strings.Contains(m, `holo_gateway_cluster_partitioned{gateway="gw3"} 1`) {
			return fmt.Errorf("metrics do not say partitioned")
		}
		return nil
	})
	// gw3 serves its own boards: listing, reads, calls, actions, events.
	mine := gw3.boards(t, "?online=true")
	for _, b := range own3 {
		if !slices.ContainsFunc(mine, func(m boardJSON) bool { return m.ID == b.ID && m.Gateway == "gw3" }) {
			t.Errorf("partitioned gw3 does not list its board %s online: %+v", b.ID, mine)
		}
	}
	var call struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	gw3.restJSON(t, "POST", "/v1/boards/"+own3[0].ID+"/call", map[string]any{"method": "GET", "path": "/info"}, &call)
	if call.Status != 200 {
		t.Errorf("partitioned gw3 calls its own board: %+v", call)
	}
	ev3 := watchEventsFrom(t, gw3, lan3)
	gw3.restJSON(t, "POST", "/v1/actions", map[string]any{"kind": "leds", "selector": map[string]any{"all": true},
		"body": map[string]any{"mode": "solid", "brightness": 77}}, &res)
	for _, r := range res.Results {
		owned := slices.ContainsFunc(own3, func(b boardJSON) bool { return b.ID == r.Board })
		if owned != (r.Error == "") {
			t.Errorf("partitioned gw3 acts on all: %+v (its own: %v)", r, owned)
		}
	}
	bright77 := func(es []eventJSON, ids []boardJSON) bool {
		for _, b := range ids {
			if !slices.ContainsFunc(es, func(e eventJSON) bool {
				return e.Board == b.ID && e.Kind == "leds" && strings.Contains(e.Data, `"brightness":77`)
			}) {
				return false
			}
		}
		return true
	}
	collect(t, ev3, 30*time.Second, "partitioned gw3 streams its own boards' events", func(es []eventJSON) bool { return bright77(es, own3) })
	// The others see gw3's boards offline.
	eventually(t, 30*time.Second, "gw1 shows gw3's boards offline", func() error {
		for _, b := range gw1.boards(t, "") {
			if b.Gateway == "gw3" && (b.Online || !strings.Contains(b.OfflineReason, "gw3")) {
				return fmt.Errorf("%+v", b)
			}
		}
		return nil
	})

	// Healed: everything converges, and the events of the cut reach
	// every gateway's stream.
	px.heal()
	tc.waitListing(t, 60*time.Second)
	eventually(t, 30*time.Second, "gw3 ready again", func() error {
		if code, body := get(gw3.base() + "/readyz"); code != 200 {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		return nil
	})
	collect(t, stream, 60*time.Second, "gw1 streams the events gw3 had while cut off", func(es []eventJSON) bool { return bright77(es, own3) })
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
