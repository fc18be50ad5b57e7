package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/boardtest"
	"github.com/holofleet/holofleet/firmware/ota"
)

var (
	exeOnce sync.Once
	exe     []byte
)

// boardImage packs the test build of holo-board as an image of version.
// The version a board reports comes from the image it booted, so one
// build serves as every version.
func boardImage(t testing.TB, version string) []byte {
	t.Helper()
	exeOnce.Do(func() {
		var err error
		exe, err = os.ReadFile(boardtest.Binary(t))
		if err != nil {
			t.Fatal(err)
		}
	})
	img, err := image.Pack(image.Desc{Project: "holo-board", Version: version, Date: "Jan  1 2026", Time: "12:00:00", IDF: "host-test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// scriptImage is an image whose executable exits at once: a firmware that
// never comes up.
func scriptImage(t testing.TB, version string) []byte {
	img, err := image.Pack(image.Desc{Project: "holo-board", Version: version, Date: "Jan  1 2026", Time: "12:00:00", IDF: "host-test"},
		[]byte("#!/bin/sh\necho broken firmware >&2\nexit 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// put uploads raw bytes (boardtest.Do sends []byte as is).
func put(b *boardtest.Board, img []byte, query string, opts ...boardtest.Option) boardtest.Reply {
	return b.Do("PUT", "/ota/image"+query, img, append([]boardtest.Option{boardtest.Header("Content-Type", "application/octet-stream")}, opts...)...)
}

// get reads a JSON resource over plain HTTP, tolerating a board that is
// restarting (connections refused or reset while the firmware changes).
func get(b *boardtest.Board, path string) (map[string]any, bool) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(b.URL + "/api/v1" + path)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, false
	}
	var m map[string]any
	if json.NewDecoder(resp.Body).Decode(&m) != nil {
		return nil, false
	}
	return m, true
}

func version(b *boardtest.Board) string {
	m, ok := get(b, "/info")
	if !ok {
		return ""
	}
	return m["firmware"].(map[string]any)["version"].(string)
}

type otaView struct {
	Rollback bool `json:"rollback"`
	Slots    []struct {
		Label   string   `json:"label"`
		Running bool     `json:"running"`
		Boots   bool     `json:"boots"`
		State   *string  `json:"state"`
		App     *ota.App `json:"app"`
	} `json:"slots"`
	Session ota.Session `json:"session"`
}

func otaState(t testing.TB, b *boardtest.Board) otaView {
	t.Helper()
	var v otaView
	b.Do("GET", "/ota", nil).JSON(t, &v)
	return v
}

func (v otaView) running() (label, version, state string) {
	for _, s := range v.Slots {
		if s.Running {
			st := "null"
			if s.State != nil {
				st = *s.State
			}
			ver := ""
			if s.App != nil {
				ver = s.App.Version
			}
			return s.Label, ver, st
		}
	}
	return "", "", ""
}

func waitVersion(t *testing.T, b *boardtest.Board, want string) {
	t.Helper()
	boardtest.WaitFor(t, 60*time.Second, "firmware.version "+want, func() bool { return version(b) == want })
}

func waitConfirmed(t *testing.T, b *boardtest.Board, label string) {
	t.Helper()
	boardtest.WaitFor(t, 30*time.Second, label+" confirmed", func() bool {
		l, _, st := otaState(t, b).running()
		return l == label && st == "confirmed"
	})
}

// TestOTAUpdateToNewVersion updates a running board over HTTP, sees the
// new version after the restart with its slot confirmed, then goes back
// to the previous firmware with POST /ota/activate.
func TestOTAUpdateToNewVersion(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	v := otaState(t, b)
	first := version(b)
	if l, ver, st := v.running(); l != "ota_0" || ver != first || st != "confirmed" || v.Rollback {
		t.Fatalf("first start: %s %s %s %+v", l, ver, st, v)
	}
	img := boardImage(t, "7.1.0")
	r := put(b, img, "?sha256="+sha(img)+"&activate=1&reboot=1")
	var s ota.Session
	r.JSON(t, &s)
	if r.Status != 200 || s.State != "active" || !s.BootsNext || *s.Slot != "ota_1" {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	waitVersion(t, b, "7.1.0")
	waitConfirmed(t, b, "ota_1")
	v = otaState(t, b)
	if !v.Rollback || *v.Slots[0].State != "confirmed" || v.Slots[0].App.Version != first {
		t.Fatalf("after update: %+v", v)
	}
	// Back to the previous firmware.
	r = b.Do("POST", "/ota/activate", `{"slot":"ota_0"}`)
	if r.Status != 202 {
		t.Fatalf("activate ota_0: %d %s", r.Status, r.Body)
	}
	waitVersion(t, b, first)
	if l, _, st := otaState(t, b).running(); l != "ota_0" || st != "confirmed" {
		t.Fatalf("back: %s %s", l, st)
	}
}

// TestOTAFailedTrialRollsBack: an image that never comes up, and one the
// fault hook makes fail its trial; both times the old version returns and
// the slot is recorded rolled back.
func TestOTAFailedTrialRollsBack(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "", "--fault-fail-trial", "6.6.6")
	first := version(b)
	for _, img := range [][]byte{scriptImage(t, "5.0.0"), boardImage(t, "6.6.6")} {
		r := put(b, img, "?activate=true")
		if r.Status != 200 {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		boardtest.WaitFor(t, 60*time.Second, "rollback", func() bool {
			m, ok := get(b, "/ota")
			if !ok {
				return false
			}
			st, _ := m["slots"].([]any)[1].(map[string]any)["state"].(string)
			return st == "rolled_back"
		})
		if got := version(b); got != first {
			t.Fatalf("version after rollback %q, want %q", got, first)
		}
		v := otaState(t, b)
		if l, _, st := v.running(); l != "ota_0" || st != "confirmed" || v.Rollback || !v.Slots[0].Boots {
			t.Fatalf("after rollback: %+v", v)
		}
		if r := b.Do("POST", "/ota/activate", `{"slot":"ota_1"}`); r.Status != 422 || r.ErrorCode() != "invalid_image" {
			t.Fatalf("activating the rolled-back slot: %d %s", r.Status, r.Body)
		}
	}
	b.Stop() // the log is read once the process is gone (boardtest's buffer is not safe to read while written)
	if !strings.Contains(b.Log(), "rolling back") || !strings.Contains(b.Log(), "fault hook") {
		t.Errorf("log lacks the rollbacks:\n%s", b.Log())
	}
}

// TestOTAHTTPRules checks the upload's HTTP rules on the real board.
func TestOTAHTTPRules(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	if r := b.Do("PUT", "/ota/image", nil); r.Status != 422 && r.Status != 411 {
		t.Fatalf("empty upload: %d %s", r.Status, r.Body)
	}
	req, _ := http.NewRequest("PUT", b.URL+"/api/v1/ota/image", io.MultiReader(strings.NewReader("abc")))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 411 {
		t.Fatalf("chunked upload: %d", resp.StatusCode)
	}
	if r := put(b, bytes.Repeat([]byte{0xFF}, 8192), ""); r.Status != 422 || r.ErrorCode() != "invalid_image" {
		t.Fatalf("otadata-like file: %d %s", r.Status, r.Body)
	}
	if r := b.Do("DELETE", "/ota/image", nil); r.Status != 200 {
		t.Fatalf("delete failed session: %d %s", r.Status, r.Body)
	}
	if r := put(b, scriptImage(t, "1.0.0"), "", boardtest.Host("evil.example")); r.Status != 403 {
		t.Fatalf("forbidden host: %d", r.Status)
	}
	if r := b.Do("GET", "/ota/image", nil); r.Status != 200 {
		t.Fatalf("GET /ota/image: %d", r.Status)
	}
}

// TestOTAPowerCuts pulls the power (kill -9 of the board process) at
// random moments of an update: while the image streams in, around the end
// of the stream (verification and staging), between the activation and
// the restart, and during the trial boot, before or after the image
// confirms itself. After each cut the board starts again, serves a
// firmware that is one of the two versions, and GET /ota agrees with
// GET /info. make test cuts once in each phase, make soak four times
// (HOLO_POWERCUTS=N sets the number of cuts).
func TestOTAPowerCuts(t *testing.T) {
	t.Parallel()
	n := testlevel.Pick(4, 16)
	if s := os.Getenv("HOLO_POWERCUTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("HOLO_POWERCUTS=%q: %v", s, err)
		}
	}
	dir := t.TempDir()
	b := boardtest.Start(t, dir)
	base := version(b)
	img := boardImage(t, "8.0.0")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	// How long an upload takes here, to aim the cuts.
	start := time.Now()
	if r := put(b, img, ""); r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	uploadTime := time.Since(start)
	b.Do("DELETE", "/ota/image", nil)
	phases := map[string]int{}
	outcomes := map[string]int{}
	for i := range n {
		phase := []string{"upload", "verify", "activate", "trial"}[i%4]
		phases[phase]++
		if version(b) == "8.0.0" {
			b.Do("POST", "/ota/activate", `{"slot":"ota_0","reboot":true}`)
			boardtest.WaitFor(t, 60*time.Second, "back to base", func() bool { return version(b) == base })
		}
		if s := otaState(t, b).Session; s.State != "idle" {
			b.Do("DELETE", "/ota/image", nil)
		}
		upload := func() {
			c := http.Client{Timeout: 60 * time.Second}
			req, _ := http.NewRequest("PUT", b.URL+"/api/v1/ota/image?activate=1&reboot=1", bytes.NewReader(img))
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		// The cut comes at a random moment of the phase: a delay from a
		// point the test sees (the upload's start or end, or a line the
		// bootloader or the firmware logs).
		var delay time.Duration
		switch phase {
		case "upload":
			delay = time.Duration(rng.Int64N(int64(uploadTime)))
			go upload()
		case "verify":
			delay = uploadTime*8/10 + time.Duration(rng.Int64N(int64(uploadTime)*3/10))
			go upload()
		case "activate":
			upload()
			delay = time.Duration(rng.Int64N(int64(ota.UpdateRestartDelay)))
		case "trial":
			// The trial boot, then before or after the image confirms.
			boots, confirms := strings.Count(b.Log(), "trial=true"), strings.Count(b.Log(), "image confirmed")
			upload()
			boardtest.WaitFor(t, 60*time.Second, "the trial boot", func() bool { return strings.Count(b.Log(), "trial=true") > boots })
			if rng.IntN(2) == 1 {
				phase = "trial, confirmed"
				boardtest.WaitFor(t, 60*time.Second, "the image to confirm", func() bool {
					return strings.Count(b.Log(), "image confirmed") > confirms
				})
			}
			delay = time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
		}
		time.Sleep(delay) // the random moment of the cut, not a wait for anything
		b.Kill()
		b = boardtest.Start(t, dir)
		got := version(b)
		if got != base && got != "8.0.0" {
			t.Fatalf("cut %d (%s after %v): version %q", i, phase, delay, got)
		}
		v := otaState(t, b)
		l, ver, st := v.running()
		if ver != got || (st != "confirmed" && st != "trial") {
			t.Fatalf("cut %d (%s after %v): /info %s but /ota says %s %s %s: %+v", i, phase, delay, got, l, ver, st, v)
		}
		if got == "8.0.0" {
			waitConfirmed(t, b, l)
		}
		if s := v.Session; s.State != "idle" {
			t.Fatalf("cut %d: a fresh start has session %+v", i, s)
		}
		other := "null"
		if o := v.Slots[1]; o.State != nil {
			other = *o.State
		}
		outcome := fmt.Sprintf("%s runs %s, ota_1 %s", phase, ver, other)
		outcomes[outcome]++
		t.Logf("cut %d: %s after %v: running %s (%s, %s), ota_1 %s", i, phase, delay, l, ver, st, other)
	}
	t.Logf("power cuts tried: %d %v (upload takes %v)", n, phases, uploadTime)
	t.Logf("outcomes: %v", outcomes)
}
