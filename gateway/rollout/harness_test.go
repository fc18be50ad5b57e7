package rollout_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rollout"
	"github.com/holofleet/holofleet/store"
)

// testImage packs a host image of holo-board with version and a payload
// of size bytes.
func testImage(t testing.TB, version string, size int) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), size/(len(version)+1)+1)[:size]
	b, err := image.Pack(image.Desc{Version: version, Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// boards is a fleet-mode installation with the update service.
type boards struct {
	fm   *fleetmode.Fleet
	urls []string
	ids  []string

	mu    sync.Mutex
	fail  map[string]bool  // versions whose trial fails
	boots map[int][]string // versions booted per board
}

func startBoards(t testing.TB, n int, failVersions ...string) *boards {
	t.Helper()
	return startBoardsOTA(t, n, nil, failVersions...)
}

// startBoardsOTA is startBoards with the boards' update options tuned.
func startBoardsOTA(t testing.TB, n int, tune func(*fleetmode.OTAOptions), failVersions ...string) *boards {
	t.Helper()
	bs := &boards{fail: map[string]bool{}, boots: map[int][]string{}}
	for _, v := range failVersions {
		bs.fail[v] = true
	}
	oo := &fleetmode.OTAOptions{
		FailTrial: func(i int, a boardapi.App) bool {
			bs.mu.Lock()
			defer bs.mu.Unlock()
			return bs.fail[a.Version]
		},
		OnBoot: func(i int, a boardapi.App) {
			bs.mu.Lock()
			bs.boots[i] = append(bs.boots[i], a.Version)
			bs.mu.Unlock()
		},
	}
	if tune != nil {
		tune(oo)
	}
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: n, BaseDir: t.TempDir(), Parallel: 16, OTA: oo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	bs.fm = fm
	for _, in := range fm.Boards() {
		bs.urls = append(bs.urls, in.URL)
		bs.ids = append(bs.ids, in.ID)
	}
	return bs
}

// bootsOf returns the versions board i booted, in order.
func (bs *boards) bootsOf(i int) []string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return append([]string(nil), bs.boots[i]...)
}

// gateway is the part of the gateway rollouts need: the fleet core on the
// LAN driver, the artifact store and the engine, over one bbolt file.
type gateway struct {
	db     *store.DB
	fleet  *fleet.Fleet
	arts   *artifact.Store
	eng    *rollout.Engine
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startGateway(t testing.TB, dir string, urls []string, tune func(*rollout.Options)) *gateway {
	t.Helper()
	return startGatewayOpts(t, dir, urls, nil, tune)
}

// startGatewayKeys is startGateway with a store that trusts keys.
func startGatewayKeys(t testing.TB, dir string, urls []string, keys []image.KeyDigest) *gateway {
	t.Helper()
	return startGatewayOpts(t, dir, urls, keys, nil)
}

func startGatewayOpts(t testing.TB, dir string, urls []string, keys []image.KeyDigest, tune func(*rollout.Options)) *gateway {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	for _, u := range urls {
		if err := ld.Add(u, ""); err != nil {
			t.Fatal(err)
		}
	}
	g := &gateway{db: db, fleet: fleet.New(fleet.Options{Drivers: []fleet.Driver{ld}})}
	g.arts, err = artifact.Open(artifact.Options{Dir: filepath.Join(dir, "artifacts"), DB: db, Trusted: keys})
	if err != nil {
		t.Fatal(err)
	}
	o := rollout.Options{DB: db, Fleet: g.fleet, Artifacts: g.arts, Poll: 50 * time.Millisecond, Tick: 50 * time.Millisecond, Kick: 2 * time.Second}
	if tune != nil {
		tune(&o)
	}
	g.eng, err = rollout.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.done.Go(func() { g.fleet.Run(ctx) })
	g.done.Go(func() { g.eng.Run(ctx) })
	t.Cleanup(g.stop)
	return g
}

func (g *gateway) stop() {
	if g.cancel == nil {
		return
	}
	g.cancel()
	g.done.Wait()
	g.db.Close()
	g.cancel = nil
}

// waitOnline waits until the fleet sees n boards online.
func (g *gateway) waitOnline(t testing.TB, n int) {
	t.Helper()
	online := true
	deadline := time.Now().Add(30 * time.Second)
	for len(g.fleet.Boards(fleet.Filter{Online: &online})) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d boards online", len(g.fleet.Boards(fleet.Filter{Online: &online})), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *gateway) add(t testing.TB, img []byte) artifact.Artifact {
	t.Helper()
	a, _, err := g.arts.Add(context.Background(), bytes.NewReader(img), "fw.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitState waits until the rollout is finished or in one of states.
func (g *gateway) waitState(t testing.TB, id string, d time.Duration, states ...string) rollout.Status {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, err := g.eng.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if st.State == s && (st.Finished || s == rollout.StatePaused) {
				return st
			}
		}
		if time.Now().After(deadline) {
			bs, _ := g.eng.Boards(id)
			for _, b := range bs {
				t.Logf("board %s wave %d %s %s", b.Board, b.Wave, b.Phase, b.Error)
			}
			t.Fatalf("rollout %s is %s (%s) finished=%v, want %v; progress %+v", id, st.State, st.Reason, st.Finished, states, st.Progress)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
