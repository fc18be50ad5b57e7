package rollout_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/rollout"
)

// boardRows returns the rollout's board records by board id.
func boardRows(t *testing.T, g *gateway, id string) map[string]rollout.Board {
	t.Helper()
	bs, err := g.eng.Boards(id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]rollout.Board{}
	for _, b := range bs {
		out[b.Board] = b
	}
	return out
}

// roll runs a rollout of img to the boards and waits until it is done.
func roll(t *testing.T, g *gateway, sha string, boards []string) string {
	t.Helper()
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: sha, Target: rollout.Target{Boards: boards}, MaxInFlight: len(boards)})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	return st.ID
}

// TestDeltaRollout: boards running a release the gateway holds are sent
// a delta to the next one; a board running an image the gateway never had
// (its factory image) is sent the whole image; every board ends on the
// new release, and each board's row says what went and how many bytes.
func TestDeltaRollout(t *testing.T) {
	bs := startBoards(t, 3)
	g := startGateway(t, t.TempDir(), bs.urls, nil)
	g.waitOnline(t, 3)
	a := g.add(t, testImage(t, "2.0.0", 300000))
	b := g.add(t, testImage(t, "2.0.1", 300000))
	first := roll(t, g, a.SHA256, bs.ids[:2])
	for id, row := range boardRows(t, g, first) {
		if row.Phase != rollout.PhaseSucceeded || row.Transfer != rollout.TransferFull || row.Sent != a.Size {
			t.Fatalf("first rollout, board %s: %s %s %d", id, row.Phase, row.Transfer, row.Sent)
		}
	}
	second := roll(t, g, b.SHA256, bs.ids)
	rows := boardRows(t, g, second)
	for i, id := range bs.ids {
		row := rows[id]
		if row.Phase != rollout.PhaseSucceeded {
			t.Fatalf("board %s: %s %s", id, row.Phase, row.Error)
		}
		if i < 2 && (row.Transfer != rollout.TransferDelta || row.Sent <= 0 || row.Sent > b.Size/20) {
			t.Errorf("board %s on the base: sent %s, %d bytes (image %d)", id, row.Transfer, row.Sent, b.Size)
		}
		if i == 2 && (row.Transfer != rollout.TransferFull || row.Sent != b.Size) {
			t.Errorf("board %s off the base: sent %s, %d bytes", id, row.Transfer, row.Sent)
		}
		if got := bs.bootsOf(i); got[len(got)-1] != "2.0.1" {
			t.Errorf("board %d booted %v", i, got)
		}
	}
}

// TestDeltaFailureFallsBack: a delta the board refuses (corrupted in the
// gateway's cache) ends in the whole image for that board, in the same
// step, and the board is updated: the row says why the delta failed.
func TestDeltaFailureFallsBack(t *testing.T) {
	bs := startBoards(t, 1)
	dir := t.TempDir()
	g := startGateway(t, dir, bs.urls, nil)
	g.waitOnline(t, 1)
	a := g.add(t, testImage(t, "2.0.0", 300000))
	b := g.add(t, testImage(t, "2.0.1", 300000))
	roll(t, g, a.SHA256, bs.ids)
	f, n, err := g.arts.OpenDelta(context.Background(), a.SHA256, b.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	path := f.Name()
	f.Close()
	d, _ := os.ReadFile(path)
	d[n/2+38] ^= 0xff // in the frame, past the header
	if err := os.WriteFile(path, d, 0o644); err != nil {
		t.Fatal(err)
	}
	id := roll(t, g, b.SHA256, bs.ids)
	row := boardRows(t, g, id)[bs.ids[0]]
	if row.Phase != rollout.PhaseSucceeded || row.Transfer != rollout.TransferFull || row.Sent != b.Size || !strings.Contains(row.NoDelta, "invalid_image") {
		t.Fatalf("row %s %s %d no_delta=%q", row.Phase, row.Transfer, row.Sent, row.NoDelta)
	}
	if got := bs.bootsOf(0); got[len(got)-1] != "2.0.1" {
		t.Errorf("booted %v", got)
	}
}

// TestDeltaMadeAhead: a rollout waiting for its window has its delta made
// at create, before any board starts.
func TestDeltaMadeAhead(t *testing.T) {
	bs := startBoards(t, 1)
	dir := t.TempDir()
	g := startGateway(t, dir, bs.urls, nil)
	g.waitOnline(t, 1)
	a := g.add(t, testImage(t, "2.0.0", 300000))
	b := g.add(t, testImage(t, "2.0.1", 300000))
	roll(t, g, a.SHA256, bs.ids)
	closed := &rollout.Window{Intervals: []rollout.Interval{{From: time.Now().Add(time.Hour), To: time.Now().Add(2 * time.Hour)}}, Strict: true}
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: b.SHA256, Target: rollout.Target{All: true}, Window: closed})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "artifacts", "delta-"+a.SHA256+"-"+b.SHA256+".bin")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delta was not made ahead")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := phases(t, g, st.ID)[bs.ids[0]]; p != rollout.PhasePending {
		t.Fatalf("board %s outside the window", p)
	}
}
