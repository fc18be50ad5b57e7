package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rollout"
	"github.com/holofleet/holofleet/store"
)

// startFirmwareGateway runs the API with a real firmware store and
// rollout engine over n fleet-mode boards; it returns the URL, the
// admin and viewer secrets and the board ids.
func startFirmwareGateway(t *testing.T, n int) (string, string, string, []string) {
	t.Helper()
	return startFirmwareGatewayKeys(t, n, nil, nil)
}

// startFirmwareGatewayKeys is startFirmwareGateway with board i burning
// boardKeys(i) and the store trusting trusted.
func startFirmwareGatewayKeys(t *testing.T, n int, boardKeys func(int) []image.KeyDigest, trusted []image.KeyDigest) (string, string, string, []string) {
	t.Helper()
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: n, BaseDir: t.TempDir(), Parallel: 8, OTA: &fleetmode.OTAOptions{Keys: boardKeys}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	var ids []string
	for _, b := range fm.Boards() {
		if err := ld.Add(b.URL, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := toks.Create("admin", auth.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	viewer, _, err := toks.Create("viewer", auth.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	fl := fleet.New(fleet.Options{Drivers: []fleet.Driver{ld}})
	var eng *rollout.Engine
	arts, err := artifact.Open(artifact.Options{Dir: filepath.Join(dir, "artifacts"), DB: db,
		InUse: func(sha string) bool { return eng != nil && eng.Uses(sha) }, Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	eng, err = rollout.New(rollout.Options{DB: db, Fleet: fl, Artifacts: arts, Poll: 50 * time.Millisecond, Tick: 50 * time.Millisecond, Kick: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Fleet: fl, Tokens: toks, Registerer: reg, Gatherer: reg, Artifacts: arts, Rollouts: eng})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fl.Run(ctx) })
	wg.Go(func() { eng.Run(ctx) })
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		db.Close()
	})
	online := true
	deadline := time.Now().Add(30 * time.Second)
	for len(fl.Boards(fleet.Filter{Online: &online})) < n {
		if time.Now().After(deadline) {
			t.Fatal("boards not online")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + ln.Addr().String(), admin, viewer, ids
}

func TestHoloctlFirmwareAndRollout(t *testing.T) {
	base, admin, viewer, ids := startFirmwareGateway(t, 3)
	holoctl := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if code := run(ctx, args, &out, &errb); code != want {
			t.Fatalf("holoctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	gw := []string{"--gateway", base, "--token-file", tokenFile(t, admin)}

	exe := bytes.Repeat([]byte("2.0.0|"), 8<<10)
	img, err := image.Pack(image.Desc{Version: "2.0.0", Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "fw.bin")
	if err := os.WriteFile(file, img, 0o644); err != nil {
		t.Fatal(err)
	}
	out := holoctl(0, append([]string{"fw", "upload", file, "--name", "release.bin", "-o", "json"}, gw...)...)
	var up struct{ Artifact struct{ SHA256, Name string } }
	if err := json.Unmarshal([]byte(out), &up); err != nil || up.Artifact.Name != "release.bin" {
		t.Fatalf("upload -o json: %v\n%s", err, out)
	}
	sha := up.Artifact.SHA256
	if out := holoctl(0, append([]string{"fw", "upload", file}, gw...)...); !strings.Contains(out, "already stored") {
		t.Errorf("second upload:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.bin"), []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := holoctl(1, append([]string{"fw", "upload", filepath.Join(dir, "junk.bin")}, gw...)...); !strings.Contains(out, "400 invalid_argument") {
		t.Errorf("junk upload:\n%s", out)
	}
	if out := holoctl(1, "fw", "upload", file, "--gateway", base, "--token-file", tokenFile(t, viewer)); !strings.Contains(out, "403") {
		t.Errorf("viewer upload:\n%s", out)
	}
	if out := holoctl(0, append([]string{"fw", "list"}, gw...)...); !strings.Contains(out, sha[:12]) || !strings.Contains(out, "2.0.0") {
		t.Errorf("fw list:\n%s", out)
	}
	if out := holoctl(0, append([]string{"fw", "channel", "stable", sha[:10]}, gw...)...); !strings.Contains(out, "channel stable -> "+sha) {
		t.Errorf("fw channel:\n%s", out)
	}
	if out := holoctl(0, append([]string{"fw", "channels"}, gw...)...); !strings.Contains(out, "stable") {
		t.Errorf("fw channels:\n%s", out)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"artifact":"`+sha+`","target":{"all":true},"thresholds":{"wave_failure":2}}`), 0o644)
	if out := holoctl(1, append([]string{"rollout", "create", bad}, gw...)...); !strings.Contains(out, "threshold wave_failure 2 outside") {
		t.Errorf("bad plan:\n%s", out)
	}
	plan := filepath.Join(dir, "plan.json")
	os.WriteFile(plan, []byte(`{"name":"ctl","artifact":"`+sha+`","target":{"boards":["`+ids[0]+`","`+ids[1]+`","nobody"]},"canaries":["`+ids[0]+`"]}`), 0o644)
	out = holoctl(0, append([]string{"rollout", "dry-run", plan}, gw...)...)
	if !strings.Contains(out, "2 boards in 2 waves, 1 refused") || !strings.Contains(out, "unknown board") {
		t.Errorf("dry-run:\n%s", out)
	}
	out = holoctl(0, append([]string{"rollout", "create", plan, "-o", "json"}, gw...)...)
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID == "" {
		t.Fatalf("create: %v\n%s", err, out)
	}
	out = holoctl(0, append([]string{"rollout", "watch", r.ID}, gw...)...)
	if !strings.Contains(out, "rollout        done") || !strings.Contains(out, "succeeded") {
		t.Errorf("watch:\n%s", out)
	}
	if out := holoctl(0, append([]string{"rollout", "get", r.ID}, gw...)...); !strings.Contains(out, "2/2 done (100%), 0 failed") || !strings.Contains(out, "succeeded=2") {
		t.Errorf("get:\n%s", out)
	}
	if out := holoctl(0, append([]string{"rollout", "boards", r.ID}, gw...)...); !strings.Contains(out, ids[0]+"  1") || strings.Count(out, "succeeded") != 2 {
		t.Errorf("boards:\n%s", out)
	}
	if out := holoctl(0, append([]string{"rollout", "list"}, gw...)...); !strings.Contains(out, r.ID) || !strings.Contains(out, "ctl") {
		t.Errorf("list:\n%s", out)
	}
	if out := holoctl(1, append([]string{"rollout", "pause", r.ID, "--reason", "x"}, gw...)...); !strings.Contains(out, "412 failed_precondition") {
		t.Errorf("pause of a done rollout:\n%s", out)
	}
	holoctl(2, append([]string{"rollout", "get"}, gw...)...)
	holoctl(2, append([]string{"rollout", "bogus", "x"}, gw...)...)
}

// TestRolloutWatchWindow: a rollout waiting for its window says so first
// in holoctl rollout watch (it shows no events until the window opens)
// and in rollout get: when it next opens, in the window's time zone and
// in UTC.
func TestRolloutWatchWindow(t *testing.T) {
	base, admin, _, _ := startFirmwareGateway(t, 1)
	gw := []string{"--gateway", base, "--token-file", tokenFile(t, admin)}
	img, err := image.Pack(image.Desc{Version: "2.0.0", Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"},
		bytes.Repeat([]byte("2.0.0|"), 4<<10))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "fw.bin")
	if err := os.WriteFile(file, img, 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := func(ctx context.Context, out io.Writer, args ...string) int {
		return run(ctx, append(args, gw...), out, out)
	}
	var up bytes.Buffer
	if code := ctl(context.Background(), &up, "fw", "upload", file, "-o", "json"); code != 0 {
		t.Fatalf("upload: %s", up.String())
	}
	var a struct{ Artifact struct{ SHA256 string } }
	if err := json.Unmarshal(up.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "plan.json")
	os.WriteFile(plan, []byte(`{"artifact":"`+a.Artifact.SHA256+`","target":{"all":true},"window":{"time_zone":"Europe/Paris","strict":true,`+
		`"intervals":[{"from":"2030-01-01T00:00:00Z","to":"2030-01-01T02:00:00Z"}]}}`), 0o644)
	var created bytes.Buffer
	if code := ctl(context.Background(), &created, "rollout", "create", plan, "-o", "json"); code != 0 {
		t.Fatalf("create: %s", created.String())
	}
	var r struct{ ID string }
	if err := json.Unmarshal(created.Bytes(), &r); err != nil || r.ID == "" {
		t.Fatalf("create: %v %s", err, created.String())
	}
	const want = "window closed, next opens 2030-01-01 01:00 CET (Europe/Paris; 00:00 UTC)"
	var get bytes.Buffer
	if code := ctl(context.Background(), &get, "rollout", "get", r.ID); code != 0 || !strings.Contains(get.String(), "closed, next opens 2030-01-01 01:00 CET (Europe/Paris; 00:00 UTC)") {
		t.Errorf("rollout get:\n%s", get.String())
	}
	// watch streams until the rollout finishes, which it will not before
	// 2030: the test stops it once the window line is out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- ctl(ctx, out, "rollout", "watch", r.ID) }()
	waitOutput(t, out, want)
	cancel()
	<-done
	if first, _, _ := strings.Cut(out.String(), "\n"); first != want {
		t.Errorf("watch's first line %q, want %q", first, want)
	}
}
