package installation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/registry"
	"github.com/holofleet/holofleet/store"
)

// media is the shared test media (real clips and images).
var media = func() string {
	p, _ := filepath.Abs("../../../shared/media")
	return p
}()

func needMedia(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(media, "clip-240-30fps.mov")); err != nil {
		t.Skipf("shared media not found at %s", media)
	}
}

// counter counts the HTTP requests the gateway sends, per board host,
// leaving out the event streams and clock rounds (which do not use the
// call client).
type counter struct {
	mu sync.Mutex
	n  map[string]int
	rt http.RoundTripper
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.URL.Host]++
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

func (c *counter) reset() {
	c.mu.Lock()
	clear(c.n)
	c.mu.Unlock()
}

func (c *counter) of(url string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[strings.TrimPrefix(url, "http://")]
}

// rig is fleet-mode boards and the part of a gateway an installation
// needs: the LAN driver, the fleet core, the content store and the
// installer over one bbolt file.
type rig struct {
	fm     *fleetmode.Fleet
	boards []fleetmode.Info
	db     *store.DB
	fleet  *fleet.Fleet
	in     *installation.Installer
	count  *counter
	dir    string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startRig(t *testing.T, n int, groups func(i int) []int, tune func(*installation.Options)) *rig {
	t.Helper()
	needMedia(t)
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: n, BaseDir: t.TempDir(), Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	r := &rig{fm: fm, boards: fm.Boards(), dir: t.TempDir()}
	r.startGateway(t, tune)
	return r
}

func (r *rig) startGateway(t *testing.T, tune func(*installation.Options)) {
	t.Helper()
	db, err := store.Open(filepath.Join(r.dir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	r.db = db
	r.count = &counter{n: map[string]int{}, rt: http.DefaultTransport.(*http.Transport).Clone()}
	ld := lan.New(lan.Options{Client: &http.Client{Transport: r.count, Timeout: 30 * time.Second},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ClockEvery: -1})
	for _, b := range r.boards {
		if err := ld.Add(b.URL, ""); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	r.fleet = fleet.New(fleet.Options{Drivers: []fleet.Driver{ld}, Registry: reg})
	contents, err := installation.OpenContents(filepath.Join(r.dir, "content"))
	if err != nil {
		t.Fatal(err)
	}
	// The drift watcher is off unless a test turns it on: its checks
	// would add to the requests the tests count.
	o := installation.Options{DB: db, Fleet: r.fleet, Contents: contents, Tick: 20 * time.Millisecond, BusyWait: 20 * time.Second,
		CheckEvery: -1}
	if tune != nil {
		tune(&o)
	}
	r.in, err = installation.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Go(func() { r.fleet.Run(ctx) })
	r.wg.Go(func() { r.in.Run(ctx) })
	t.Cleanup(r.stopGateway)
	r.waitOnline(t, len(r.boards))
}

func (r *rig) stopGateway() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.wg.Wait()
	r.db.Close()
	r.cancel = nil
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *rig) waitOnline(t *testing.T, n int) {
	t.Helper()
	online := true
	waitFor(t, 30*time.Second, fmt.Sprintf("%d boards online", n), func() bool {
		return len(r.fleet.Boards(fleet.Filter{Online: &online})) >= n
	})
	// The groups come with the link settings, read once a board is seen.
	waitFor(t, 30*time.Second, "every board's groups", func() bool {
		for _, v := range r.fleet.Boards(fleet.Filter{}) {
			if _, ok := r.fleet.State(v.ID, "link"); !ok {
				return false
			}
		}
		return true
	})
}

// parse writes a description and parses it with its content loaded.
func (r *rig) parse(t *testing.T, text string) *installation.Description {
	t.Helper()
	text = strings.ReplaceAll(text, "$MEDIA", media)
	d, err := installation.Parse("installation.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.in.Contents().Load(d, r.dir); err != nil {
		t.Fatal(err)
	}
	return d
}

// apply applies d and waits for its run to finish.
func (r *rig) apply(t *testing.T, d *installation.Description, msg string) (installation.Revision, installation.RunStatus) {
	t.Helper()
	rev, st, err := r.in.Apply(context.Background(), d, "test", msg)
	if err != nil {
		t.Fatal(err)
	}
	return rev, r.waitRun(t, st.ID)
}

func (r *rig) waitRun(t *testing.T, id int) installation.RunStatus {
	t.Helper()
	var st installation.RunStatus
	waitFor(t, 60*time.Second, fmt.Sprintf("run %d to finish", id), func() bool {
		var err error
		st, err = r.in.RunStatus(id)
		if err != nil {
			t.Fatal(err)
		}
		return st.Finished || st.State == installation.RunPaused
	})
	return st
}

// get reads a board's JSON resource directly (not through the gateway).
func get(t *testing.T, url, path string, v any) int {
	t.Helper()
	resp, err := http.Get(url + "/api/v1" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// del deletes on a board by hand.
func del(t *testing.T, url, path string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url+"/api/v1"+path, nil)
	req.Host = strings.TrimPrefix(url, "http://")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("DELETE %s: %d", path, resp.StatusCode)
	}
}

type savedScene struct {
	Name   string `json:"name"`
	Slot   int    `json:"slot"`
	Screen *struct {
		Path string `json:"path"`
	} `json:"screen"`
}

// scenesOf lists a board's saved scenes.
func scenesOf(t *testing.T, url string) []savedScene {
	t.Helper()
	var l struct {
		Scenes []savedScene `json:"scenes"`
	}
	get(t, url, "/scenes", &l)
	return l.Scenes
}

// checkNoDanglingScene asserts the promise: no saved scene names a file
// the board lacks.
func checkNoDanglingScene(t *testing.T, url string) {
	t.Helper()
	for _, s := range scenesOf(t, url) {
		if s.Screen == nil || s.Screen.Path == "" {
			continue
		}
		if code := get(t, url, "/fs/entry?path="+s.Screen.Path, nil); code != 200 {
			t.Errorf("%s: scene %s names %s, which the board lacks (%d)", url, s.Name, s.Screen.Path, code)
		}
	}
}
