package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/store"
)

const installYAML = `# two sides
version: 1
prune: true
content:
  clip: {file: media/clip.mov}
  logo: {file: media/logo.png}
profiles:
  left:
    files:
      /clips/intro.mov: clip
      /images/logo.png: logo
    scenes:
      intro: {slot: 1, screen: {path: /clips/intro.mov, loop: true}, leds: {mode: solid, colour: "#00ff88"}}
      logo: {slot: 2, screen: {path: /images/logo.png}}
    settings: {boot_scene: logo, screen: {backlight: 60}}
  right:
    files:
      /images/logo.png: logo
    scenes:
      logo: {slot: 2, screen: {path: /images/logo.png}}
    settings: {boot_scene: logo}
assignments:
  - {profile: left, labels: {side: left}}
  - {profile: right, labels: {side: right}}
`

// TestHoloctlInstall: diff, apply, status, history, export, then the
// boards wiped by hand and the export applied to restore them, and a
// rollback; all through holoctl against a real API over fleet-mode
// boards.
func TestHoloctlInstall(t *testing.T) {
	media := filepath.Join("..", "..", "..", "shared", "media")
	if _, err := os.Stat(filepath.Join(media, "clip-240-30fps.mov")); err != nil {
		t.Skip("shared media not found")
	}
	g := startInstallGW(t, 2, nil)
	fm, fl, admin, viewer := g.fm, g.fl, g.admin, g.viewer
	boards := fm.Boards()
	for i, b := range boards {
		side := map[int]string{0: "left", 1: "right"}[i]
		if _, err := fl.SetLabels(b.ID, map[string]string{"side": side}); err != nil {
			t.Fatal(err)
		}
	}

	work := t.TempDir()
	os.MkdirAll(filepath.Join(work, "media"), 0o755)
	for from, to := range map[string]string{"clip-240-30fps.mov": "clip.mov", "image-240.png": "logo.png"} {
		b, _ := os.ReadFile(filepath.Join(media, from))
		os.WriteFile(filepath.Join(work, "media", to), b, 0o644)
	}
	file := filepath.Join(work, "installation.yaml")
	os.WriteFile(file, []byte(installYAML), 0o644)

	holoctl := g.holoctl(t)
	// A broken file is refused here, with its place.
	bad := filepath.Join(work, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nprofiles: {p: {scenes: {s: {slott: 1}}}}\n"), 0o644)
	if out := holoctl(1, viewer, "install", "diff", "-f", bad); !strings.Contains(out, "bad.yaml:2:") {
		t.Fatalf("bad file: %s", out)
	}
	// The viewer may not apply.
	if out := holoctl(1, viewer, "install", "apply", "-f", file); !strings.Contains(out, "403") {
		t.Fatalf("viewer apply: %s", out)
	}
	out := holoctl(0, admin, "install", "apply", "-f", file, "-m", "first")
	t.Logf("holoctl install apply:\n%s", out)
	for _, want := range []string{"+ file /clips/intro.mov", "+ scene intro", "settings.boot_scene", "revision 1", "2/2 boards", "in_sync"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	waitInSync := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out := holoctl(0, viewer, "install", "status")
			if strings.Count(out, " in_sync ") == 2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not in sync:\n%s", out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitInSync()
	if out := holoctl(0, viewer, "install", "history"); !strings.Contains(out, "first") {
		t.Fatalf("history: %s", out)
	}
	// Export, wipe the boards by hand, restore from the export.
	exp := filepath.Join(t.TempDir(), "backup", "installation.yaml")
	os.MkdirAll(filepath.Dir(exp), 0o755)
	holoctl(0, viewer, "install", "export", "-f", exp)
	wipe := func() {
		for _, b := range boards {
			for _, p := range []string{"/fs/entry?path=/clips&recursive=true", "/fs/entry?path=/images&recursive=true", "/settings",
				"/scenes/scene?name=intro", "/scenes/scene?name=logo"} {
				req, _ := http.NewRequest(http.MethodDelete, b.URL+"/api/v1"+p, nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	}
	wipe()
	if out := holoctl(0, viewer, "install", "status"); !strings.Contains(out, "drifted") {
		t.Fatalf("wiped boards not drifted:\n%s", out)
	}
	out = holoctl(0, admin, "install", "apply", "-f", exp, "-m", "restore")
	if !strings.Contains(out, "revision 2") {
		t.Fatalf("restore: %s", out)
	}
	waitInSync()

	// Export read back from the live boards (admin), wipe, restore.
	live := filepath.Join(t.TempDir(), "live", "installation.yaml")
	os.MkdirAll(filepath.Dir(live), 0o755)
	holoctl(1, viewer, "install", "export", "--from-boards", "-f", live)
	out = holoctl(0, admin, "install", "export", "--from-boards", "-f", live)
	t.Logf("export --from-boards: %s", out)
	liveYAML, _ := os.ReadFile(live)
	t.Logf("%s", liveYAML)
	for _, want := range []string{"/clips/intro.mov", "boot_scene: logo", "slot: 2", "board: "} {
		if !strings.Contains(string(liveYAML), want) {
			t.Errorf("live export lacks %q:\n%s", want, liveYAML)
		}
	}
	wipe()
	holoctl(0, admin, "install", "apply", "-f", live, "-m", "restore from the boards")
	for _, b := range boards {
		if n := len(boardScenes(t, b.URL)); n == 0 {
			t.Errorf("board %s has no scenes after the restore from the live export", b.ID)
		}
	}

	out = holoctl(0, admin, "install", "rollback", "1")
	if !strings.Contains(out, "revision 4") {
		t.Fatalf("rollback: %s", out)
	}
	waitInSync()
}

func boardScenes(t *testing.T, url string) []json.RawMessage {
	t.Helper()
	resp, err := http.Get(url + "/api/v1/scenes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct{ Scenes []json.RawMessage }
	json.NewDecoder(resp.Body).Decode(&l)
	return l.Scenes
}

// installGW is a gateway's installation API (a real API server on port
// 0) over fleet-mode boards on the LAN, for holoctl to drive.
type installGW struct {
	fm            *fleetmode.Fleet
	db            *store.DB
	fl            *fleet.Fleet
	admin, viewer string
	url           string
}

// startInstallGW starts n boards, their LAN driver, a store with an admin
// and a viewer token, and serves an installer over them once every board
// is online. opts, when set, adds to the installer's options (it runs
// once the fleet and the store exist; what it opens and closes with a
// cleanup closes after the gateway stopped, before the store).
func startInstallGW(t *testing.T, n int, opts func(g *installGW, o *installation.Options)) *installGW {
	t.Helper()
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: n, BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ClockEvery: -1})
	for _, b := range fm.Boards() {
		if err := ld.Add(b.URL, ""); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, _ := auth.Open(db)
	admin, _, _ := toks.Create("admin", auth.RoleAdmin)
	viewer, _, _ := toks.Create("viewer", auth.RoleViewer)
	guard := &auth.Guard{Tokens: toks}
	g := &installGW{fm: fm, db: db, fl: fleet.New(fleet.Options{Drivers: []fleet.Driver{ld}}), admin: admin, viewer: viewer}
	contents, _ := installation.OpenContents(filepath.Join(dir, "content"))
	o := installation.Options{DB: db, Fleet: g.fl, Contents: contents, Tick: 20 * time.Millisecond}
	if opts != nil {
		opts(g, &o)
	}
	in, err := installation.New(o)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := in.Handler(guard)
	srv, err := api.New(api.Config{Fleet: g.fl, Tokens: toks, Guard: guard, Registerer: reg, Gatherer: reg,
		Extra: map[string]http.Handler{"/v1/installation": h, "/v1/installation/": h}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { g.fl.Run(ctx) })
	wg.Go(func() { in.Run(ctx) })
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	online := true
	deadline := time.Now().Add(30 * time.Second)
	for len(g.fl.Boards(fleet.Filter{Online: &online})) < n {
		if time.Now().After(deadline) {
			t.Fatal("boards not online")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return g
}

// holoctl returns a runner of holoctl against the gateway with a token
// that fails the test unless the exit code is want; it returns stdout and
// stderr together.
func (g *installGW) holoctl(t *testing.T) func(want int, token string, args ...string) string {
	return func(want int, token string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args = append(args, "--gateway", g.url, "--token-file", tokenFile(t, token))
		if code := run(ctx, args, &out, &errb); code != want {
			t.Fatalf("holoctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
}
