package mqtt_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
)

// TestCueButton: Home Assistant's "GO show" button (from the bridge's
// discovery) GOes the list: group 1's boards, on the line and the LAN,
// turn red; bridge/request/cue answers with the list's state.
func TestCueButton(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	t.Parallel()
	for _, bc := range brokerCases() {
		t.Run(bc.name, func(t *testing.T) { t.Parallel(); cueButton(t, bc.start(t)) })
	}
}

func cueButton(t *testing.T, url string) {
	var eng *cue.Engine
	r := startRig(t, url, rigOptions{n: 4, opts: func(r *rig, o *mqtt.Options) {
		var err error
		if eng, err = cue.New(cue.Options{DB: r.db, Fleet: r.fleet}); err != nil {
			t.Fatal(err)
		}
		o.Cues = eng
	}})
	t.Cleanup(eng.Close)
	if _, err := eng.Put(cue.List{Name: "show", Cues: []cue.Cue{
		{Number: "1", Actions: []cue.Action{{Kind: "leds", Selector: fleet.Selector{Groups: []int{1}}, Body: json.RawMessage(`{"mode":"solid","colour":"#ff0000","loop":true}`)}}},
		{Number: "2", Actions: []cue.Action{{Kind: "leds", Selector: fleet.Selector{All: true}, Body: json.RawMessage(`{"mode":"off","loop":true}`)}}},
	}}); err != nil {
		t.Fatal(err)
	}
	rc := newRecorder(t, url, r.base+"/#")
	ha := newRecorder(t, url, r.base+"-ha/#")
	r.waitOnline(t)
	r.bridge.SetCueLists([]string{"show"})

	disc := ha.wait(20*time.Second, "the show's discovery", func(m rec) bool {
		return m.Topic == r.base+"-ha/device/holo_show/config"
	})
	var d struct {
		Cmps map[string]struct {
			P            string `json:"p"`
			Name         string `json:"name"`
			CommandTopic string `json:"command_topic"`
			PayloadPress string `json:"payload_press"`
		} `json:"cmps"`
	}
	if err := json.Unmarshal(disc.Payload, &d); err != nil || len(d.Cmps) != 1 {
		t.Fatalf("discovery %s: %v", disc.Payload, err)
	}
	for _, b := range d.Cmps {
		if b.P != "button" || b.Name != "GO show" {
			t.Fatalf("button %+v", b)
		}
		publish(t, url, b.CommandTopic, b.PayloadPress) // HA pressing it
	}
	resp := rc.wait(20*time.Second, "the cue response", func(m rec) bool {
		return m.Topic == r.base+"/bridge/response/cue"
	})
	if !strings.Contains(string(resp.Payload), `"status":"ok"`) || !strings.Contains(string(resp.Payload), `"standby":"2"`) {
		t.Fatalf("response %s", resp.Payload)
	}
	for _, b := range r.fleet.Boards(fleet.Filter{Group: 1}) {
		waitUntil(t, 20*time.Second, b.ID+" red", func() bool {
			rep, err := r.fleet.Call(context.Background(), b.ID, "GET", "/leds", nil)
			return err == nil && strings.Contains(string(rep.Body), `"#ff0000"`)
		})
	}
	if got := request(t, rc, url, r.base, "cue", `{"op":"start","cue":"9","transaction":"bad"}`, "bad"); got.Status != "error" || !strings.Contains(got.Error, "no such cue") {
		t.Fatalf("a missing cue: %+v", got)
	}
	if got := request(t, rc, url, r.base, "cue", `{"op":"state","extra":1,"transaction":"x"}`, "x"); got.Status != "error" {
		t.Fatalf("an unknown key: %+v", got)
	}
	r.bridge.SetCueLists(nil)
	ha.wait(20*time.Second, "the show's discovery cleared", func(m rec) bool {
		return m.Topic == r.base+"-ha/device/holo_show/config" && len(m.Payload) == 0
	})
}
