package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/registry"
	"github.com/holofleet/holofleet/store"
)

var t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

// setup is a fleet with one fake line ("rs485:line0") and a fake LAN.
type setup struct {
	f    *Fleet
	line *fakeLine
	lan  *fakeDriver
	clk  *clock.Fake
}

func newSetup(t *testing.T, o Options) *setup {
	t.Helper()
	s := &setup{line: newFakeLine("rs485:line0"), lan: newFakeDriver("lan"), clk: clock.NewFake(t0)}
	o.Drivers = append(o.Drivers, s.line, s.lan)
	o.Clock = s.clk
	s.f = New(o)
	runFleet(t, s.f, s.line.fakeDriver, s.lan)
	return s
}

func lineRef(addr string) Ref { return Ref{Driver: "rs485:line0", Addr: addr} }
func lanRef(url string) Ref   { return Ref{Driver: "lan", Addr: url} }

// plug puts a board on the line at addr and on the LAN at url (either may
// be empty) and reports it seen with its info.
func (s *setup) plug(t *testing.T, b *fakeBoard, addr, url string) {
	t.Helper()
	if addr != "" {
		s.line.put(addr, b)
		s.f.Seen(lineRef(addr), b.info())
	}
	if url != "" {
		s.lan.put(url, b)
		s.f.Seen(lanRef(url), b.info())
	}
	eventually(t, "groups of "+b.id, func() bool {
		v, err := s.f.Board(b.id)
		return err == nil && cmp.Equal(v.Groups, b.groups, cmpopts.EquateEmpty())
	})
}

func TestOneBoardTwoWays(t *testing.T) {
	s := newSetup(t, Options{})
	w := s.f.Watch(context.Background(), Filter{}, Live)
	b := &fakeBoard{id: "0a00000000b1", hostname: "holo-00b1", version: "1.0.0", groups: []int{2, 5}}
	s.plug(t, b, "7", "http://10.0.0.7")
	got, err := s.f.Board(b.id)
	if err != nil {
		t.Fatal(err)
	}
	want := BoardView{ID: b.id, Hostname: "holo-00b1", Address: 7, Line: "line0", URL: "http://10.0.0.7",
		Groups: []int{2, 5}, Labels: map[string]string{}, Online: true, Firmware: "1.0.0", LastSeen: t0,
		Transports: []string{"lan", "rs485:line0"}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	if n := len(s.f.Boards(Filter{})); n != 1 {
		t.Errorf("%d boards, want 1", n)
	}
	// One online event although two places saw it.
	if ev := next(t, w); ev.Type != EventOnline || ev.Board != b.id || ev.N != 1 {
		t.Errorf("first event %+v, want online of %s", ev, b.id)
	}
	if evs := drain(w); len(evs) != 0 {
		t.Errorf("more events: %+v", evs)
	}
	// A ref first seen without info is identified through its driver.
	b2 := &fakeBoard{id: "0a00000000b2", hostname: "holo-00b2", version: "1.0.0", groups: []int{}}
	s.line.put("8", b2)
	s.f.Seen(lineRef("8"), nil)
	eventually(t, "identify by GET /info", func() bool {
		v, err := s.f.Board(b2.id)
		return err == nil && v.Online && v.Address == 8
	})
}

func TestFilters(t *testing.T) {
	s := newSetup(t, Options{})
	s.plug(t, &fakeBoard{id: "b1", version: "1.0.0", groups: []int{1}}, "1", "")
	s.plug(t, &fakeBoard{id: "b2", version: "1.1.0", groups: []int{1, 2}}, "2", "")
	s.plug(t, &fakeBoard{id: "b3", version: "1.1.0", groups: []int{}}, "", "http://b3")
	if _, err := s.f.SetLabels("b2", map[string]string{"room": "hall"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.f.SetLabels("b2", map[string]string{"Bad Key": "x"}); !errors.Is(err, registry.ErrBadLabel) {
		t.Errorf("bad label: %v", err)
	}
	if _, err := s.f.SetLabels("nope", nil); !errors.Is(err, ErrUnknownBoard) {
		t.Errorf("unknown board: %v", err)
	}
	s.f.Lost(lanRef("http://b3"), "stream closed")
	yes, no := true, false
	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"all", Filter{}, []string{"b1", "b2", "b3"}},
		{"group 1", Filter{Group: 1}, []string{"b1", "b2"}},
		{"group 2", Filter{Group: 2}, []string{"b2"}},
		{"label", Filter{Labels: map[string]string{"room": "hall"}}, []string{"b2"}},
		{"firmware", Filter{Firmware: "1.1.0"}, []string{"b2", "b3"}},
		{"online", Filter{Online: &yes}, []string{"b1", "b2"}},
		{"offline", Filter{Online: &no}, []string{"b3"}},
		{"ids", Filter{IDs: []string{"b3", "b1"}}, []string{"b1", "b3"}},
	} {
		var got []string
		for _, v := range s.f.Boards(tc.f) {
			got = append(got, v.ID)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s (-got +want)\n%s", tc.name, diff)
		}
	}
}

func happenings(seqs ...uint16) []Happening {
	var hs []Happening
	for _, s := range seqs {
		hs = append(hs, Happening{Kind: "touch", Seq: s, Data: json.RawMessage(`{"action":"down"}`)})
	}
	return hs
}

// kinds returns each event as "type kind seq".
func summary(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Board + " " + ev.Type
		if ev.Kind != "" {
			s += " " + ev.Kind
		}
		if ev.Seq != 0 {
			s += " " + itoa(int(ev.Seq))
		}
		if ev.Reason != "" {
			s += " (" + ev.Reason + ")"
		}
		out = append(out, s)
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestDedupeOrderAndEpochs(t *testing.T) {
	s := newSetup(t, Options{})
	b := &fakeBoard{id: "b1", groups: []int{}}
	s.plug(t, b, "1", "http://b1")
	w := s.f.Watch(context.Background(), Filter{}, Live)
	line, lan := lineRef("1"), lanRef("http://b1")

	s.f.Happened(line, happenings(1, 2, 3))
	s.f.Happened(lan, happenings(2, 3, 4)) // 2, 3 again from the other place
	s.f.Happened(line, happenings(4, 5))   // 4 again
	s.f.Happened(lan, happenings(3))       // a replay after a reconnect
	s.f.Changed(line, "leds", json.RawMessage(`{"mode":"solid"}`))
	s.f.Changed(lan, "leds", json.RawMessage(`{"mode":"solid"}`)) // the same change
	s.f.Changed(lan, "leds", json.RawMessage(`{"mode":"off"}`))

	// The board restarts: both places notice; numbering starts over.
	s.clk.Advance(time.Second)
	s.f.Restarted(line)
	s.f.Happened(line, happenings(1, 2))
	s.clk.Advance(2 * time.Second)
	s.f.Restarted(lan)                     // the same restart, seen late over the LAN
	s.f.Happened(lan, happenings(1, 2, 3)) // 1, 2 already on the stream
	// A later restart, seen first over the LAN.
	s.clk.Advance(time.Minute)
	s.f.Restarted(lan)
	s.f.Happened(lan, happenings(1))

	want := []string{
		"b1 happening touch 1", "b1 happening touch 2", "b1 happening touch 3", "b1 happening touch 4",
		"b1 happening touch 5", "b1 state leds", "b1 state leds",
		"b1 restarted", "b1 happening touch 1", "b1 happening touch 2", "b1 happening touch 3",
		"b1 restarted", "b1 happening touch 1",
	}
	evs := drain(w)
	if diff := cmp.Diff(summary(evs), want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].N != evs[i-1].N+1 {
			t.Errorf("event %d has N %d after %d", i, evs[i].N, evs[i-1].N)
		}
	}
	st := s.f.Stats()
	if st.Duplicates != 7 {
		t.Errorf("Duplicates = %d, want 7 (6 happenings, 1 state)", st.Duplicates)
	}
	if st.PerBoard["b1"] != uint64(len(want))+1 { // + the online event
		t.Errorf("PerBoard = %d, want %d", st.PerBoard["b1"], len(want)+1)
	}
	// Seq wraps from 65535 to 1.
	s.clk.Advance(time.Minute)
	s.f.Restarted(line)
	s.f.Happened(line, happenings(65534, 65535, 1, 2, 65535))
	if diff := cmp.Diff(summary(drain(w)), []string{"b1 restarted", "b1 happening touch 65534", "b1 happening touch 65535",
		"b1 happening touch 1", "b1 happening touch 2"}); diff != "" {
		t.Errorf("wrap (-got +want)\n%s", diff)
	}
}

func TestSeqWindow(t *testing.T) {
	var w seqWindow
	for _, tc := range []struct {
		seq uint16
		new bool
	}{
		{10, true}, {11, true}, {10, false}, {13, true},
		{12, true},  // behind the newest but never seen: one place missed it
		{12, false}, // now seen
		{200, true},
		{100, false}, // far behind the newest: long gone
		{201, true},
	} {
		if got := w.add(tc.seq); got != tc.new {
			t.Errorf("add(%d) = %v, want %v", tc.seq, got, tc.new)
		}
	}
}

func TestOnlineOffline(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg, err := registry.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Put(registry.Record{ID: "old", Hostname: "holo-old", Labels: map[string]string{"room": "attic"}}); err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, Options{Registry: reg})
	if v, err := s.f.Board("old"); err != nil || v.Online || v.OfflineReason != ReasonNotSeen || v.Labels["room"] != "attic" {
		t.Errorf("board from the registry: %+v %v", v, err)
	}
	w := s.f.Watch(context.Background(), Filter{}, Live)
	b := &fakeBoard{id: "b1", hostname: "holo-b1", groups: []int{3}}
	s.plug(t, b, "4", "http://b1")
	s.f.Lost(lineRef("4"), "no reply on line line0")
	if v, _ := s.f.Board("b1"); !v.Online || !cmp.Equal(v.Transports, []string{"lan"}) {
		t.Errorf("after losing the line: online=%v transports=%v", v.Online, v.Transports)
	}
	s.f.Lost(lanRef("http://b1"), "stream closed")
	v, _ := s.f.Board("b1")
	if v.Online || v.OfflineReason != "stream closed" || len(v.Transports) != 0 {
		t.Errorf("after losing both: %+v", v)
	}
	if _, err := s.f.Call(context.Background(), "b1", http.MethodGet, "/leds", nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Call offline board: %v, want ErrUnreachable", err)
	}
	s.f.Lost(lanRef("http://b1"), "again") // already lost: nothing
	s.f.Seen(lineRef("4"), nil)
	want := []string{"b1 online", "b1 offline (stream closed)", "b1 online"}
	if diff := cmp.Diff(summary(drain(w)), want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
	// Another board answers at the same address: the first loses that place.
	b2 := &fakeBoard{id: "b2", groups: []int{}}
	s.line.put("4", b2)
	s.f.Seen(lineRef("4"), b2.info())
	if v, _ := s.f.Board("b1"); v.Online || v.OfflineReason != ReasonReplaced {
		t.Errorf("replaced board: %+v", v)
	}
	// Everything reaches the registry (the fleet writes at once).
	eventually(t, "registry write", func() bool {
		r, ok := reg.Get("b1")
		return ok && r.Hostname == "holo-b1" && cmp.Equal(r.Groups, []int{3}) && r.Address == 4 && r.URL == "http://b1"
	})
	if st := s.f.Stats(); st.Boards != 3 || st.Online != 1 {
		t.Errorf("stats: boards %d online %d", st.Boards, st.Online)
	}
}

func TestWatchOverflowAndReplay(t *testing.T) {
	s := newSetup(t, Options{BufferSize: 8, WatcherQueue: 3})
	b := &fakeBoard{id: "b1", groups: []int{}}
	s.plug(t, b, "1", "") // event 1: online
	ctx, cancel := context.WithCancel(context.Background())
	slow := s.f.Watch(ctx, Filter{}, Live)
	other := s.f.Watch(context.Background(), Filter{IDs: []string{"someone-else"}}, Live)
	s.f.Happened(lineRef("1"), happenings(1, 2, 3, 4, 5, 6)) // events 2-7
	got := drain(slow)
	if len(got) != 3 {
		t.Fatalf("slow watcher got %d events, want the 3 that fit", len(got))
	}
	if _, ok := <-slow.C; ok {
		t.Fatal("slow watcher's channel still open")
	}
	if d := slow.Dropped(); d != 3 {
		t.Errorf("Dropped = %d, want 3", d)
	}
	if d := s.f.Stats().Dropped; d != 3 {
		t.Errorf("Stats.Dropped = %d, want 3", d)
	}
	if evs := drain(other); len(evs) != 0 || other.Dropped() != 0 {
		t.Errorf("filtered watcher got %v, dropped %d", evs, other.Dropped())
	}
	cancel()
	eventually(t, "watcher removed", func() bool { return s.f.Stats().Watchers == 1 })

	// Resume after the last event received: the buffer replays the rest.
	w := s.f.Watch(context.Background(), Filter{}, got[len(got)-1].N)
	if diff := cmp.Diff(summary(drain(w)), []string{"b1 happening touch 4", "b1 happening touch 5", "b1 happening touch 6"}); diff != "" {
		t.Errorf("replay (-got +want)\n%s", diff)
	}
	// Events 8-12 push 1-4 out of the 8-event buffer.
	s.f.Happened(lineRef("1"), happenings(7, 8, 9, 10, 11))
	late := s.f.Watch(context.Background(), Filter{}, 1)
	evs := drain(late)
	if len(evs) != 8 || evs[0].N != 5 || late.Dropped() != 3 {
		t.Errorf("late replay: %d events from N %d, dropped %d; want 8 from 5, dropped 3", len(evs), evs[0].N, late.Dropped())
	}
	if st := s.f.Stats(); st.ReplayMissed != 3 || st.Events != 12 {
		t.Errorf("stats: replay missed %d, events %d", st.ReplayMissed, st.Events)
	}
}

func TestCallRouting(t *testing.T) {
	s := newSetup(t, Options{})
	both := &fakeBoard{id: "both", groups: []int{}}
	lineOnly := &fakeBoard{id: "lineonly", groups: []int{}}
	lanOnly := &fakeBoard{id: "lanonly", groups: []int{},
		reply: &Reply{Status: 404, Body: json.RawMessage(`{"error":"not_found","message":"no such file"}`)}}
	s.plug(t, both, "1", "http://both")
	s.plug(t, lineOnly, "2", "")
	s.plug(t, lanOnly, "", "http://lanonly")
	ctx := context.Background()
	for _, tc := range []struct {
		id, method, path string
		err              error
		lineCalls        int
		lanCalls         int
	}{
		{"both", "PATCH", "/leds", nil, 1, 0},
		{"both", "PATCH", "/api/v1/leds", nil, 1, 0},
		{"both", "GET", "/fs?path=/", nil, 0, 1},
		{"lineonly", "POST", "/scenes/apply", nil, 1, 0},
		{"lineonly", "GET", "/fs", ErrNotOverLink, 0, 0},
		{"lanonly", "PATCH", "/leds", nil, 0, 1},
		{"nobody", "GET", "/info", ErrUnknownBoard, 0, 0},
	} {
		rep, err := s.f.Call(ctx, tc.id, tc.method, tc.path, []byte(`{}`))
		if !errors.Is(err, tc.err) {
			t.Errorf("%s %s %s: err %v, want %v", tc.id, tc.method, tc.path, err, tc.err)
		}
		lc, nc := s.line.takeCalls(), s.lan.takeCalls()
		if len(lc) != tc.lineCalls || len(nc) != tc.lanCalls {
			t.Errorf("%s %s %s: %d line calls, %d LAN calls; want %d, %d", tc.id, tc.method, tc.path, len(lc), len(nc), tc.lineCalls, tc.lanCalls)
		}
		if len(lc) == 1 && lc[0].Path != "/leds" && lc[0].Path != "/scenes/apply" {
			t.Errorf("line got path %q", lc[0].Path)
		}
		if tc.id == "lanonly" {
			if rep.Status != 404 || string(rep.Body) != `{"error":"not_found","message":"no such file"}` {
				t.Errorf("board error not intact: %d %s", rep.Status, rep.Body)
			}
		}
	}
	// While timed sends keep the line busy, a board also on the LAN is
	// called there; one on the line only waits for the line.
	s.line.busy.Store(true)
	for _, tc := range []struct {
		id, method, path    string
		lineCalls, lanCalls int
	}{
		{"both", "PATCH", "/leds", 0, 1},
		{"both", "GET", "/scenes", 0, 1},
		{"lineonly", "POST", "/scenes/apply", 1, 0},
	} {
		if _, err := s.f.Call(ctx, tc.id, tc.method, tc.path, []byte(`{}`)); err != nil {
			t.Errorf("busy line: %s %s %s: %v", tc.id, tc.method, tc.path, err)
		}
		if lc, nc := s.line.takeCalls(), s.lan.takeCalls(); len(lc) != tc.lineCalls || len(nc) != tc.lanCalls {
			t.Errorf("busy line: %s %s %s: %d line calls, %d LAN calls; want %d, %d", tc.id, tc.method, tc.path, len(lc), len(nc), tc.lineCalls, tc.lanCalls)
		}
	}
	s.line.busy.Store(false)
	// A GET that fails on the line is tried over the LAN.
	s.line.put("1", nil)
	s.line.mu.Lock()
	delete(s.line.boards, "1")
	s.line.mu.Unlock()
	if rep, err := s.f.Call(ctx, "both", "GET", "/leds", nil); err != nil || rep.Status != 200 {
		t.Errorf("GET with a failing line: %v %v", rep, err)
	}
}

// TestOldBootTailAfterRestart: a board on a line and the LAN restarts
// (a rollout, every few seconds); the line reports the restart first
// while the LAN still brings the old boot's last happenings. Those are
// not numbered in the new boot (the soak saw "seq 1 after 19" and gaps:
// the new boot's own numbers then dropped as repeats). Once the LAN
// reports the restart too, its happenings count; a place that never
// reports it is believed again after restartMerge.
func TestOldBootTailAfterRestart(t *testing.T) {
	s := newSetup(t, Options{})
	s.plug(t, &fakeBoard{id: "b1", groups: []int{}}, "1", "http://b1")
	w := s.f.Watch(context.Background(), Filter{}, Live)
	line, lan := lineRef("1"), lanRef("http://b1")
	s.f.Happened(lan, happenings(17, 18))
	s.f.Happened(line, happenings(17, 18))
	s.clk.Advance(time.Second)
	s.f.Restarted(line)
	s.f.Happened(line, happenings(1))
	s.f.Happened(lan, happenings(19)) // the old boot's last, late over the LAN
	s.f.Restarted(lan)                // the same restart, seen late
	s.f.Happened(lan, happenings(1, 2))
	s.f.Happened(line, happenings(2, 3))
	// A restart the LAN misses: after restartMerge it is believed again.
	s.clk.Advance(time.Minute)
	s.f.Restarted(line)
	s.f.Happened(lan, happenings(4))
	s.clk.Advance(restartMerge)
	s.f.Happened(lan, happenings(5))
	want := []string{"b1 happening touch 17", "b1 happening touch 18",
		"b1 restarted", "b1 happening touch 1", "b1 happening touch 2", "b1 happening touch 3",
		"b1 restarted", "b1 happening touch 5"}
	if diff := cmp.Diff(summary(drain(w)), want); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
}

// TestWatchAfterZero: after = 0 replays from the first event (a client
// that has nothing yet asks for everything kept), Live from now. Event 1
// could not be replayed: after = 0 meant "from now" and after = 1 left
// event 1 out.
func TestWatchAfterZero(t *testing.T) {
	s := newSetup(t, Options{})
	b := &fakeBoard{id: "b1", groups: []int{}}
	s.plug(t, b, "1", "") // event 1: online
	s.f.Happened(lineRef("1"), happenings(1))
	all := drain(s.f.Watch(context.Background(), Filter{}, 0))
	if diff := cmp.Diff(summary(all), []string{"b1 online", "b1 happening touch 1"}); diff != "" || all[0].N != 1 {
		t.Errorf("after 0 (-got +want)\n%s", diff)
	}
	if live := drain(s.f.Watch(context.Background(), Filter{}, Live)); len(live) != 0 {
		t.Errorf("Live replayed %v", summary(live))
	}
}

// TestSetLabelsWriteErrorCounted: a label change the store fails to save
// is refused, keeps the old labels and counts as a failed registry write
// (holo_gateway_registry_write_errors_total, which HoloRegistryWriteErrors
// reads), as the background writes' failures do. Before, only the caller
// heard of it.
func TestSetLabelsWriteErrorCounted(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, Options{Registry: reg})
	s.plug(t, &fakeBoard{id: "b1", groups: []int{2}}, "", "http://b1")
	if _, err := s.f.SetLabels("b1", map[string]string{"room": "hall"}); err != nil {
		t.Fatal(err)
	}
	// Everything the fleet learnt is saved: no background write is left
	// to fail once the store is closed.
	eventually(t, "b1 saved", func() bool {
		r, ok := reg.Get("b1")
		return ok && r.Labels["room"] == "hall" && r.URL == "http://b1" && cmp.Equal(r.Groups, []int{2})
	})
	db.Close() // the store fails every write from now on
	if _, err := s.f.SetLabels("b1", map[string]string{"room": "attic"}); err == nil {
		t.Fatal("SetLabels on a closed store: no error")
	}
	if v, _ := s.f.Board("b1"); v.Labels["room"] != "hall" {
		t.Errorf("labels after a failed save: %v, want the old ones", v.Labels)
	}
	if n := s.f.Stats().PersistErrors; n != 1 {
		t.Errorf("PersistErrors %d after one failed save, want 1", n)
	}
}
