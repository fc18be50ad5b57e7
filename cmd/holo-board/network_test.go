package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/boardtest"
)

// netState is the part of GET /network the tests read.
type netState struct {
	STAEnabled bool `json:"sta_enabled"`
	Joined     *struct {
		SSID string `json:"ssid"`
		IP   string `json:"ip"`
	} `json:"joined"`
	Known []struct {
		SSID string `json:"ssid"`
	} `json:"known"`
	AP struct {
		On     bool   `json:"on"`
		Name   string `json:"name"`
		OffInS *int   `json:"off_in_s"`
		IP     string `json:"ip"`
		Port   int    `json:"port"`
	} `json:"ap"`
}

func getNetwork(t *testing.T, b *boardtest.Board) netState {
	t.Helper()
	r := b.Do("GET", "/network", nil)
	if r.Status != 200 {
		t.Fatalf("GET /network: %d %s", r.Status, r.Body)
	}
	var st netState
	r.JSON(t, &st)
	return st
}

// onAP sends a request to the board's access point listener, validated
// against openapi.json like every other.
func onAP(b *boardtest.Board, ap string, method, path string, body any) boardtest.Reply {
	sta := b.URL
	b.URL = "http://" + ap
	defer func() { b.URL = sta }()
	return b.Do(method, path, body)
}

const testRadio = `{
  "networks": [
    {"ssid": "lab", "security": "wpa2", "passphrase": "lab-secret-1", "rssi": -50, "channel": 6, "internet": true},
    {"ssid": "cafe", "security": "open", "rssi": -60, "channel": 11, "internet": true},
    {"ssid": "attic", "security": "wpa3", "passphrase": "attic-secret-2", "rssi": -80, "channel": 1}
  ]
}
`

func TestNetworkAccessPointListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No network provisioned: the board cannot join at start, so its
	// access point comes on for five minutes.
	if err := os.WriteFile(filepath.Join(dir, "radio.json"), []byte(testRadio), 0o644); err != nil {
		t.Fatal(err)
	}
	b := boardtest.Start(t, dir)
	st := getNetwork(t, b)
	// Five minutes from the start; a loaded machine may take a while to
	// answer, so a minute of slack.
	if st.Joined != nil || !st.AP.On || st.AP.OffInS == nil || *st.AP.OffInS < 240 || *st.AP.OffInS > 300 || st.AP.Port == 0 {
		t.Fatalf("start without a network: %+v", st)
	}
	ap := fmt.Sprintf("%s:%d", st.AP.IP, st.AP.Port)
	info := onAP(b, ap, "GET", "/info", nil).Map(t)
	if info["via"] != "ap" {
		t.Fatalf("via on the access point: %v", info["via"])
	}
	apInfo := info["ap"].(map[string]any)
	if apInfo["on"] != true || apInfo["ip"] != st.AP.IP || apInfo["off_in_s"] == nil {
		t.Errorf("info ap: %v", apInfo)
	}
	if sta := info["sta"].(map[string]any); sta["connected"] != false {
		t.Errorf("info sta: %v", sta)
	}
	if v := b.Do("GET", "/info", nil).Map(t)["via"]; v != "sta" {
		t.Errorf("via on the station listener: %v", v)
	}
	// Join from the access point: the reply comes, then the station joins.
	r := onAP(b, ap, "POST", "/network/join", `{"ssid":"lab","passphrase":"lab-secret-1"}`)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"joined":{"ssid":"lab"`) {
		t.Fatalf("join: %d %s", r.Status, r.Body)
	}
	boardtest.WaitFor(t, 30*time.Second, "joined", func() bool { return getNetwork(t, b).Joined != nil })
	// {on:true} makes the timed access point count down again; then off
	// from the access point itself: the reply arrives before it closes.
	if r := onAP(b, ap, "PATCH", "/network/ap", `{"on":true}`); r.Status != 200 {
		t.Fatalf("on: %d %s", r.Status, r.Body)
	}
	if r := onAP(b, ap, "PATCH", "/network/ap", `{"on":false}`); r.Status != 200 || !strings.Contains(string(r.Body), `"ap":{"on":false`) {
		t.Fatalf("off: %d %s", r.Status, r.Body)
	}
	boardtest.WaitFor(t, 30*time.Second, "the access point listener to close", func() bool {
		c := &http.Client{Timeout: time.Second}
		resp, err := c.Get("http://" + ap + "/api/v1/info")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	if st := getNetwork(t, b); st.AP.On || st.AP.OffInS != nil || st.AP.Port != 0 {
		t.Errorf("after off: %+v", st.AP)
	}
	// Turned on from the API it stays, on a listener again.
	r = b.Do("PATCH", "/network/ap", `{"on":true,"name":"stage-ap"}`)
	var on netState
	r.JSON(t, &on)
	if !on.AP.On || on.AP.OffInS != nil || on.AP.Name != "stage-ap" || on.AP.Port == 0 {
		t.Fatalf("on again: %s", r.Body)
	}
	if v := onAP(b, fmt.Sprintf("%s:%d", on.AP.IP, on.AP.Port), "GET", "/info", nil).Map(t)["via"]; v != "ap" {
		t.Errorf("via after reopening: %v", v)
	}
}

func TestNetworkEndpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	radio := strings.Replace(testRadio, `{`, `{"provision": ["lab"],`, 1)
	if err := os.WriteFile(filepath.Join(dir, "radio.json"), []byte(radio), 0o644); err != nil {
		t.Fatal(err)
	}
	b := boardtest.Start(t, dir)
	var bodies []string
	do := func(method, path string, body any) boardtest.Reply {
		t.Helper()
		r := b.Do(method, path, body)
		bodies = append(bodies, string(r.Body))
		return r
	}
	st := getNetwork(t, b)
	if st.Joined == nil || st.Joined.SSID != "lab" || st.AP.On || len(st.Known) != 1 {
		t.Fatalf("start: %+v", st)
	}
	host := strings.Split(b.Host, ":")[0]
	if st.Joined.IP != host {
		t.Errorf("station ip %q, listener %q", st.Joined.IP, host)
	}
	info := do("GET", "/info", nil).Map(t)
	if sta := info["sta"].(map[string]any); sta["ssid"] != "lab" || sta["connected"] != true {
		t.Errorf("info sta: %v", sta)
	}
	feats, _ := json.Marshal(info["features"])
	if !strings.Contains(string(feats), `"network"`) {
		t.Errorf("features: %s", feats)
	}
	bad := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"DELETE", "/network/known?ssid=nowhere", nil, 404, "not_found"},
		{"POST", "/network/join", `{"ssid":"far-away"}`, 404, "not_found"},
		{"POST", "/network/join", `{"ssid":"attic","passphrase":"not-the-one"}`, 400, "bad_request"},
		{"POST", "/network/join", `{"ssid":"attic"}`, 400, "bad_request"},
		{"PUT", "/network/known?ssid=x", `{"passphrase":"short"}`, 400, "bad_request"},
		{"PUT", "/network/known", `{}`, 400, "bad_request"},
		{"PATCH", "/network", `{"sta_enabled":"no"}`, 400, "bad_request"},
		{"PATCH", "/network/ap", `{"passphrase":"short"}`, 400, "bad_request"},
		{"PATCH", "/network/ap", `{"on":true}`, 403, "forbidden_host"},
	}
	before := do("GET", "/network", nil).Body
	for _, tc := range bad {
		var opts []boardtest.Option
		if tc.status == 403 {
			opts = append(opts, boardtest.Host("elsewhere.example"))
		}
		r := b.Do(tc.method, tc.path, tc.body, opts...)
		bodies = append(bodies, string(r.Body))
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Errorf("%s %s %v: %d %s, want %d %s", tc.method, tc.path, tc.body, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if after := do("GET", "/network", nil).Body; string(after) != string(before) {
		t.Errorf("refused requests changed the state:\n%s\n%s", before, after)
	}
	// Save, join an open network, scan.
	if r := do("PUT", "/network/known?ssid=attic", `{"passphrase":"attic-secret-2"}`); r.Status != 200 {
		t.Fatalf("save: %d %s", r.Status, r.Body)
	}
	if r := do("POST", "/network/join", `{"ssid":"cafe"}`); r.Status != 200 {
		t.Fatalf("join cafe: %d %s", r.Status, r.Body)
	}
	boardtest.WaitFor(t, 30*time.Second, "joined cafe", func() bool {
		j := getNetwork(t, b).Joined
		return j != nil && j.SSID == "cafe"
	})
	scan := do("GET", "/network/scan", nil)
	if scan.Status != 200 || !strings.Contains(string(scan.Body), `{"ssid":"lab","rssi":-50,"channel":6,"security":"wpa2","known":true}`) {
		t.Fatalf("scan: %d %s", scan.Status, scan.Body)
	}
	// The radio file edited while the board runs: cafe goes away, the
	// station falls back to lab.
	noCafe := strings.Replace(radio, `{"ssid": "cafe", "security": "open", "rssi": -60, "channel": 11, "internet": true},`, "", 1)
	if err := os.WriteFile(filepath.Join(dir, "radio.json"), []byte(noCafe), 0o644); err != nil {
		t.Fatal(err)
	}
	boardtest.WaitFor(t, 30*time.Second, "the station to leave cafe", func() bool {
		j := getNetwork(t, b).Joined
		return j != nil && j.SSID == "lab"
	})
	// Forget the joined network: the reply first, then attic (the only
	// known network left in range) is joined.
	if r := do("DELETE", "/network/known?ssid=lab", nil); r.Status != 200 {
		t.Fatalf("forget: %d %s", r.Status, r.Body)
	}
	boardtest.WaitFor(t, 30*time.Second, "attic", func() bool {
		j := getNetwork(t, b).Joined
		return j != nil && j.SSID == "attic"
	})
	// Station off: nothing joined, kept across a restart.
	do("PATCH", "/network", `{"sta_enabled":false}`)
	boardtest.WaitFor(t, 30*time.Second, "station off", func() bool { return getNetwork(t, b).Joined == nil })
	b.Stop()
	b = boardtest.Start(t, dir)
	st = getNetwork(t, b)
	b.Stop()
	bodies = append(bodies, b.Log())
	if st.STAEnabled || st.Joined != nil || !st.AP.On || st.AP.OffInS == nil {
		t.Errorf("after restart with the station off: %+v", st)
	}
	for _, secret := range []string{"lab-secret-1", "attic-secret-2", "not-the-one"} {
		for _, body := range bodies {
			if strings.Contains(body, secret) {
				t.Errorf("passphrase %q in a reply or log: %s", secret, body)
			}
		}
	}
}
