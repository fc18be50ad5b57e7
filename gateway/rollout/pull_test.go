package rollout_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// imageServer is the gateway's https side for boards: the artifact
// handler under /firmware/ on a TLS server with its own certificate,
// which the boards are given as their CA. bad, when it returns a
// replacement, spoils the n-th image request (1-based).
type imageServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	handler http.Handler
	n       atomic.Int64
	bad     func(n int64, body []byte) []byte
}

func startImageServer(t *testing.T) *imageServer {
	t.Helper()
	s := &imageServer{}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		h, bad := s.handler, s.bad
		s.mu.Unlock()
		if h == nil {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if bad == nil || !strings.Contains(r.URL.Path, "/images/") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if b := bad(s.n.Add(1), body); b != nil {
			body = b
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// roots is the CA the boards trust: the server's own certificate.
func (s *imageServer) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.srv.Certificate())
	return p
}

func (s *imageServer) serve(h http.Handler, bad func(n int64, body []byte) []byte) {
	s.mu.Lock()
	s.handler, s.bad = h, bad
	s.mu.Unlock()
}

// otaStatus reads board id's GET /ota through the fleet.
func (g *gateway) otaStatus(t *testing.T, id string) boardapi.OTAStatus {
	t.Helper()
	// A board that just restarted on its new image is briefly unreachable
	// while the LAN driver reconnects its stream.
	var rep fleet.Reply
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		rep, err = g.fleet.Call(context.Background(), id, http.MethodGet, "/ota", nil)
		if !errors.Is(err, fleet.ErrUnreachable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err == nil {
		err = rep.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	var st boardapi.OTAStatus
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		t.Fatalf("%v: %s", err, rep.Body)
	}
	return st
}

// TestPullMethod rolls an image out with the pull method: each board
// fetches it from the gateway's artifact handler over https, trusting
// the gateway's CA. The second download is corrupted (one byte flipped)
// and the third is another image than the one asked for: those boards
// fail their download cleanly (nothing activated, the old image still
// runs) and the rollout counts them as failed.
func TestPullMethod(t *testing.T) {
	const n = 4
	is := startImageServer(t)
	bs := startBoardsOTA(t, n, func(o *fleetmode.OTAOptions) {
		o.PullRoots = is.roots()
		o.ChannelBase = is.srv.URL + "/firmware/channels/"
	})
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.PullBase = is.srv.URL + "/firmware/" })
	g.waitOnline(t, n)
	a := g.add(t, testImage(t, "2.0.0", 50000))
	other := testImage(t, "2.0.1", 50000)
	g.add(t, other)
	is.serve(g.arts.Handler("/firmware/"), func(k int64, body []byte) []byte {
		switch k {
		case 2:
			c := slices.Clone(body)
			c[len(c)/2] ^= 0x40
			return c
		case 3:
			return other
		}
		return nil
	})

	ctx := context.Background()
	// One download at a time; the next starts while the board before it
	// restarts, so the two bad downloads may finish before the first good
	// board: a sample of 3 keeps the overall threshold from pausing on
	// them alone.
	plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}, Method: rollout.MethodPull, MaxInFlight: 1,
		Thresholds: rollout.Thresholds{Success: 0.5, MinSample: 3}}
	st, err := g.eng.Create(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	st = g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if st.Progress.Phases[rollout.PhaseSucceeded] != 2 || st.Progress.Phases[rollout.PhaseFailed] != 2 || st.Progress.Failed != 2 {
		t.Fatalf("progress %+v", st.Progress)
	}
	if got := is.n.Load(); got != n {
		t.Errorf("%d image downloads, want %d (one per board, no retry of a bad image)", got, n)
	}
	if g.eng.BytesSent() != 0 {
		t.Errorf("the gateway pushed %d bytes in a pull rollout", g.eng.BytesSent())
	}
	boards, err := g.eng.Boards(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, id := range bs.ids {
		idx[id] = i
	}
	for _, b := range boards {
		i := idx[b.Board]
		os := g.otaStatus(t, b.Board)
		switch b.Phase {
		case rollout.PhaseSucceeded:
			if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version, "2.0.0"}) {
				t.Errorf("board %s booted %v", b.Board, got)
			}
		case rollout.PhaseFailed:
			if got := bs.bootsOf(i); !slices.Equal(got, []string{buildinfo.Version}) {
				t.Errorf("failed board %s booted %v", b.Board, got)
			}
			if os.Session.State != boardapi.SessionFailed || os.Session.BootsNext || len(os.Slots) != 2 {
				t.Errorf("failed board %s: session %+v", b.Board, os.Session)
			}
			for _, s := range os.Slots {
				if s.Boots && !s.Running {
					t.Errorf("failed board %s boots %s next", b.Board, s.Label)
				}
			}
			if !strings.Contains(b.Error, "pull failed") {
				t.Errorf("failed board %s: error %q", b.Board, b.Error)
			}
			t.Logf("board %s: %s", b.Board, b.Error)
		default:
			t.Errorf("board %s is %s", b.Board, b.Phase)
		}
	}
}

// TestPullDelta: with the pull method, boards running a release the
// gateway holds pull a delta (its URL names the base) and rebuild the
// next release from it; a board off the base pulls the whole image;
// every board ends on the new release and each row says what went.
func TestPullDelta(t *testing.T) {
	is := startImageServer(t)
	bs := startBoardsOTA(t, 3, func(o *fleetmode.OTAOptions) { o.PullRoots = is.roots() })
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.PullBase = is.srv.URL + "/firmware/" })
	g.waitOnline(t, 3)
	a := g.add(t, testImage(t, "2.0.0", 300000))
	b := g.add(t, testImage(t, "2.0.1", 300000))
	var mu sync.Mutex
	var paths []string
	h := g.arts.Handler("/firmware/")
	is.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}), nil)
	roll(t, g, a.SHA256, bs.ids[:2])
	pushed := g.eng.BytesSent()
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: b.SHA256, Target: rollout.Target{All: true},
		Method: rollout.MethodPull, MaxInFlight: 3})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	rows := boardRows(t, g, st.ID)
	for i, id := range bs.ids {
		row := rows[id]
		if row.Phase != rollout.PhaseSucceeded {
			t.Fatalf("board %s: %s %s", id, row.Phase, row.Error)
		}
		if i < 2 && (row.Transfer != rollout.TransferDelta || row.Sent <= 0 || row.Sent > b.Size/20 || row.NoDelta != "") {
			t.Errorf("board %s on the base: %s, %d bytes (image %d) %q", id, row.Transfer, row.Sent, b.Size, row.NoDelta)
		}
		if i == 2 && (row.Transfer != rollout.TransferFull || row.Sent != b.Size) {
			t.Errorf("board %s off the base: %s, %d bytes", id, row.Transfer, row.Sent)
		}
		if got := bs.bootsOf(i); got[len(got)-1] != "2.0.1" {
			t.Errorf("board %d booted %v", i, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"/firmware/deltas/" + a.SHA256 + "/" + b.SHA256 + ".bin": 2, "/firmware/images/" + b.SHA256 + ".bin": 1}
	got := map[string]int{}
	for _, p := range paths {
		got[p]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("pulled %v, want %v", got, want)
	}
	if n := g.eng.BytesSent() - pushed; n != 0 {
		t.Errorf("the gateway pushed %d bytes in a pull rollout", n)
	}
}

// TestPullDeltaFallsBack: a delta the board refuses after pulling it
// (corrupted in the gateway's cache) ends in the whole image for that
// board in the same step; the row says why the delta failed.
func TestPullDeltaFallsBack(t *testing.T) {
	is := startImageServer(t)
	bs := startBoardsOTA(t, 1, func(o *fleetmode.OTAOptions) { o.PullRoots = is.roots() })
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.PullBase = is.srv.URL + "/firmware/" })
	g.waitOnline(t, 1)
	is.serve(g.arts.Handler("/firmware/"), nil)
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
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: b.SHA256, Target: rollout.Target{All: true}, Method: rollout.MethodPull})
	if err != nil {
		t.Fatal(err)
	}
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	row := boardRows(t, g, st.ID)[bs.ids[0]]
	if row.Phase != rollout.PhaseSucceeded || row.Transfer != rollout.TransferFull || row.Sent != b.Size || !strings.Contains(row.NoDelta, "pull failed") {
		t.Fatalf("row %s %s %d no_delta=%q", row.Phase, row.Transfer, row.Sent, row.NoDelta)
	}
	t.Logf("no_delta: %s", row.NoDelta)
	if got := bs.bootsOf(0); got[len(got)-1] != "2.0.1" {
		t.Errorf("booted %v", got)
	}
}
