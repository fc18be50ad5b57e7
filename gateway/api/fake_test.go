package api

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
	"github.com/holofleet/holofleet/store"
)

// fakeFleet is a fleet.Service with canned answers that records what it
// was asked.
type fakeFleet struct {
	mu       sync.Mutex
	boards   []fleet.BoardView
	err      error // returned by Board, SetLabels, Call and Do when set
	reply    fleet.Reply
	results  []fleet.Result
	filter   fleet.Filter
	call     []string // id, method, path, body
	sel      fleet.Selector
	action   fleet.Action
	watchers []*fakeWatcher
	watched  chan struct{}
}

type fakeWatcher struct {
	f       fleet.Filter
	after   uint64
	ch      chan fleet.Event
	dropped uint64
	closed  bool
}

func newFake() *fakeFleet {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &fakeFleet{
		watched: make(chan struct{}, 16),
		boards: []fleet.BoardView{
			{ID: "b1", Hostname: "holo-b1", Address: 5, Line: "line0", Groups: []int{1, 2},
				Labels: map[string]string{"room": "hall"}, Online: true, Firmware: "1.2.0", LastSeen: t0,
				Transports: []string{"rs485:line0"}},
			{ID: "b2", Hostname: "holo-b2", URL: "http://10.0.0.7", Groups: []int{2}, Online: false,
				OfflineReason: "stream closed", Firmware: "1.1.0", Transports: []string{}},
		},
		reply: fleet.Reply{Status: 200, Body: []byte(`{"on":true,  "b":1}`)},
	}
}

func (f *fakeFleet) Boards(flt fleet.Filter) []fleet.BoardView {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter = flt
	return slices.Clone(f.boards)
}

func (f *fakeFleet) Board(id string) (fleet.BoardView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return fleet.BoardView{}, f.err
	}
	for _, b := range f.boards {
		if b.ID == id {
			return b, nil
		}
	}
	return fleet.BoardView{}, fleet.ErrUnknownBoard
}

func (f *fakeFleet) SetLabels(id string, labels map[string]string) (fleet.BoardView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return fleet.BoardView{}, f.err
	}
	for i, b := range f.boards {
		if b.ID == id {
			f.boards[i].Labels = labels
			return f.boards[i], nil
		}
	}
	return fleet.BoardView{}, fleet.ErrUnknownBoard
}

func (f *fakeFleet) Call(_ context.Context, id, method, path string, body []byte) (fleet.Reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call = []string{id, method, path, string(body)}
	if f.err != nil {
		return fleet.Reply{}, f.err
	}
	return f.reply, nil
}

func (f *fakeFleet) Do(_ context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sel, f.action = sel, a
	if f.err != nil {
		return nil, f.err
	}
	return f.results, nil
}

func (f *fakeFleet) Watch(ctx context.Context, flt fleet.Filter, after uint64) *fleet.Watcher {
	w := &fakeWatcher{f: flt, after: after, ch: make(chan fleet.Event, 64)}
	f.mu.Lock()
	f.watchers = append(f.watchers, w)
	f.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.closeLocked(w)
	})
	_ = stop
	f.watched <- struct{}{}
	return &fleet.Watcher{C: w.ch, Dropped: func() uint64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return w.dropped
	}}
}

func (f *fakeFleet) closeLocked(w *fakeWatcher) {
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
}

// publish sends ev to every open watcher.
func (f *fakeFleet) publish(ev fleet.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watchers {
		if !w.closed {
			w.ch <- ev
		}
	}
}

// cutOff closes every watcher as fallen behind by n events.
func (f *fakeFleet) cutOff(n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watchers {
		w.dropped = n
		f.closeLocked(w)
	}
}

func (f *fakeFleet) lastWatcher() *fakeWatcher {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watchers[len(f.watchers)-1]
}

func (f *fakeFleet) waitWatch(t *testing.T) {
	t.Helper()
	select {
	case <-f.watched:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch started")
	}
}

func (f *fakeFleet) set(fn func(f *fakeFleet)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// testGateway is a Server on a loopback port with one token per role.
type testGateway struct {
	fake    *fakeFleet
	tokens  *auth.Tokens
	secrets map[string]string // role name -> secret
	addr    string            // host:port
	url     string            // http://host:port
	conn    *grpc.ClientConn
	client  fleetv1.FleetServiceClient
}

type gwOpt func(*Config)

func startGateway(t testing.TB, opts ...gwOpt) *testGateway {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	toks, err := auth.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	g := &testGateway{fake: newFake(), tokens: toks, secrets: map[string]string{}}
	for _, r := range []auth.Role{auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		sec, _, err := toks.Create("t-"+r.String(), r)
		if err != nil {
			t.Fatal(err)
		}
		g.secrets[r.String()] = sec
	}
	reg := prometheus.NewRegistry()
	cfg := Config{Fleet: g.fake, Tokens: toks, Registerer: reg, Gatherer: reg}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not stop")
		}
	})
	g.addr = ln.Addr().String()
	g.url = "http://" + g.addr
	g.conn, err = grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.conn.Close() })
	g.client = fleetv1.NewFleetServiceClient(g.conn)
	return g
}
