package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/dmx/artnet"
)

// send sends body with method to url (loopback: the demo's admin).
func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestShowGuards: the gateway's cue engine and DMX input keep rollouts
// off the boards a show uses. Board A is the target of a cue list that
// has fired its first cue (the show is between two GOs); board B is
// patched to a universe an Art-Net desk is sending. The dry run names
// both with why; the rollout holds both pending and says what each waits
// for; once the list's standby goes back to its top, A starts, and once
// the desk stops (its source lost), B starts.
func TestShowGuards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	t.Parallel()
	base, out := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2",
		"--demo-groups", "2", "--mqtt", noBroker)
	ma := artnetLine.FindStringSubmatch(out.String())
	if ma == nil {
		t.Fatalf("no Art-Net line in the banner:\n%s", out.String())
	}
	ids := demoBoards(t, base, 2)
	a, b := ids[1], ids[2]

	// Board B alone on universe 3 (Art-Net Port-Address 2).
	if code, body := send(t, "PUT", base+"/v1/dmx/patch", `{"fixtures":[{"name":"B","universe":3,"address":1,"profile":"holo","board":"`+b+`"}]}`); code != 200 {
		t.Fatalf("PUT patch: %d %s", code, body)
	}
	// A cue list on board A, its first cue fired.
	list := `{"name":"intro","cues":[` +
		`{"number":"1","actions":[{"kind":"leds","selector":{"boards":["` + a + `"]},"body":{"mode":"solid","colour":"red"}}]},` +
		`{"number":"2","actions":[{"kind":"leds","selector":{"boards":["` + a + `"]},"body":{"mode":"off"}}]}]}`
	if code, body := send(t, "PUT", base+"/v1/cuelists/intro", list); code != 200 {
		t.Fatalf("PUT cue list: %d %s", code, body)
	}
	if code, body := send(t, "POST", base+"/v1/cuelists/intro/go?asap=true", ""); code != 200 {
		t.Fatalf("GO: %d %s", code, body)
	}
	// The desk sends universe 3 every 100 ms until told to stop.
	stopDesk := desk(t, ma[1], func(seq uint8) []byte {
		pkt, _ := artnet.AppendDmx(nil, artnet.Dmx{Sequence: seq, PortAddress: 2, Slots: []byte{255, 0, 0, 255, 0, 0}})
		return pkt
	})
	waitFor(t, "the desk heard", 10*time.Second, func() bool {
		_, body := get(t, base+"/v1/dmx/patch", "")
		return strings.Contains(body, `"universe":3`) && strings.Contains(body, "artnet")
	})

	img, err := image.Pack(image.Desc{Version: "9.9.9", Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"},
		bytes.Repeat([]byte("holo-board 9.9.9 "), 4096))
	if err != nil {
		t.Fatal(err)
	}
	code, body := post(t, base+"/v1/artifacts?name=show.bin", "application/octet-stream", img)
	sha := regexp.MustCompile(`"sha256":\s*"([0-9a-f]{64})"`).FindStringSubmatch(body)
	if code != 200 || sha == nil {
		t.Fatalf("upload: %d %s", code, body)
	}
	plan := `{"name":"show","artifact":"` + sha[1] + `","target":{"all":true},"max_in_flight":2}`

	type refusal struct{ Board, Reason string }
	code, body = send(t, "POST", base+"/v1/rollouts/dry-run", plan)
	var sel struct{ Waiting []refusal }
	if code != 200 || json.Unmarshal([]byte(body), &sel) != nil {
		t.Fatalf("dry run: %d %s", code, body)
	}
	why := map[string]string{}
	for _, w := range sel.Waiting {
		why[w.Board] = w.Reason
	}
	if !strings.Contains(why[a], `cue list "intro" is running with actions on it`) ||
		!strings.Contains(why[b], "DMX input is active on universe 3") {
		t.Fatalf("dry run's waiting boards: %s", body)
	}

	code, body = send(t, "POST", base+"/v1/rollouts", plan)
	rid := regexp.MustCompile(`"id":\s*"([^"]+)"`).FindStringSubmatch(body)
	if code != 200 || rid == nil {
		t.Fatalf("create: %d %s", code, body)
	}
	rows := func() map[string]struct{ Phase, Waiting string } {
		_, body := get(t, base+"/v1/rollouts/"+rid[1]+"/boards", "")
		var v []struct{ Board, Phase, Waiting string }
		json.Unmarshal([]byte(body), &v)
		out := map[string]struct{ Phase, Waiting string }{}
		for _, r := range v {
			out[r.Board] = struct{ Phase, Waiting string }{r.Phase, r.Waiting}
		}
		return out
	}
	waitFor(t, "both boards waiting for their show", 30*time.Second, func() bool {
		r := rows()
		return strings.Contains(r[a].Waiting, "show: cue list") && strings.Contains(r[b].Waiting, "show: DMX input")
	})
	if code, body := get(t, base+"/v1/rollouts/"+rid[1], ""); code != 200 || !regexp.MustCompile(`"waiting":\s*2`).MatchString(body) {
		t.Errorf("the rollout's progress does not count 2 waiting: %s", body)
	}

	// The show on A ends: the standby back on the list's first cue.
	if code, body := send(t, "POST", base+"/v1/cuelists/intro/standby", `{"cue":"1"}`); code != 200 {
		t.Fatalf("standby: %d %s", code, body)
	}
	started := func(id string) func() bool {
		return func() bool { r := rows()[id]; return r.Waiting == "" && r.Phase != "" && r.Phase != "pending" }
	}
	waitFor(t, "board A started once its cue list ended", 60*time.Second, started(a))
	if r := rows()[b]; !strings.Contains(r.Waiting, "DMX input") {
		t.Fatalf("board B no longer waits for the desk while it still sends: %+v", r)
	}
	// The desk stops; after its source's loss time B starts.
	stopDesk()
	waitFor(t, "board B started once the desk stopped", 60*time.Second, started(b))
}
