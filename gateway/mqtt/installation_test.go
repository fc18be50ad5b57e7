package mqtt_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
)

// installDesc gives board $ID a scene; the other board is not part of
// the installation.
const installDesc = `
version: 1
profiles:
  show:
    scenes:
      glow: {slot: 5, leds: {mode: solid, colour: green}}
assignments:
  - {profile: show, board: "$ID"}
`

// TestHAInstallationSensor: with the installation behind the bridge,
// every board's discovery has the installation sensor (an enum of the
// installation states, its attributes from the same topic), and
// <b>/installation follows the drift watcher: a board the revision sets
// up is in_sync, one it does not select is unassigned, and a scene
// deleted by hand on the first makes it drifted with the reason. Run on
// the embedded broker and on Mosquitto.
func TestHAInstallationSensor(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	t.Parallel()
	for _, bc := range brokerCases() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			url := bc.start(t)
			var in *installation.Installer
			r := startRig(t, url, rigOptions{n: 2, lanOnly: true, opts: func(r *rig, o *mqtt.Options) {
				contents, err := installation.OpenContents(filepath.Join(t.TempDir(), "content"))
				if err != nil {
					t.Fatal(err)
				}
				in, err = installation.New(installation.Options{DB: r.db, Fleet: r.fleet, Contents: contents,
					Tick: 20 * time.Millisecond, CheckEvery: 300 * time.Millisecond, Settle: 50 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				o.InstallationStates = func() map[string]homeassistant.Install {
					rev, drifts := in.Findings()
					out := map[string]homeassistant.Install{}
					for id, d := range drifts {
						out[id] = homeassistant.Install{State: d.State, Reason: d.Summary, Profile: d.Profile, Revision: rev, Checked: d.Checked}
					}
					return out
				}
			}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = in.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			rc := newRecorder(t, url, r.base+"/#")
			ha := newRecorder(t, url, r.base+"-ha/#")
			names := r.waitOnline(t)
			placed := r.infos[0]

			cfg := ha.waitLast(20*time.Second, r.base+"-ha/device/holo_"+placed.ID+"/config", func(v map[string]any) bool {
				cmps, _ := v["cmps"].(map[string]any)
				return cmps["installation"] != nil
			})
			sensor := cfg["cmps"].(map[string]any)["installation"].(map[string]any)
			topic := r.base + "/" + names[0] + "/installation"
			if sensor["p"] != "sensor" || sensor["device_class"] != "enum" || sensor["state_topic"] != topic ||
				sensor["json_attributes_topic"] != topic || sensor["entity_category"] != "diagnostic" {
				t.Fatalf("installation sensor %v", sensor)
			}
			// Before any revision, nobody is assigned.
			rc.waitLast(20*time.Second, topic, func(v map[string]any) bool { return v["state"] == "unassigned" })

			d, err := installation.Parse("installation.yaml", []byte(strings.ReplaceAll(installDesc, "$ID", placed.ID)))
			if err != nil {
				t.Fatal(err)
			}
			_, st, err := in.Apply(ctx, d, "test", "")
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 60*time.Second, "the run", func() bool {
				st, _ = in.RunStatus(st.ID)
				return st.Finished
			})
			v := rc.waitLast(20*time.Second, topic, func(v map[string]any) bool { return v["state"] == "in_sync" })
			if v["profile"] != "show" || v["revision"] != 1.0 || v["checked"] == nil {
				t.Errorf("in sync payload %v", v)
			}
			rc.waitLast(20*time.Second, r.base+"/"+names[1]+"/installation", func(v map[string]any) bool {
				return v["state"] == "unassigned" && v["reason"] != ""
			})

			// The scene deleted by hand: drifted, and why.
			req, _ := http.NewRequest(http.MethodDelete, placed.URL+"/api/v1/scenes/scene?name=glow", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			v = rc.waitLast(20*time.Second, topic, func(v map[string]any) bool { return v["state"] == "drifted" })
			if reason, _ := v["reason"].(string); reason != "1 scene to save" {
				b, _ := json.Marshal(v)
				t.Errorf("drifted payload %s: want the reason", b)
			}
		})
	}
}
