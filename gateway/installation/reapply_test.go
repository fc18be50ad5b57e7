package installation_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/installation"
)

// heldStore is the installation's store whose transactions wait while it
// is held: a disk that does not finish syncing.
type heldStore struct {
	installation.Store
	mu      sync.Mutex
	held    chan struct{} // closed to release; nil when not held
	entered chan []string // keys of each transaction that waits
}

func (h *heldStore) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = make(chan struct{})
}

func (h *heldStore) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.held)
	h.held = nil
}

func (h *heldStore) Batch(kv map[string]any) error {
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	if held != nil {
		var keys []string
		for k := range kv {
			keys = append(keys, k)
		}
		h.entered <- keys
		<-held
	}
	return h.Store.Batch(kv)
}

// TestReapplyWaitsForNoDisk: applying the current description again
// while the disk does not finish a single transaction still stores its
// revision (history lists it, with its message), runs every board and
// finishes, all read back at once; its records land once the disk
// does. An apply that changes the description waits for its revision to
// be on disk before it answers.
func TestReapplyWaitsForNoDisk(t *testing.T) {
	hs := &heldStore{entered: make(chan []string, 64)}
	r := startRig(t, 2, nil, func(o *installation.Options) {
		hs.Store = o.DB.Bucket(installation.Bucket)
		o.Store = hs
	})
	r.label(t)
	d := r.parse(t, desc(false, "image"))
	r.apply(t, d, "first")
	r.settle(t, d)

	hs.hold()
	again := r.parse(t, desc(false, "image")) // the same description, parsed anew
	rev, st := r.apply(t, again, "repair")
	if rev.N != 2 || st.State != installation.RunDone || st.Phases[installation.PhaseInSync] != 2 {
		t.Fatalf("re-apply with the disk held: revision %d, run %+v", rev.N, st)
	}
	hist, err := r.in.History()
	if err != nil || len(hist) != 2 || hist[0].N != 2 || hist[0].Message != "repair" || hist[0].Run != st.ID {
		t.Fatalf("history with the disk held: %+v %v", hist, err)
	}
	if cur, _, err := r.in.Current(); err != nil || cur.N != 2 {
		t.Fatalf("current with the disk held: %+v %v", cur, err)
	}
	bs, err := r.in.RunBoards(st.ID)
	if err != nil || len(bs) != 2 || bs[0].Phase != installation.PhaseInSync {
		t.Fatalf("run boards with the disk held: %+v %v", bs, err)
	}
	waiting := <-hs.entered // the re-apply's records, queued
	if !strings.Contains(strings.Join(waiting, " "), "rev/00000002") {
		t.Fatalf("the first transaction waiting on the disk holds %v, want revision 2", waiting)
	}

	hs.release()
	// On disk once the disk goes on: revision 2 and the finished run.
	waitFor(t, 30*time.Second, "the re-apply's records on disk", func() bool {
		var rec installation.Revision
		var run installation.Run
		okRev, _ := hs.Store.Get("rev/00000002", &rec)
		okRun, _ := hs.Store.Get("run/00000002", &run)
		return okRev && rec.Message == "repair" && okRun && run.Finished
	})

	// A changed description: the apply answers only once its revision is
	// on disk.
	hs.hold()
	changed := r.parse(t, desc(false, "other"))
	done := make(chan error, 1)
	go func() {
		_, _, err := r.in.Apply(context.Background(), changed, "test", "new logo")
		done <- err
	}()
	for keys := range hs.entered {
		if strings.Contains(strings.Join(keys, " "), "rev/00000003") {
			break
		}
	}
	select {
	case err := <-done:
		t.Fatalf("a changed description was applied (%v) before its revision was on disk", err)
	default:
	}
	hs.release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the changed description's apply never answered")
	}
	if st := r.waitRun(t, 3); st.Phases[installation.PhaseInSync] != 2 {
		t.Fatalf("the changed description's run: %+v", st)
	}
}
