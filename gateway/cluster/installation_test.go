package cluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/cluster"
)

// installStatus is GET /v1/installation/status.
type installStatus struct {
	Revision struct {
		N int `json:"n"`
	} `json:"revision"`
	Boards []struct {
		Board   string `json:"board"`
		State   string `json:"state"`
		Summary string `json:"summary"`
		Gateway string `json:"gateway"`
	} `json:"boards"`
}

type revisionJSON struct {
	N       int    `json:"n"`
	Message string `json:"message"`
	Who     string `json:"who"`
}

// installDesc is a description giving every board of ids a profile
// with one image, a scene showing it and the backlight.
func installDesc(ids []string, sha string, size int64, backlight int) map[string]any {
	var as []map[string]any
	for _, id := range ids {
		as = append(as, map[string]any{"profile": "show", "board": id})
	}
	return map[string]any{
		"version": 1, "name": "cluster-show",
		"content": map[string]any{"logo": map[string]any{"sha256": sha, "size": size}},
		"profiles": map[string]any{"show": map[string]any{
			"files":    map[string]any{"/images/logo.png": "logo"},
			"scenes":   map[string]any{"logo": map[string]any{"slot": 1, "screen": map[string]any{"path": "/images/logo.png"}}},
			"settings": map[string]any{"screen": map[string]any{"backlight": backlight}},
		}},
		"assignments": as,
	}
}

// uploadContent adds b to g's content store (admin) and returns its
// SHA-256.
func uploadContent(t *testing.T, g *gwProc, b []byte) string {
	t.Helper()
	sum := sha256.Sum256(b)
	sha := hex.EncodeToString(sum[:])
	req, _ := http.NewRequest("POST", g.base()+"/v1/installation/content?sha256="+sha, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		out, _ := io.ReadAll(resp.Body)
		t.Fatalf("content to %s: %d %s", g.name, resp.StatusCode, out)
	}
	return sha
}

// boardHolds checks on the board itself (its own HTTP API) that it
// holds the image and the backlight.
func boardHolds(url string, backlight int) error {
	var l struct {
		Entries []struct {
			Name string `json:"name"`
		} `json:"entries"`
	}
	if err := httpJSON(url+"/api/v1/fs/list?path=/images", &l); err != nil {
		return err
	}
	if !slices.ContainsFunc(l.Entries, func(e struct {
		Name string `json:"name"`
	}) bool {
		return e.Name == "logo.png"
	}) {
		return fmt.Errorf("board %s: no /images/logo.png: %+v", url, l.Entries)
	}
	var s struct {
		Screen struct {
			Backlight int `json:"backlight"`
		} `json:"screen"`
	}
	if err := httpJSON(url+"/api/v1/settings", &s); err != nil {
		return err
	}
	if s.Screen.Backlight != backlight {
		return fmt.Errorf("board %s: backlight %d, want %d", url, s.Screen.Backlight, backlight)
	}
	return nil
}

// statusAll waits until g's installation status lists every board of
// want (board id -> owning gateway) in sync at revision rev, each with
// its owner, and nothing else.
func statusAll(t *testing.T, g *gwProc, rev int, want map[string]string, d time.Duration) {
	t.Helper()
	eventually(t, d, g.name+" reports every board in sync at revision "+fmt.Sprint(rev), func() error {
		var st installStatus
		if err := httpJSON(g.base()+"/v1/installation/status", &st); err != nil {
			return err
		}
		if st.Revision.N != rev {
			return fmt.Errorf("revision %d, want %d", st.Revision.N, rev)
		}
		if len(st.Boards) != len(want) {
			return fmt.Errorf("%d boards, want %d: %+v", len(st.Boards), len(want), st.Boards)
		}
		for _, b := range st.Boards {
			if b.State != "in_sync" || b.Gateway != want[b.Board] {
				return fmt.Errorf("board %s: %s (%s) on %q, want in_sync on %q", b.Board, b.State, b.Summary, b.Gateway, want[b.Board])
			}
		}
		return nil
	})
}

// idle waits until no gateway has an unfinished installation run.
func idle(t *testing.T, gws []*gwProc, d time.Duration) {
	t.Helper()
	for _, g := range gws {
		eventually(t, d, g.name+" finishes its run", func() error {
			var cur struct {
				Run *struct {
					ID    int    `json:"id"`
					State string `json:"state"`
				} `json:"run"`
			}
			if err := httpJSON(g.base()+"/v1/installation", &cur); err != nil {
				return err
			}
			if cur.Run != nil {
				return fmt.Errorf("run %d is %s", cur.Run.ID, cur.Run.State)
			}
			return nil
		})
	}
}

// TestInstallationCluster: one installation over three gateways on the
// embedded engine. Content added on gw2 and a description applied on gw1
// reach the boards every gateway owns; status on any gateway lists every
// board with its gateway; applies on two gateways at once never store
// the same revision twice (the loser gets 409 and nothing is stored); a
// gateway joining later applies the current revision to its boards.
func TestInstallationCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway processes")
	}
	t.Parallel()
	img, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "media", "image-240.png"))
	if err != nil {
		t.Skipf("shared media: %v", err)
	}
	tc := startCluster(t, "embedded")
	boards := tc.waitListing(t, 30*time.Second)
	owner, urlOf := map[string]string{}, map[string]string{}
	var ids []string
	for _, b := range boards {
		owner[b.ID], urlOf[b.ID] = b.Gateway, b.URL
		ids = append(ids, b.ID)
	}
	gw1, gw2, gw3 := tc.gws[0], tc.gws[1], tc.gws[2]

	// Content goes up on gw2 only; gw1 takes it from the cluster.
	sha := uploadContent(t, gw2, img)
	var started struct {
		Revision revisionJSON `json:"revision"`
	}
	// The description's gateway sections are the installation's: a cue
	// list applied on gw1 is set on every gateway.
	first := installDesc(ids, sha, int64(len(img)), 41)
	first["cuelists"] = []map[string]any{{"name": "cluster-show", "cues": []map[string]any{{"number": 1,
		"actions": []map[string]any{{"kind": "leds", "selector": map[string]any{"all": true}, "body": map[string]any{"mode": "off"}}}}}}}
	gw1.restJSON(t, "POST", "/v1/installation/apply?message=first", first, &started)
	if started.Revision.N != 1 {
		t.Fatalf("first apply: revision %d, want 1", started.Revision.N)
	}
	for _, g := range tc.gws {
		statusAll(t, g, 1, owner, 30*time.Second)
		eventually(t, 30*time.Second, g.name+" holds the revision's cue list", func() error {
			_, b := g.rest(t, "GET", "/v1/cuelists/cluster-show", nil)
			if !strings.Contains(string(b), `"cluster-show"`) {
				return fmt.Errorf("GET /v1/cuelists/cluster-show: %s", b)
			}
			return nil
		})
	}
	for _, id := range ids {
		if err := boardHolds(urlOf[id], 41); err != nil {
			t.Fatalf("board of %s: %v", owner[id], err)
		}
	}
	planExportEverywhere(t, gw1, gw2, installDesc(ids, sha, int64(len(img)), 41), owner, sha)

	// Two gateways apply at once, three times over: every revision
	// number is stored once; a loser gets 409 and its message is nowhere.
	type result struct {
		code int
		body []byte
		msg  string
	}
	var won []revisionJSON
	var lost []string
	conflicts := 0
	for round := range 3 {
		idle(t, tc.gws, 30*time.Second)
		var wg sync.WaitGroup
		res := make([]result, 2)
		for i, g := range []*gwProc{gw1, gw2} {
			msg := fmt.Sprintf("%s-round%d", g.name, round)
			wg.Go(func() {
				code, body := g.rest(t, "POST", "/v1/installation/apply?message="+msg, installDesc(ids, sha, int64(len(img)), 50+round))
				res[i] = result{code, body, msg}
			})
		}
		wg.Wait()
		for _, r := range res {
			switch r.code {
			case 200:
				var s struct {
					Revision revisionJSON `json:"revision"`
				}
				if err := json.Unmarshal(r.body, &s); err != nil {
					t.Fatal(err)
				}
				won = append(won, s.Revision)
			case 409:
				// Lost the revision number (aborted), or the winner's run
				// already started here (failed_precondition): nothing stored.
				if !strings.Contains(string(r.body), `"aborted"`) && !strings.Contains(string(r.body), `"failed_precondition"`) {
					t.Fatalf("apply %s: 409 %s", r.msg, r.body)
				}
				if strings.Contains(string(r.body), `"aborted"`) {
					conflicts++
				}
				lost = append(lost, r.msg)
			default:
				t.Fatalf("apply %s: %d %s", r.msg, r.code, r.body)
			}
		}
		if len(lost) == 2*(round+1) {
			t.Fatalf("round %d: both applies refused", round)
		}
	}
	t.Logf("concurrent applies: %d stored, %d refused (%d lost the revision number)", len(won), len(lost), conflicts)
	var hist struct {
		Revisions []revisionJSON `json:"revisions"`
	}
	for _, g := range tc.gws {
		g.restJSON(t, "GET", "/v1/installation/history", nil, &hist)
		seen := map[int]bool{}
		byMsg := map[string]int{}
		for _, r := range hist.Revisions {
			if seen[r.N] {
				t.Fatalf("%s: revision %d twice: %+v", g.name, r.N, hist.Revisions)
			}
			seen[r.N] = true
			byMsg[r.Message] = r.N
		}
		for _, w := range won {
			if byMsg[w.Message] != w.N {
				t.Fatalf("%s: apply %q answered revision %d; history has %d", g.name, w.Message, w.N, byMsg[w.Message])
			}
		}
		for _, m := range lost {
			if _, ok := byMsg[m]; ok {
				t.Fatalf("%s: refused apply %q is in the history", g.name, m)
			}
		}
		if len(hist.Revisions) != 1+len(won) {
			t.Fatalf("%s: %d revisions, want %d", g.name, len(hist.Revisions), 1+len(won))
		}
	}
	sort.Slice(won, func(i, j int) bool { return won[i].N < won[j].N })
	last := won[len(won)-1]
	var lastBacklight int
	fmt.Sscanf(last.Message[strings.Index(last.Message, "round")+5:], "%d", &lastBacklight)
	lastBacklight += 50
	// Every board converges on the newest revision, whichever gateway's
	// run of which racing revision was aborted for which (a gateway that
	// hears late of an older revision made current by the other does
	// not abort its own newer run for it: TestFollowLateWordOfOlderRevision
	// forces that interleaving).
	for _, g := range []*gwProc{gw3, gw2, gw1} {
		statusAll(t, g, last.N, owner, 30*time.Second)
	}
	for _, id := range ids {
		if err := boardHolds(urlOf[id], lastBacklight); err != nil {
			t.Fatalf("board of %s: %v", owner[id], err)
		}
	}

	// A gateway joining later applies the current revision to its own
	// boards (assigned by group in a new revision, which names boards it
	// does not know yet).
	idle(t, tc.gws, 30*time.Second)
	s4 := startSite(t, lineBoards, 0)
	desc := installDesc(ids, sha, int64(len(img)), 60)
	desc["assignments"] = append(desc["assignments"].([]map[string]any),
		map[string]any{"profile": "show", "group": 1}, map[string]any{"profile": "show", "group": 2})
	gw3.restJSON(t, "POST", "/v1/installation/apply?message=groups", desc, &started)
	statusAll(t, gw1, started.Revision.N, owner, 30*time.Second)
	gw4 := newGateway(t, "gw4", gw1.join, s4, false)
	gw4.start(t)
	t.Cleanup(gw4.stop)
	for _, u := range s4.lineURLs {
		tc.owner[u], tc.lines[u] = "gw4", true
	}
	tc.gws = append(tc.gws, gw4)
	boards = tc.waitListing(t, 30*time.Second)
	for _, b := range boards {
		owner[b.ID], urlOf[b.ID] = b.Gateway, b.URL
	}
	for _, g := range []*gwProc{gw4, gw1} {
		statusAll(t, g, started.Revision.N, owner, 30*time.Second)
	}
	for _, u := range s4.lineURLs {
		if err := boardHolds(u, 60); err != nil {
			t.Fatalf("gw4's board: %v", err)
		}
	}

	// A revision written by an engine login without the cluster secret
	// is never applied: the boards keep revision N's backlight, and the
	// next real apply takes the number after it.
	forged := started.Revision.N + 1
	forgeRevision(t, gw1, forged, installDesc(ids, sha, int64(len(img)), 99))
	eventually(t, 20*time.Second, "gw2 refuses the forged revision", func() error {
		if !strings.Contains(gw2.log.String(), "not signed by a gateway") {
			return fmt.Errorf("no refusal logged yet")
		}
		return nil
	})
	statusAll(t, gw1, started.Revision.N, owner, 30*time.Second) // the last good revision stands
	desc = installDesc(ids, sha, int64(len(img)), 61)
	desc["assignments"] = append(desc["assignments"].([]map[string]any),
		map[string]any{"profile": "show", "group": 1}, map[string]any{"profile": "show", "group": 2})
	gw2.restJSON(t, "POST", "/v1/installation/apply?message=after-forgery", desc, &started)
	if started.Revision.N != forged+1 {
		t.Fatalf("apply after the forgery: revision %d, want %d", started.Revision.N, forged+1)
	}
	statusAll(t, gw3, started.Revision.N, owner, 30*time.Second)
	for id, u := range urlOf {
		if err := boardHolds(u, 61); err != nil {
			t.Fatalf("board %s of %s: %v", id, owner[id], err)
		}
	}
	gw1.restJSON(t, "GET", "/v1/installation/history", nil, &hist)
	for _, r := range hist.Revisions {
		if r.N == forged {
			t.Fatalf("the forged revision is in the history: %+v", r)
		}
	}
}

// planExportEverywhere: a plan on one gateway covers every gateway's
// boards, each planned by its owner (in sync, named with its gateway), and
// an export on another gateway holds every board of the installation
// once, with the files the boards hold.
func planExportEverywhere(t *testing.T, planOn, exportOn *gwProc, desc map[string]any, owner map[string]string, sha string) {
	t.Helper()
	var plan installStatus // a plan's boards are listed as status lists them
	planOn.restJSON(t, "POST", "/v1/installation/plan", desc, &plan)
	if len(plan.Boards) != len(owner) {
		t.Fatalf("plan on %s: %d boards, want every board of the installation (%d): %+v", planOn.name, len(plan.Boards), len(owner), plan.Boards)
	}
	for _, b := range plan.Boards {
		if b.State != "in_sync" || b.Gateway != owner[b.Board] {
			t.Fatalf("plan on %s: board %s %s (%s) on %q, want in_sync on %q", planOn.name, b.Board, b.State, b.Summary, b.Gateway, owner[b.Board])
		}
	}
	var ex struct {
		Description struct {
			Content map[string]struct {
				SHA256 string `json:"sha256"`
			} `json:"content"`
			Assignments []map[string]any `json:"assignments"`
		} `json:"description"`
		Warnings []string `json:"warnings"`
	}
	exportOn.restJSON(t, "POST", "/v1/installation/export", map[string]any{}, &ex)
	if len(ex.Description.Assignments) != len(owner) {
		t.Fatalf("export on %s: %d boards, want every board of the installation (%d): %+v; warnings %v", exportOn.name,
			len(ex.Description.Assignments), len(owner), ex.Description.Assignments, ex.Warnings)
	}
	found := false
	for _, c := range ex.Description.Content {
		found = found || c.SHA256 == sha
	}
	if !found {
		t.Fatalf("export on %s: the boards' image is not in its content: %+v", exportOn.name, ex.Description.Content)
	}
}

// forgeRevision writes revision n into the engine as a bare engine
// client would (an engine login, no cluster secret) and makes it
// current.
func forgeRevision(t *testing.T, gw1 *gwProc, n int, desc map[string]any) {
	t.Helper()
	creds, err := cluster.MintCredentials(filepath.Join(gw1.data, "engine"), "intruder", filepath.Join(t.TempDir(), "intruder.creds"))
	if err != nil {
		t.Fatal(err)
	}
	nc := rawClient(t, gw1.join, creds, "intruder")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cluster.BucketInstallation)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := json.Marshal(desc)
	rec, _ := json.Marshal(map[string]any{"n": n, "who": "intruder", "when": time.Now(), "run": 1, "description": json.RawMessage(d)})
	env, _ := json.Marshal(map[string]any{"data": json.RawMessage(rec), "sig": "forged"})
	if _, err := kv.Create(ctx, fmt.Sprintf("rev.%08d", n), env); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "current", []byte(fmt.Sprint(n))); err != nil {
		t.Fatal(err)
	}
}
