package cluster_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/testlevel"
)

// testImage packs a host image of holo-board with version and size bytes
// of payload.
func testImage(t testing.TB, version string, size int) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), size/(len(version)+1)+1)[:size]
	b, err := image.Pack(image.Desc{Version: version, Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upload posts an image to g's firmware store and returns its SHA-256.
func upload(g *gwProc, img []byte) (string, error) {
	sum := sha256.Sum256(img)
	sha := hex.EncodeToString(sum[:])
	req, _ := http.NewRequest("POST", g.base()+"/v1/artifacts?name=fw.bin&sha256="+sha, bytes.NewReader(img))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("upload to %s: %d %s", g.name, resp.StatusCode, b)
	}
	return sha, nil
}

var coordinatorMetric = regexp.MustCompile(`holo_gateway_cluster_coordinator\{gateway="([^"]+)"\} 1`)

// coordinator returns the gateway that says it coordinates rollouts, or
// nil.
func (tc *testCluster) coordinator() *gwProc {
	for _, g := range tc.gws {
		if _, m := get(g.base() + "/metrics"); coordinatorMetric.MatchString(m) {
			return g
		}
	}
	return nil
}

type rolloutJSON struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Reason   string `json:"reason"`
	Finished bool   `json:"finished"`
	Progress struct {
		Phases map[string]int `json:"phases"`
	} `json:"progress"`
}

// phaseRank orders a board's rollout phases: how far the board got.
var phaseRank = map[string]int{"pending": 0, "staging": 1, "staged": 2, "activating": 3, "restarting": 4}

// progress is how far a rollout got: the sum of its boards' phase ranks
// (a finished board counts 5). It only grows while the rollout runs.
func (ro rolloutJSON) progress() int {
	n := 0
	for ph, k := range ro.Progress.Phases {
		r, ok := phaseRank[ph]
		if !ok {
			r = 5
		}
		n += r * k
	}
	return n
}

// rolloutOn reads rollout id from g.
func rolloutOn(t *testing.T, g *gwProc, id string) (rolloutJSON, error) {
	var ro rolloutJSON
	code, b := g.rest(t, "GET", "/v1/rollouts/"+id, nil)
	if code != 200 {
		return ro, fmt.Errorf("%s: %d %s", g.name, code, b)
	}
	return ro, jsonUnmarshal(b, &ro)
}

// TestRolloutKills runs rollouts across three gateways on a three-node
// engine cluster and kills the rollout coordinator with SIGKILL at random
// points of the rollout's progress (kills times: 3 in make test, 50 in
// make soak), starting it again at once or once another gateway has
// taken over. After each kill the test waits for the rollout to move on.
// Every rollout must finish with every board of every gateway running
// the new image, confirmed, having booted it exactly once, and none left
// staged.
func TestRolloutKills(t *testing.T) {
	if testing.Short() {
		t.Skip("kills gateway processes")
	}
	t.Parallel()
	minKills := testlevel.Pick(3, 50)
	tc := startCluster(t, "three-nodes")
	boards := tc.waitListing(t, 60*time.Second)
	urls := map[string]string{} // board id -> URL
	siteOf := map[string]*site{}
	for _, b := range boards {
		urls[b.ID] = b.URL
		for _, s := range tc.sites {
			if slices.Contains(s.lineURLs, b.URL) || slices.Contains(s.lanURLs, b.URL) {
				siteOf[b.ID] = s
			}
		}
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(2, seed))
	start := time.Now()
	kills, midway, takeovers := 0, 0, 0
	booted := map[string][]string{}
	for id := range urls {
		booted[id] = siteOf[id].bootsOf(urls[id])
		if len(booted[id]) != 1 {
			t.Fatalf("board %s booted %v before any rollout", id, booted[id])
		}
	}
	for round := 0; kills < minKills; round++ {
		version := fmt.Sprintf("%d.0.0", round+2)
		img := testImage(t, version, 8<<10)
		var sha string
		eventually(t, 30*time.Second, "upload "+version, func() error {
			var err error
			sha, err = upload(tc.gws[rng.IntN(3)], img)
			return err
		})
		plan := map[string]any{"artifact": sha, "target": map[string]any{"all": true}, "waves": []map[string]any{{"percent": 100}},
			"max_in_flight": 3, "bandwidth": 24 << 10, "retries": 20, "backoff": "100ms"}
		var ro rolloutJSON
		eventually(t, 30*time.Second, "create rollout "+version, func() error {
			code, b := tc.gws[rng.IntN(3)].rest(t, "POST", "/v1/rollouts", plan)
			if code != 200 {
				return fmt.Errorf("%d %s", code, b)
			}
			return jsonUnmarshal(b, &ro)
		})
		for !ro.Finished {
			// The coordinator, and a gateway to watch the rollout from.
			var co, other *gwProc
			eventually(t, 30*time.Second, "a coordinator", func() error {
				if co = tc.coordinator(); co == nil {
					return fmt.Errorf("none")
				}
				return nil
			})
			for _, g := range tc.gws {
				if g != co {
					other = g
				}
			}
			// Kill it at a random point of the rollout's progress: at
			// once, or once the boards got up to three phases further.
			var before rolloutJSON
			eventually(t, 30*time.Second, "rollout status", func() error {
				var err error
				before, err = rolloutOn(t, other, ro.ID)
				return err
			})
			target := before.progress() + rng.IntN(4)
			eventually(t, 60*time.Second, fmt.Sprintf("round %d: rollout %s progresses to %d", round, ro.ID, target), func() error {
				r, err := rolloutOn(t, other, ro.ID)
				if err != nil {
					return err
				}
				if before = r; !r.Finished && r.progress() < target {
					return fmt.Errorf("progress %d: %+v", r.progress(), r)
				}
				return nil
			})
			if before.Finished {
				ro = before
				break
			}
			co.kill()
			kills++
			if before.Progress.Phases["pending"] < len(boards) {
				midway++
			}
			if rng.IntN(2) == 0 {
				// Another gateway takes over before it is back.
				takeovers++
				eventually(t, 20*time.Second, "another coordinator", func() error {
					if n := tc.coordinator(); n == nil || n == co {
						return fmt.Errorf("none yet")
					}
					return nil
				})
			}
			co.start(t)
			// The rollout moves on (or finishes) after the kill.
			eventually(t, 60*time.Second, fmt.Sprintf("round %d: rollout %s moves on after kill %d", round, ro.ID, kills), func() error {
				r, err := rolloutOn(t, other, ro.ID)
				if err != nil {
					return err
				}
				if ro = r; !r.Finished && r.progress() <= before.progress() {
					return fmt.Errorf("progress %d, %d at the kill: %+v", r.progress(), before.progress(), r)
				}
				return nil
			})
		}
		if ro.State != "done" {
			t.Fatalf("round %d: rollout %s: %s (%s)", round, ro.ID, ro.State, ro.Reason)
		}
		var rbs []struct{ Board, Phase, Error string }
		eventually(t, 30*time.Second, "rollout boards", func() error {
			code, b := tc.gws[rng.IntN(3)].rest(t, "GET", "/v1/rollouts/"+ro.ID+"/boards", nil)
			if code != 200 {
				return fmt.Errorf("%d %s", code, b)
			}
			return jsonUnmarshal(b, &rbs)
		})
		if len(rbs) != len(boards) {
			t.Fatalf("round %d: %d boards in the rollout, want %d", round, len(rbs), len(boards))
		}
		for _, b := range rbs {
			if b.Phase != "succeeded" {
				t.Errorf("round %d: board %s: %s (%s)", round, b.Board, b.Phase, b.Error)
			}
		}
		for id, u := range urls {
			booted[id] = append(booted[id], version)
			if got := siteOf[id].bootsOf(u); !slices.Equal(got, booted[id]) {
				t.Errorf("round %d: board %s booted %v, want %v", round, id, got, booted[id])
			}
			var st struct {
				Session struct{ State string } `json:"session"`
				Slots   []struct {
					Running bool
					State   *string
					App     *struct{ Version string }
				} `json:"slots"`
			}
			if err := httpJSON(u+"/api/v1/ota", &st); err != nil {
				t.Fatal(err)
			}
			if st.Session.State == "staged" {
				t.Errorf("round %d: board %s left staged", round, id)
			}
			for _, s := range st.Slots {
				if s.Running && (s.App == nil || s.App.Version != version || s.State == nil || *s.State != "confirmed") {
					t.Errorf("round %d: board %s runs %+v", round, id, s)
				}
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("round %d: rollout of %s across %d boards done; %d kills so far", round, version, len(boards), kills)
	}
	t.Logf("%d kills of the coordinator (%d with another gateway taking over, %d mid-rollout), every rollout correct, in %v",
		kills, takeovers, midway, time.Since(start).Round(time.Second))
}
