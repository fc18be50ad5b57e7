package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rollout"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
	"github.com/holofleet/holofleet/store"
)

// fwImage packs a host image of holo-board with version and size bytes
// of payload.
func fwImage(t testing.TB, version string, size int) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), size/(len(version)+1)+1)[:size]
	b, err := image.Pack(image.Desc{Version: version, Project: buildinfo.Project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fwGateway is a test gateway with a real firmware store and rollout
// engine over n fleet-mode boards with the update service.
type fwGateway struct {
	*testGateway
	fm   *fleetmode.Fleet
	ids  []string
	arts *artifact.Store
	eng  *rollout.Engine
	fl   *fleet.Fleet
}

// With idle, the engine is not run: rollouts change state on request but
// no board is driven (the controls test needs nothing more).
func startFirmwareGateway(t *testing.T, n int, idle bool) *fwGateway {
	t.Helper()
	return startFirmwareGatewayKeys(t, n, idle, fwKeys{})
}

// fwKeys are the keys of a firmware test gateway: what board i burns, and
// what the gateway's store trusts and holds revoked.
type fwKeys struct {
	boards           func(i int) []image.KeyDigest
	trusted, revoked []image.KeyDigest
}

func startFirmwareGatewayKeys(t *testing.T, n int, idle bool, keys fwKeys) *fwGateway {
	t.Helper()
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: n, BaseDir: t.TempDir(), Parallel: 8, OTA: &fleetmode.OTAOptions{Keys: keys.boards}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Stop() })
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	g := &fwGateway{fm: fm}
	for _, b := range fm.Boards() {
		if err := ld.Add(b.URL, ""); err != nil {
			t.Fatal(err)
		}
		g.ids = append(g.ids, b.ID)
	}
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "fw.db"))
	if err != nil {
		t.Fatal(err)
	}
	g.fl = fleet.New(fleet.Options{Drivers: []fleet.Driver{ld}})
	g.arts, err = artifact.Open(artifact.Options{Dir: filepath.Join(dir, "artifacts"), DB: db,
		InUse: func(sha string) bool { return g.eng != nil && g.eng.Uses(sha) }, Trusted: keys.trusted, Revoked: keys.revoked})
	if err != nil {
		t.Fatal(err)
	}
	g.eng, err = rollout.New(rollout.Options{DB: db, Fleet: g.fl, Artifacts: g.arts, Poll: 50 * time.Millisecond,
		Tick: 50 * time.Millisecond, Kick: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { g.fl.Run(ctx) })
	if !idle {
		wg.Go(func() { g.eng.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		db.Close()
	})
	// Registered after the cleanup above, so the server stops first.
	g.testGateway = startGateway(t, func(c *Config) {
		c.Fleet, c.Artifacts, c.Rollouts = g.fl, g.arts, g.eng
	})
	online := true
	deadline := time.Now().Add(30 * time.Second)
	for len(g.fl.Boards(fleet.Filter{Online: &online})) < n {
		if time.Now().After(deadline) {
			t.Fatalf("boards not online")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return g
}

// upload posts body to /v1/artifacts as role.
func (g *testGateway) upload(t *testing.T, role, query string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", g.url+"/v1/artifacts"+query, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+g.secrets[role])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFirmwareEndToEnd uploads an image over REST, publishes it on a
// channel, dry-runs and creates a rollout over REST and follows it to
// the end through both the REST and the gRPC watch.
func TestFirmwareEndToEnd(t *testing.T) {
	g := startFirmwareGateway(t, 3, false)
	img := fwImage(t, "2.0.0", 48<<10)

	code, body := g.upload(t, "admin", "?name=holo-2.0.0.bin", img)
	if code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	var up struct {
		Artifact struct {
			SHA256 string `json:"sha256"`
			Size   string `json:"size"`
			Name   string `json:"name"`
			App    struct{ Version string }
		}
		Existed bool
	}
	if err := json.Unmarshal([]byte(body), &up); err != nil {
		t.Fatal(err)
	}
	sha := up.Artifact.SHA256
	if len(sha) != 64 || up.Existed || up.Artifact.Name != "holo-2.0.0.bin" || up.Artifact.App.Version != "2.0.0" || up.Artifact.Size != fmt.Sprint(len(img)) {
		t.Fatalf("upload reply %s", body)
	}
	if code, body := g.upload(t, "admin", "?sha256="+sha, img); code != 200 || !strings.Contains(body, `"existed":true`) {
		t.Errorf("second upload: %d %s, want existed", code, body)
	}
	if code, body := g.upload(t, "admin", "?sha256="+strings.Repeat("0", 64), img); code != 400 || !strings.Contains(body, "expected") {
		t.Errorf("upload with the wrong sha256: %d %s, want 400", code, body)
	}
	bad := append([]byte(nil), img...)
	bad[len(bad)/2] ^= 0xff
	if code, body := g.upload(t, "admin", "", bad); code != 400 || !strings.Contains(body, `"error":"invalid_argument"`) {
		t.Errorf("corrupt upload: %d %s, want 400", code, body)
	}
	if code, body := g.upload(t, "viewer", "", img); code != 403 {
		t.Errorf("viewer upload: %d %s, want 403", code, body)
	}

	ctx := g.ctx(t, "admin")
	a, err := g.client.GetArtifact(ctx, &fleetv1.GetArtifactRequest{Sha256: sha})
	if err != nil || a.GetApp().GetVersion() != "2.0.0" || a.GetAdded() == nil {
		t.Fatalf("GetArtifact = %v, %v", a, err)
	}
	if code, body := g.rest(t, "viewer", "GET", "/v1/artifacts", ""); code != 200 || !strings.HasPrefix(body, "[") || !strings.Contains(body, sha) {
		t.Errorf("GET /v1/artifacts: %d %s", code, body)
	}
	if code, body := g.rest(t, "admin", "PUT", "/v1/channels/stable", `{"sha256":"`+sha+`"}`); code != 200 || !strings.Contains(body, `"version":"2.0.0"`) {
		t.Errorf("PUT /v1/channels/stable: %d %s", code, body)
	}
	chs, err := g.client.ListChannels(ctx, &fleetv1.ListChannelsRequest{})
	if err != nil || len(chs.GetChannels()) != 1 || chs.GetChannels()[0].GetSha256() != sha {
		t.Errorf("ListChannels = %v, %v", chs, err)
	}
	if code, body := g.rest(t, "admin", "DELETE", "/v1/artifacts/"+sha, ""); code != 412 || !strings.Contains(body, "channel stable") {
		t.Errorf("delete of a published artifact: %d %s, want 412", code, body)
	}

	// Bad plans come back with the engine's words.
	for plan, want := range map[string]string{
		`{"artifact":"` + sha + `"}`: "empty target",
		`{"artifact":"` + sha + `","target":{"all":true},"thresholds":{"success":1.5}}`: "threshold success 1.5 outside",
		`{"artifact":"` + strings.Repeat("a", 64) + `","target":{"all":true}}`:          "not found",
		`{"artifact":"` + sha + `","target":{"all":true},"soak":"soon"}`:                `soak \"soon\" is not a duration`,
		`{"artifact":"` + sha + `","target":{"boards":["nobody"]}}`:                     "selects no board",
	} {
		code, body := g.rest(t, "admin", "POST", "/v1/rollouts", plan)
		if code != 400 || !strings.Contains(body, `"error":"invalid_argument"`) || !strings.Contains(body, want) {
			t.Errorf("POST /v1/rollouts %s: %d %s, want 400 with %q", plan, code, body, want)
		}
	}
	if _, err := g.client.CreateRollout(ctx, &fleetv1.CreateRolloutRequest{Plan: &fleetv1.RolloutPlan{Artifact: sha}}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "empty target") {
		t.Errorf("gRPC CreateRollout of an empty target: %v", err)
	}

	plan := `{"name":"api","artifact":"` + sha + `","target":{"all":true},"canaries":["` + g.ids[1] + `"],` +
		`"waves":[{"count":1}],"growth":2,"timeouts":{"restart":"30s"}}`
	code, body = g.rest(t, "viewer", "POST", "/v1/rollouts/dry-run", plan)
	if code != 200 {
		t.Fatalf("dry run: %d %s", code, body)
	}
	var sel struct {
		Waves []struct{ Boards []string }
	}
	if err := json.Unmarshal([]byte(body), &sel); err != nil {
		t.Fatal(err)
	}
	if len(sel.Waves) != 3 || sel.Waves[0].Boards[0] != g.ids[1] {
		t.Errorf("dry run waves %s", body)
	}
	if code, body := g.rest(t, "viewer", "POST", "/v1/rollouts", plan); code != 403 {
		t.Errorf("viewer creates: %d %s, want 403", code, body)
	}
	code, body = g.rest(t, "admin", "POST", "/v1/rollouts", plan)
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created fleetv1.Rollout
	if err := protojson.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	id := created.GetId()
	if created.GetState() != rollout.StateRunning || created.GetPlan().GetTimeouts().GetRestart() != "30s" || created.GetPlan().GetMaxInFlight() != 10 {
		t.Errorf("created %s", body)
	}

	// The gRPC watch runs beside the REST one.
	grpcDone := make(chan []*fleetv1.RolloutEvent, 1)
	go func() {
		var evs []*fleetv1.RolloutEvent
		defer func() { grpcDone <- evs }()
		s, err := g.client.WatchRollout(ctx, &fleetv1.WatchRolloutRequest{Id: id, UntilFinished: true})
		if err != nil {
			return
		}
		for {
			ev, err := s.Recv()
			if err != nil {
				return
			}
			evs = append(evs, ev)
		}
	}()

	req, _ := http.NewRequest("GET", g.url+"/v1/rollouts/"+id+"/events?until_finished=true", nil)
	req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(wctx))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var last, phases []string
	for sc.Scan() {
		var line struct {
			Result *struct{ Board, State, Phase string }
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Result == nil {
			t.Fatalf("event line %s: %v", sc.Bytes(), err)
		}
		if line.Result.Board == "" {
			last = append(last, line.Result.State)
		} else {
			phases = append(phases, line.Result.Phase)
		}
	}
	resp.Body.Close()
	if len(last) == 0 || last[len(last)-1] != rollout.StateDone {
		t.Fatalf("REST watch ended with rollout states %v, want the last done", last)
	}
	if !strings.Contains(strings.Join(phases, ","), rollout.PhaseSucceeded) {
		t.Errorf("board phases %v lack succeeded", phases)
	}
	select {
	case evs := <-grpcDone:
		if len(evs) == 0 || evs[len(evs)-1].GetState() != rollout.StateDone {
			t.Errorf("gRPC watch: %d events, last %v", len(evs), evs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gRPC watch did not end")
	}

	got, err := g.client.GetRollout(ctx, &fleetv1.GetRolloutRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetFinished() || got.GetProgress().GetPhases()[rollout.PhaseSucceeded] != 3 || got.GetProgress().GetPercent() != 100 || got.GetWave() != 3 {
		t.Errorf("GetRollout = %v", got)
	}
	code, body = g.rest(t, "viewer", "GET", "/v1/rollouts/"+id+"/boards", "")
	var boards []struct {
		Board    string
		Wave     int
		Phase    string
		Timeline []struct{ Phase string }
	}
	if err := json.Unmarshal([]byte(body), &boards); code != 200 || err != nil || len(boards) != 3 {
		t.Fatalf("boards: %d %s %v", code, body, err)
	}
	if boards[0].Board != g.ids[1] || boards[0].Phase != rollout.PhaseSucceeded || len(boards[0].Timeline) < 4 {
		t.Errorf("canary's timeline %+v", boards[0])
	}
	if code, body := g.rest(t, "viewer", "GET", "/v1/rollouts", ""); code != 200 || !strings.Contains(body, id) {
		t.Errorf("GET /v1/rollouts: %d %s", code, body)
	}
	// A finished rollout cannot be paused or resumed.
	if code, body := g.rest(t, "operator", "POST", "/v1/rollouts/"+id+"/pause", `{}`); code != 412 || !strings.Contains(body, "failed_precondition") {
		t.Errorf("pause of a done rollout: %d %s, want 412", code, body)
	}
	if _, err := g.client.ResumeRollout(ctx, &fleetv1.ResumeRolloutRequest{Id: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("resume of a done rollout: %v", err)
	}
	if code, body := g.rest(t, "viewer", "GET", "/v1/rollouts/nope", ""); code != 404 {
		t.Errorf("unknown rollout: %d %s", code, body)
	}

	// Delete: an unused artifact goes; an unknown one is not found.
	img3 := fwImage(t, "3.0.0", 8<<10)
	s, err := g.client.UploadArtifact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(img3); i += 1000 {
		m := &fleetv1.UploadArtifactRequest{Chunk: img3[i:min(i+1000, len(img3))]}
		if i == 0 {
			m.Name = "three.bin"
		}
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	up3, err := s.CloseAndRecv()
	if err != nil || up3.GetArtifact().GetApp().GetVersion() != "3.0.0" || up3.GetArtifact().GetName() != "three.bin" {
		t.Fatalf("gRPC upload = %v, %v", up3, err)
	}
	if _, err := g.client.DeleteArtifact(ctx, &fleetv1.DeleteArtifactRequest{Sha256: up3.GetArtifact().GetSha256()}); err != nil {
		t.Errorf("DeleteArtifact: %v", err)
	}
	if code, body := g.rest(t, "admin", "GET", "/v1/artifacts/"+up3.GetArtifact().GetSha256(), ""); code != 404 {
		t.Errorf("deleted artifact: %d %s", code, body)
	}
	if code, body := g.rest(t, "admin", "DELETE", "/v1/channels/stable", ""); code != 200 {
		t.Errorf("DELETE /v1/channels/stable: %d %s", code, body)
	}
}

// TestRolloutControls pauses, resumes, aborts and reverts rollouts over
// gRPC and REST, the brakes as an operator.
func TestRolloutControls(t *testing.T) {
	g := startFirmwareGateway(t, 2, true)
	ctx := g.ctx(t, "admin")
	a, _, err := g.arts.Add(context.Background(), bytes.NewReader(fwImage(t, "2.1.0", 8<<10)), "x.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	plan := &fleetv1.RolloutPlan{Artifact: a.SHA256, Target: &fleetv1.RolloutTarget{All: true}}
	r, err := g.client.CreateRollout(ctx, &fleetv1.CreateRolloutRequest{Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	op := g.ctx(t, "operator")
	if p, err := g.client.PauseRollout(op, &fleetv1.PauseRolloutRequest{Id: r.GetId(), Reason: "lunch"}); err != nil || p.GetState() != rollout.StatePaused || p.GetReason() != "lunch" {
		t.Fatalf("PauseRollout = %v, %v", p, err)
	}
	if _, err := g.client.ResumeRollout(op, &fleetv1.ResumeRolloutRequest{Id: r.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("operator resumes: %v, want PermissionDenied", err)
	}
	if code, body := g.rest(t, "admin", "POST", "/v1/rollouts/"+r.GetId()+"/resume", `{}`); code != 200 || !strings.Contains(body, `"state":"running"`) {
		t.Errorf("REST resume: %d %s", code, body)
	}
	if code, body := g.rest(t, "operator", "POST", "/v1/rollouts/"+r.GetId()+"/abort", `{"reason":"stop"}`); code != 200 || !strings.Contains(body, `"state":"aborted"`) {
		t.Errorf("REST abort: %d %s", code, body)
	}
	if _, err := g.client.AbortRollout(op, &fleetv1.AbortRolloutRequest{Id: r.GetId()}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("abort twice: %v, want FailedPrecondition", err)
	}
	if code, body := g.rest(t, "operator", "POST", "/v1/rollouts/"+r.GetId()+"/revert", `{}`); code != 403 {
		t.Errorf("operator reverts: %d %s, want 403", code, body)
	}
	rv, err := g.client.RevertRollout(ctx, &fleetv1.RevertRolloutRequest{Id: r.GetId(), Reason: "bad"})
	if err != nil || rv.GetState() != rollout.StateReverting {
		t.Errorf("RevertRollout = %v, %v", rv, err)
	}
	if _, err := g.client.RevertRollout(ctx, &fleetv1.RevertRolloutRequest{Id: r.GetId()}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("revert twice: %v", err)
	}
	// A watch of every rollout (gRPC only) replays the story so far.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := g.client.WatchRollout(wctx, &fleetv1.WatchRolloutRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for len(states) < 5 {
		ev, err := s.Recv()
		if err != nil {
			t.Fatalf("watch after %v: %v", states, err)
		}
		if ev.GetBoard() == "" {
			states = append(states, ev.GetState())
		}
	}
	want := []string{"running", "paused", "running", "aborted", "reverting"}
	if diff := cmp.Diff(states, want); diff != "" {
		t.Errorf("rollout states (-got +want):\n%s", diff)
	}
}

// firmwareCalls is one call of every firmware RPC with the role it
// needs, over gRPC and REST.
var firmwareCalls = []struct {
	name, need         string
	grpc               func(ctx context.Context, c fleetv1.FleetServiceClient) error
	method, path, body string
}{
	{"UploadArtifact", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		s, err := c.UploadArtifact(ctx)
		if err != nil {
			return err
		}
		_ = s.Send(&fleetv1.UploadArtifactRequest{Chunk: []byte("junk")})
		_, err = s.CloseAndRecv()
		return err
	}, "POST", "/v1/artifacts", "junk"},
	{"ListArtifacts", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ListArtifacts(ctx, &fleetv1.ListArtifactsRequest{})
		return err
	}, "GET", "/v1/artifacts", ""},
	{"GetArtifact", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.GetArtifact(ctx, &fleetv1.GetArtifactRequest{Sha256: strings.Repeat("a", 64)})
		return err
	}, "GET", "/v1/artifacts/" + strings.Repeat("a", 64), ""},
	{"DeleteArtifact", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.DeleteArtifact(ctx, &fleetv1.DeleteArtifactRequest{Sha256: strings.Repeat("a", 64)})
		return err
	}, "DELETE", "/v1/artifacts/" + strings.Repeat("a", 64), ""},
	{"SetChannel", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.SetChannel(ctx, &fleetv1.SetChannelRequest{Name: "beta", Sha256: strings.Repeat("a", 64)})
		return err
	}, "PUT", "/v1/channels/beta", `{"sha256":"` + strings.Repeat("a", 64) + `"}`},
	{"ListChannels", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ListChannels(ctx, &fleetv1.ListChannelsRequest{})
		return err
	}, "GET", "/v1/channels", ""},
	{"DeleteChannel", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.DeleteChannel(ctx, &fleetv1.DeleteChannelRequest{Name: "beta"})
		return err
	}, "DELETE", "/v1/channels/beta", ""},
	{"DryRunRollout", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.DryRunRollout(ctx, &fleetv1.DryRunRolloutRequest{Plan: &fleetv1.RolloutPlan{}})
		return err
	}, "POST", "/v1/rollouts/dry-run", `{}`},
	{"CreateRollout", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.CreateRollout(ctx, &fleetv1.CreateRolloutRequest{Plan: &fleetv1.RolloutPlan{}})
		return err
	}, "POST", "/v1/rollouts", `{}`},
	{"ListRollouts", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ListRollouts(ctx, &fleetv1.ListRolloutsRequest{})
		return err
	}, "GET", "/v1/rollouts", ""},
	{"GetRollout", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.GetRollout(ctx, &fleetv1.GetRolloutRequest{Id: "nope"})
		return err
	}, "GET", "/v1/rollouts/nope", ""},
	{"ListRolloutBoards", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ListRolloutBoards(ctx, &fleetv1.ListRolloutBoardsRequest{Id: "nope"})
		return err
	}, "GET", "/v1/rollouts/nope/boards", ""},
	{"PauseRollout", "operator", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.PauseRollout(ctx, &fleetv1.PauseRolloutRequest{Id: "nope"})
		return err
	}, "POST", "/v1/rollouts/nope/pause", `{}`},
	{"ResumeRollout", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ResumeRollout(ctx, &fleetv1.ResumeRolloutRequest{Id: "nope"})
		return err
	}, "POST", "/v1/rollouts/nope/resume", `{}`},
	{"AbortRollout", "operator", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.AbortRollout(ctx, &fleetv1.AbortRolloutRequest{Id: "nope"})
		return err
	}, "POST", "/v1/rollouts/nope/abort", `{}`},
	{"RevertRollout", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.RevertRollout(ctx, &fleetv1.RevertRolloutRequest{Id: "nope"})
		return err
	}, "POST", "/v1/rollouts/nope/revert", `{}`},
	{"WatchRollout", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := c.WatchRollout(ctx, &fleetv1.WatchRolloutRequest{Id: "nope"})
		if err != nil {
			return err
		}
		md, err := s.Header()
		if err == nil && len(md.Get(WatchHeader)) == 0 {
			_, err = s.Recv()
		}
		return err
	}, "GET", "/v1/rollouts/nope/events", ""},
}

// TestFirmwareRoles: every role against every firmware call; a role that
// may make a call gets the call's own answer (often not found here),
// never 401 or 403.
func TestFirmwareRoles(t *testing.T) {
	g := startFirmwareGateway(t, 1, true)
	rank := map[string]int{"viewer": 1, "operator": 2, "admin": 3}
	for _, c := range firmwareCalls {
		if _, ok := rules["/holo.fleet.v1.FleetService/"+c.name]; !ok {
			t.Errorf("%s is missing from the method table", c.name)
		}
		for _, role := range []string{"", "viewer", "operator", "admin"} {
			var want codes.Code = codes.OK
			switch {
			case role == "":
				want = codes.Unauthenticated
			case rank[role] < rank[c.need]:
				want = codes.PermissionDenied
			}
			err := c.grpc(g.ctx(t, role), g.client)
			got := status.Code(err)
			if (want == codes.OK && (got == codes.Unauthenticated || got == codes.PermissionDenied)) || (want != codes.OK && got != want) {
				t.Errorf("gRPC %s as %q: %v, want %v", c.name, role, err, want)
			}
			code, body := g.rest(t, role, c.method, c.path, c.body)
			if (want == codes.OK && (code == 401 || code == 403)) || (want != codes.OK && code != httpStatus(want)) {
				t.Errorf("REST %s %s as %q: %d %s, want %v", c.method, c.path, role, code, body, want)
			}
		}
	}
}

// TestFirmwareDisabled: a gateway without a store or an engine answers
// the firmware calls UNIMPLEMENTED (501).
func TestFirmwareDisabled(t *testing.T) {
	g := startGateway(t)
	for _, c := range firmwareCalls {
		if err := c.grpc(g.ctx(t, "admin"), g.client); status.Code(err) != codes.Unimplemented {
			t.Errorf("gRPC %s: %v, want Unimplemented", c.name, err)
		}
		if code, body := g.rest(t, "admin", c.method, c.path, c.body); code != 501 {
			t.Errorf("REST %s: %d %s, want 501", c.name, code, body)
		}
	}
}

func TestFirmwareErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("%w: empty target", rollout.ErrPlan), codes.InvalidArgument},
		{fmt.Errorf("%w: %w: artifact x", rollout.ErrArtifact, artifact.ErrNotFound), codes.InvalidArgument},
		{fmt.Errorf("%w: \"x\"", rollout.ErrNotFound), codes.NotFound},
		{rollout.ErrState, codes.FailedPrecondition},
		{rollout.ErrClosed, codes.Unavailable},
		{artifact.ErrNotFound, codes.NotFound},
		{artifact.ErrInvalid, codes.InvalidArgument},
		{artifact.ErrTooLarge, codes.InvalidArgument},
		{artifact.ErrBadName, codes.InvalidArgument},
		{artifact.ErrInUse, codes.FailedPrecondition},
		{ErrDisabled, codes.Unimplemented},
	} {
		if got := Status(tc.err).Code(); got != tc.code {
			t.Errorf("Status(%v) = %v, want %v", tc.err, got, tc.code)
		}
	}
}

// TestPlanJSON: the engine's plan JSON is the plan message's JSON, and a
// plan survives PlanOf then PlanFrom.
func TestPlanJSON(t *testing.T) {
	p := rollout.Plan{
		Name: "all", Artifact: strings.Repeat("ab", 32),
		Target:   rollout.Target{Boards: []string{"b1"}, Groups: []int{2, 3}, Labels: map[string]string{"room": "hall"}, Firmware: "1.0.0", OnlineOnly: true},
		Canaries: []string{"b1"}, Waves: []rollout.Wave{{Count: 2}, {Percent: 25}}, Growth: 2, MaxInFlight: 5, MaxRestarting: 3,
		Timeouts:   rollout.Timeouts{Transfer: rollout.Duration(90 * time.Second), Restart: rollout.Duration(2*time.Minute + 30*time.Second), Confirm: rollout.Duration(time.Minute)},
		Soak:       rollout.Duration(10 * time.Minute),
		Thresholds: rollout.Thresholds{Success: 0.9, WaveFailure: 0.5, TotalFailure: 0.2, MinSample: 3, Action: rollout.ActionRevert},
		Retries:    3, Backoff: rollout.Duration(5 * time.Second), Bandwidth: 1 << 20,
		Window: &rollout.Window{Start: "22:00", End: "04:00", Days: []string{"mon", "tue"}, TimeZone: "Europe/Paris", Strict: true,
			Intervals: []rollout.Interval{{From: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)}}},
		Method:     rollout.MethodPush,
		Health:     &rollout.Health{MinUptime: rollout.Duration(10 * time.Minute), MaxLinkErrors: 0.01, MinHeapFree: 65536, ClockSynced: true, Skip: true},
		IgnoreShow: true, FullImages: true,
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m fleetv1.RolloutPlan
	if err := protojson.Unmarshal(b, &m); err != nil {
		t.Fatalf("the engine's plan JSON is not a RolloutPlan: %v\n%s", err, b)
	}
	got, err := PlanFrom(&m)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, p); diff != "" {
		t.Errorf("PlanFrom(engine JSON) (-got +want):\n%s", diff)
	}
	back, err := PlanFrom(PlanOf(p))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(back, p); diff != "" {
		t.Errorf("PlanFrom(PlanOf(p)) (-got +want):\n%s", diff)
	}
	if _, err := PlanFrom(nil); !errors.Is(err, rollout.ErrPlan) {
		t.Errorf("PlanFrom(nil) = %v", err)
	}
	_, err = PlanFrom(&fleetv1.RolloutPlan{Backoff: "x", Timeouts: &fleetv1.RolloutTimeouts{Confirm: "1 minute"}})
	if !errors.Is(err, rollout.ErrPlan) || !strings.Contains(err.Error(), "backoff") || !strings.Contains(err.Error(), "timeouts.confirm") {
		t.Errorf("bad durations: %v", err)
	}
}
