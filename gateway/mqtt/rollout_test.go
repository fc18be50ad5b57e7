package mqtt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// fwImage packs a host image of holo-board with version.
func fwImage(t testing.TB, version string) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), 20000/(len(version)+1)+1)[:20000]
	b, err := image.Pack(image.Desc{Version: version, Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fwRig is a rig with boards that update, the firmware store and the
// rollout engine wired into the bridge.
type fwRig struct {
	*rig
	arts *artifact.Store
	eng  *rollout.Engine
}

func startFWRig(t *testing.T, url string, n int) *fwRig {
	t.Helper()
	return startFWRigKeys(t, url, n, nil)
}

// startFWRigKeys is startFWRig with a firmware store trusting keys.
func startFWRigKeys(t *testing.T, url string, n int, keys []image.KeyDigest) *fwRig {
	t.Helper()
	fr := &fwRig{}
	fr.rig = startRig(t, url, rigOptions{n: n, lanOnly: true, ota: true, opts: func(r *rig, o *mqtt.Options) {
		var err error
		fr.arts, err = artifact.Open(artifact.Options{Dir: filepath.Join(t.TempDir(), "artifacts"), DB: r.db, Trusted: keys})
		if err != nil {
			t.Fatal(err)
		}
		fr.eng, err = rollout.New(rollout.Options{DB: r.db, Fleet: r.fleet, Artifacts: fr.arts,
			Poll: 50 * time.Millisecond, Tick: 50 * time.Millisecond, Kick: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = fr.eng.Run(ctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })
		o.Rollouts, o.Firmware = fr.eng, fr.arts
		o.KeepRollouts = 1
	}})
	return fr
}

func (fr *fwRig) add(t *testing.T, version string) artifact.Artifact {
	t.Helper()
	a, _, err := fr.arts.Add(t.Context(), bytes.NewReader(fwImage(t, version)), "fw-"+version+".bin", "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// running is the version board id runs, by its GET /ota (what the
// board's slots say, independent of what the fleet last read from /info).
func running(t *testing.T, f *fleet.Fleet, id string) string {
	t.Helper()
	rep, err := f.Call(t.Context(), id, "GET", "/ota", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st boardapi.OTAStatus
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		t.Fatalf("GET /ota %s: %v", rep.Body, err)
	}
	for _, s := range st.Slots {
		if s.Running && s.App != nil {
			return s.App.Version
		}
	}
	return ""
}

// response is a bridge/response/<verb> message.
type response struct {
	Status      string          `json:"status"`
	Data        json.RawMessage `json:"data"`
	Error       string          `json:"error"`
	Transaction json.RawMessage `json:"transaction"`
}

// request publishes a request and waits for its response (by transaction).
func request(t *testing.T, rc *recorder, url, base, verb, body, tx string) response {
	t.Helper()
	publish(t, url, base+"/bridge/request/"+verb, body)
	m := rc.wait(20*time.Second, verb+" response "+tx, func(m rec) bool {
		return m.Topic == base+"/bridge/response/"+verb && strings.Contains(string(m.Payload), `"transaction":"`+tx+`"`)
	})
	var r response
	if err := json.Unmarshal(m.Payload, &r); err != nil {
		t.Fatalf("response %s: %v", m.Payload, err)
	}
	return r
}

// TestRolloutsOverMQTT drives the rollout engine from MQTT against the
// embedded broker and fleet-mode boards with the update service: a
// rollout created by request runs to done on bridge/rollout/<id> and
// bridge/event, the request's other actions answer, and HA's install
// command on one board's update entity updates that board only, its
// entity going from in progress to the new installed version.
func TestRolloutsOverMQTT(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	t.Parallel()
	for _, bc := range brokerCases() {
		t.Run(bc.name, func(t *testing.T) { t.Parallel(); rolloutsOverMQTT(t, bc.start(t)) })
	}
}

func rolloutsOverMQTT(t *testing.T, url string) {
	fr := startFWRig(t, url, 3)
	b := fr.base
	rc := newRecorder(t, url, b+"/#")
	names := fr.waitOnline(t)
	long := 30 * time.Second

	// Nothing on the channel: latest is what the board runs.
	for _, n := range names {
		rc.waitLast(long, b+"/"+n+"/update", func(v map[string]any) bool {
			return v["installed_version"] == buildinfo.Version && v["latest_version"] == buildinfo.Version && v["in_progress"] == false
		})
	}

	// Bad requests are refused with reasons.
	a2 := fr.add(t, "2.0.0")
	for i, bad := range []string{
		`{"action":"explode"}`,
		`{"action":"get"}`,
		`{"action":"get","id":"nosuch"}`,
		`{"action":"create","plan":{"artifact":"` + a2.SHA256 + `"}}`,
		`{"action":"create","plan":{"artifact":"` + a2.SHA256 + `","target":{"all":true},"colour":"red"}}`,
		`{"action":"create","plan":{"artifact":"` + strings.Repeat("0", 64) + `","target":{"all":true}}}`,
		`{"action":"list","id":"x"}`,
	} {
		tx := "bad-" + string(rune('a'+i))
		body := strings.TrimSuffix(bad, "}") + `,"transaction":"` + tx + `"}`
		if r := request(t, rc, url, b, "rollout", body, tx); r.Status != "error" || r.Error == "" {
			t.Errorf("%s: %+v", bad, r)
		}
	}

	// A dry run names the boards (by name in the plan) and starts nothing.
	plan := `{"name":"mqtt","artifact":"` + a2.SHA256 + `","target":{"boards":["` + names[0] + `","` + names[1] + `"]},"max_in_flight":2}`
	r := request(t, rc, url, b, "rollout", `{"action":"dry_run","plan":`+plan+`,"transaction":"dry"}`, "dry")
	var sel rollout.Selection
	if err := json.Unmarshal(r.Data, &sel); r.Status != "ok" || err != nil || sel.Boards() != 2 {
		t.Fatalf("dry run %+v %v", r, err)
	}
	if len(fr.eng.List()) != 0 {
		t.Fatal("a dry run created a rollout")
	}

	// A rollout created over MQTT runs to done; its topic says so.
	r = request(t, rc, url, b, "rollout", `{"action":"create","plan":`+plan+`,"transaction":"create"}`, "create")
	var st rollout.Status
	if err := json.Unmarshal(r.Data, &st); r.Status != "ok" || err != nil || st.ID == "" {
		t.Fatalf("create %+v %v", r, err)
	}
	topic := b + "/bridge/rollout/" + st.ID
	done := rc.waitLast(long, topic, func(v map[string]any) bool { return v["state"] == rollout.StateDone && v["finished"] == true })
	boards, _ := done["boards"].(map[string]any)
	if len(boards) != 2 || boards[names[0]] != rollout.PhaseSucceeded || boards[names[1]] != rollout.PhaseSucceeded {
		t.Errorf("rollout topic boards %v", done["boards"])
	}
	if p, _ := done["progress"].(map[string]any); p["done"] != float64(2) || p["percent"] != float64(100) {
		t.Errorf("rollout topic progress %v", done["progress"])
	}
	if done["version"] != "2.0.0" || done["waves"] != float64(1) {
		t.Errorf("rollout topic %v", done)
	}
	// Its events went to bridge/event too, a board's phases included.
	for _, want := range []string{`"state":"done"`, `"phase":"staging"`, `"phase":"succeeded"`} {
		rc.wait(long, "bridge/event "+want, func(m rec) bool {
			return m.Topic == b+"/bridge/event" && strings.Contains(string(m.Payload), `"type":"rollout"`) &&
				strings.Contains(string(m.Payload), `"rollout":"`+st.ID+`"`) && strings.Contains(string(m.Payload), want)
		})
	}
	for i := range 2 {
		rc.waitLast(long, b+"/"+names[i]+"/update", func(v map[string]any) bool {
			return v["installed_version"] == "2.0.0" && v["in_progress"] == false
		})
	}

	// The other actions.
	r = request(t, rc, url, b, "rollout", `{"action":"get","id":"`+st.ID+`","transaction":"get"}`, "get")
	if r.Status != "ok" || !strings.Contains(string(r.Data), `"state":"done"`) {
		t.Errorf("get %+v", r)
	}
	r = request(t, rc, url, b, "rollout", `{"action":"list","transaction":"list"}`, "list")
	if r.Status != "ok" || !strings.Contains(string(r.Data), st.ID) {
		t.Errorf("list %+v", r)
	}
	r = request(t, rc, url, b, "rollout", `{"action":"boards","id":"`+st.ID+`","transaction":"boards"}`, "boards")
	if r.Status != "ok" || !strings.Contains(string(r.Data), `"timeline"`) {
		t.Errorf("boards %+v", r)
	}
	for _, act := range []string{"pause", "resume", "abort"} {
		r = request(t, rc, url, b, "rollout", `{"action":"`+act+`","id":"`+st.ID+`","transaction":"`+act+`"}`, act)
		if r.Status != "error" || !strings.Contains(r.Error, "not allowed") {
			t.Errorf("%s of a finished rollout: %+v", act, r)
		}
	}

	// HA's install: the channel's image goes to that board only.
	a3 := fr.add(t, "2.1.0")
	if _, err := fr.arts.SetChannel(mqtt.DefaultUpdateChannel, a3.SHA256, ""); err != nil {
		t.Fatal(err)
	}
	upd := b + "/" + names[2] + "/update"
	rc.waitLast(long, upd, func(v map[string]any) bool {
		return v["latest_version"] == "2.1.0" && v["installed_version"] == buildinfo.Version
	})
	from := len(rc.all())
	publish(t, url, b+"/"+names[2]+"/set/update", "install")
	rc.waitLast(long, upd, func(v map[string]any) bool {
		return v["installed_version"] == "2.1.0" && v["latest_version"] == "2.1.0" && v["in_progress"] == false
	})
	var sawProgress bool
	for _, m := range rc.all()[from:] {
		var v map[string]any
		if m.Topic == upd && json.Unmarshal(m.Payload, &v) == nil && v["in_progress"] == true {
			sawProgress = true
			// While the rollout confirms the new image the board may already
			// report it: installed is the old version or the new one.
			inst := v["installed_version"]
			if v["latest_version"] != "2.1.0" || (inst != buildinfo.Version && inst != "2.1.0") || v["update_percentage"] == nil {
				t.Errorf("update in progress %s", m.Payload)
			}
		}
	}
	if !sawProgress {
		t.Error("the update entity never showed the install in progress")
	}
	for i, want := range []string{"2.0.0", "2.0.0", "2.1.0"} {
		if got := running(t, fr.fleet, fr.infos[i].ID); got != want {
			t.Errorf("board %d runs %q, want %s", i, got, want)
		}
	}
	// The install was a one-board rollout, shown like any other.
	list := fr.eng.List()
	if len(list) != 2 || list[0].Progress.Boards != 1 || list[0].Image.SHA256 != a3.SHA256 {
		t.Fatalf("rollouts after install %+v", list)
	}
	rc.waitLast(long, b+"/bridge/rollout/"+list[0].ID, func(v map[string]any) bool { return v["state"] == rollout.StateDone })
	// One finished rollout keeps its retained topic (KeepRollouts 1): the
	// first one's is cleared.
	rc.wait(long, "first rollout's topic cleared", func(m rec) bool { return m.Topic == topic && len(m.Payload) == 0 })

	// An install on an unknown board is an error on bridge/event.
	publish(t, url, b+"/nosuch/set/update", "install")
	rc.wait(long, "install error", func(m rec) bool {
		return m.Topic == b+"/bridge/event" && strings.Contains(string(m.Payload), `"command_error"`) &&
			strings.Contains(string(m.Payload), "nosuch/set/update")
	})
	online := true
	if n := len(fr.fleet.Boards(fleet.Filter{Online: &online})); n != 3 {
		t.Errorf("%d boards online after the rollouts", n)
	}
}
