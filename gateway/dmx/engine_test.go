package dmx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
)

func groupPatch() *Patch {
	return &Patch{Fixtures: []Fixture{{Universe: 1, Address: 1, Profile: ProfileRGB, Group: 1}}}
}

func TestPatchCheck(t *testing.T) {
	ok := Fixture{Universe: 1, Address: 1, Profile: ProfileHolo, Group: 1}
	with := func(m func(*Fixture)) Fixture { f := ok; m(&f); return f }
	tests := []struct {
		name string
		p    Patch
		want string // "" ok, else a part of the error
	}{
		{"ok", Patch{Fixtures: []Fixture{ok, with(func(f *Fixture) { f.Address = 12; f.Group = 2 })}}, ""},
		{"overlap", Patch{Fixtures: []Fixture{ok, with(func(f *Fixture) { f.Address = 11; f.Group = 2 })}}, "overlap fixture 1 (1-11)"},
		{"past the end", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Address = 503 })}}, "do not fit a universe"},
		{"address 0", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Address = 0 })}}, "do not fit"},
		{"universe 0", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Universe = 0 })}}, "universe 0 is not 1-63999"},
		{"universe 64000", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Universe = 64000 })}}, "universe 64000"},
		{"no target", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Group = 0 })}}, "names 0 targets"},
		{"two targets", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Board = "b" })}}, "names 2 targets"},
		{"group 32", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Group = 32 })}}, "group 32"},
		{"profile", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Profile = "moving-head" })}}, `unknown profile "moving-head"`},
		{"line without address", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Group = 0; f.Line = "line0" })}}, "line_address"},
		{"label", Patch{Fixtures: []Fixture{with(func(f *Fixture) { f.Group = 0; f.Label = "zone" })}}, "key=value"},
		{"loss", Patch{Fixtures: []Fixture{ok}, Universes: []UniverseRule{{1, "blackout"}}}, "hold or release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Check()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBadPatch) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrBadPatch with %q", err, tt.want)
			}
		})
	}
}

func TestParsePatch(t *testing.T) {
	p, err := ParsePatch(strings.NewReader(`{"fixtures":[{"universe":1,"address":1,"profile":"rgb","board":"b1"}],"universes":[{"universe":1,"loss":"release"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Loss(1) != LossRelease || p.Loss(2) != LossHold {
		t.Error(p.Loss(1), p.Loss(2))
	}
	for _, bad := range []string{`{"fixtures":[{"universe":1,"address":1,"profile":"rgb","board":"b1","colour":1}]}`, `{`, `{}{}`} {
		if _, err := ParsePatch(strings.NewReader(bad)); !errors.Is(err, ErrBadPatch) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestDemoPatch(t *testing.T) {
	p := DemoPatch(2, 3, "demo")
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range p.Fixtures {
		got = append(got, f.String())
	}
	want := []string{
		"universe 1 address 1-11 holo -> group 1",
		"universe 1 address 17-27 holo -> group 2",
		"universe 2 address 1-11 holo -> line demo address 1",
		"universe 2 address 12-22 holo -> line demo address 2",
		"universe 2 address 23-33 holo -> line demo address 3",
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Error(diff)
	}
}

func TestLookChanges(t *testing.T) {
	holo := Fixture{Universe: 1, Address: 1, Profile: ProfileHolo, Group: 1}
	type act struct {
		Kind string
		Body string
	}
	tests := []struct {
		name string
		prev []byte // nil: unknown
		now  []byte
		want []act
	}{
		{"first look", nil, []byte{255, 255, 0, 0, 0, 0, 0, 0, 0, 128, 128},
			[]act{{"leds", `{"brightness":100,"colour":"#ff0000","loop":true,"mode":"solid"}`},
				{"screen_show", `{"colour":"#000000"}`}, {"holo", `{"motion":"move","x":0,"y":0}`}}},
		{"dimmer 0 is off", []byte{255, 1, 2, 3, 0, 0, 0, 0, 0, 128, 128}, []byte{0, 1, 2, 3, 0, 0, 0, 0, 0, 128, 128},
			[]act{{"leds", `{"loop":true,"mode":"off"}`}}},
		{"colour while off: nothing", []byte{0, 1, 2, 3, 0, 0, 0, 0, 0, 128, 128}, []byte{0, 9, 9, 9, 0, 0, 0, 0, 0, 128, 128}, nil},
		{"mode range", []byte{128, 1, 2, 3, 0, 0, 0, 0, 0, 128, 128}, []byte{128, 1, 2, 3, 85, 0, 0, 0, 0, 128, 128},
			[]act{{"leds", `{"brightness":50,"colour":"#010203","loop":true,"mode":"rainbow"}`}}},
		{"same mode range: nothing", []byte{128, 1, 2, 3, 80, 0, 0, 0, 0, 128, 128}, []byte{128, 1, 2, 3, 119, 0, 0, 0, 0, 128, 128}, nil},
		{"scene change", []byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 128, 128}, []byte{0, 0, 0, 0, 0, 4, 0, 0, 0, 128, 128},
			[]act{{"scene_apply", `{"slot":4}`}}},
		{"scene to 0: nothing", []byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 128, 128}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 128}, nil},
		{"screen and holo", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 128}, []byte{0, 0, 0, 0, 0, 0, 16, 32, 48, 255, 0},
			[]act{{"screen_show", `{"colour":"#102030"}`}, {"holo", `{"motion":"move","x":1,"y":-1}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s [Slots]byte
			var prev *Look
			if tt.prev != nil {
				copy(s[:], tt.prev)
				l := LookOf(holo, &s)
				prev = &l
			}
			copy(s[:], tt.now)
			var got []act
			for _, c := range LookOf(holo, &s).changes(prev) {
				if _, err := fleet.Prepare(fleet.Selector{Groups: []int{1}}, c.action, time.Time{}); err != nil {
					t.Errorf("%s: %v", c.action.Kind, err)
				}
				got = append(got, act{c.action.Kind, string(c.action.Body)})
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

// TestSendsChangesOnly: a look goes out once; the same frame again sends
// nothing (the next call is the next change's).
func TestSendsChangesOnly(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	r.e.Data(sacnFrame(1, "a", 100, 1, slots(1, 255, 255, 0, 0)))
	c := r.f.next(t)
	if c.Kind != "leds" || c.Body["colour"] != "#ff0000" || !cmp.Equal(c.Sel.Groups, []int{1}) || !c.At.IsZero() {
		t.Fatalf("%+v", c)
	}
	r.e.Data(sacnFrame(1, "a", 100, 2, slots(1, 255, 255, 0, 0)))
	r.e.Data(sacnFrame(1, "a", 100, 3, slots(1, 255, 0, 255, 0)))
	if c := r.f.next(t); c.Body["colour"] != "#00ff00" {
		t.Fatalf("%+v", c)
	}
}

// TestPriority: the higher priority wins whatever the lower sends; when
// it goes silent for 2.5 s, the lower one's look comes back.
func TestPriority(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	r.e.Data(sacnFrame(1, "main", 150, 1, slots(1, 255, 255, 0, 0)))
	if c := r.f.next(t); c.Body["colour"] != "#ff0000" {
		t.Fatalf("%+v", c)
	}
	r.e.Data(sacnFrame(1, "backup", 100, 1, slots(1, 255, 0, 0, 255)))
	r.clk.Advance(time.Second)
	r.e.Data(sacnFrame(1, "backup", 100, 2, slots(1, 255, 0, 0, 255)))
	srcs := r.e.Sources()
	if len(srcs) != 2 || srcs[0].Name != "backup" || srcs[0].Winning || !srcs[1].Winning || srcs[1].Priority != 150 {
		t.Fatalf("%+v", srcs)
	}
	r.clk.Advance(1500 * time.Millisecond) // main silent 2.5 s, backup 1.5 s
	r.e.check()
	if c := r.f.next(t); c.Body["colour"] != "#0000ff" {
		t.Fatalf("after loss: %+v", c)
	}
	if got := r.e.Sources(); len(got) != 1 || got[0].Name != "backup" {
		t.Fatalf("%+v", got)
	}
	if n := testutil.ToFloat64(r.e.m.lost); n != 1 {
		t.Errorf("lost %v", n)
	}
}

// TestHTPAndLatest: equal priorities merge the dimmer highest-first and
// every other channel from the latest source.
func TestHTPAndLatest(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	r.e.Data(sacnFrame(1, "a", 100, 1, slots(1, 51, 255, 0, 0)))
	if c := r.f.next(t); c.Body["brightness"] != 20.0 {
		t.Fatalf("%+v", c)
	}
	r.e.Data(sacnFrame(1, "b", 100, 1, slots(1, 10, 0, 0, 255)))
	c := r.f.next(t)
	if c.Body["brightness"] != 20.0 || c.Body["colour"] != "#0000ff" {
		t.Fatalf("merged: %+v", c)
	}
	if n := testutil.ToFloat64(r.e.m.merges.WithLabelValues("1")); n != 1 {
		t.Errorf("merges %v", n)
	}
}

// TestTerminatedAndSequence: an out-of-order packet is dropped; a
// terminated stream drops its source at once.
func TestTerminatedAndSequence(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	r.e.Data(sacnFrame(1, "a", 100, 10, slots(1, 255, 255, 0, 0)))
	r.f.next(t)
	r.e.Data(sacnFrame(1, "a", 100, 9, slots(1, 255, 0, 255, 0))) // late duplicate
	if n := testutil.ToFloat64(r.e.m.dropped.WithLabelValues("sequence")); n != 1 {
		t.Errorf("sequence drops %v", n)
	}
	fr := sacnFrame(1, "a", 100, 11, nil)
	fr.Terminated = true
	r.e.Data(fr)
	if got := r.e.Sources(); len(got) != 0 {
		t.Fatalf("%+v", got)
	}
	r.e.Data(sacnFrame(1, "a", 100, 12, slots(1, 255, 0, 0, 255)))
	if c := r.f.next(t); c.Body["colour"] != "#0000ff" {
		t.Fatalf("%+v", c)
	}
}

// TestRelease: a universe patched to release sends scene_end when its
// last source is lost; a hold universe sends nothing.
func TestRelease(t *testing.T) {
	p := &Patch{Fixtures: []Fixture{{Universe: 1, Address: 1, Profile: ProfileRGB, Group: 1}, {Universe: 2, Address: 1, Profile: ProfileRGB, Board: "b1"}},
		Universes: []UniverseRule{{Universe: 2, Loss: LossRelease}}}
	r := newRig(t, p, auth.RoleOperator)
	r.e.Data(sacnFrame(1, "a", 100, 1, slots(1, 255, 255, 0, 0)))
	r.f.next(t)
	r.clk.Advance(time.Second)
	r.e.Data(sacnFrame(2, "a", 100, 1, slots(1, 255, 255, 0, 0)))
	r.f.next(t)
	r.clk.Advance(2 * time.Second) // universe 1's source silent 3 s, universe 2's 2 s
	r.e.check()
	r.clk.Advance(time.Second)
	r.e.check()
	c := r.f.next(t)
	if c.Kind != "scene_end" || !cmp.Equal(c.Sel.Boards, []string{"b1"}) {
		t.Fatalf("%+v", c)
	}
	// The released board's next look goes out whole.
	r.e.Data(sacnFrame(2, "a", 100, 2, slots(1, 255, 255, 0, 0)))
	if c := r.f.next(t); c.Kind != "leds" {
		t.Fatalf("%+v", c)
	}
}

// TestSync: once sync packets flow, looks wait for them and fire
// together at one moment; when they stop, data applies at once again.
func TestSync(t *testing.T) {
	p := &Patch{Fixtures: []Fixture{{Universe: 1, Address: 1, Profile: ProfileRGB, Group: 1}, {Universe: 2, Address: 1, Profile: ProfileRGB, Board: "b1"}}}
	r := newRig(t, p, auth.RoleOperator)
	frame := func(uni int, seq uint8, data []byte) Frame {
		f := sacnFrame(uni, "desk", 100, seq, data)
		f.SyncAddr = 7
		return f
	}
	r.e.Sync(ProtoSACN, 7)
	r.e.Data(frame(1, 1, slots(1, 255, 255, 0, 0)))
	r.e.Data(frame(2, 1, slots(1, 255, 0, 255, 0)))
	r.e.Data(frame(1, 2, slots(1, 255, 0, 0, 255))) // replaces the latched look
	r.clk.Advance(20 * time.Millisecond)
	r.e.Sync(ProtoSACN, 7)
	at := t0.Add(20*time.Millisecond + DefaultSyncLead)
	got := map[string]call{}
	for range 2 {
		c := r.f.next(t)
		got[c.Body["colour"].(string)] = c
	}
	if c := got["#0000ff"]; !c.At.Equal(at) || len(c.Sel.Groups) != 1 {
		t.Fatalf("group: %+v", got)
	}
	if c := got["#00ff00"]; !c.At.Equal(at) || len(c.Sel.Boards) != 1 {
		t.Fatalf("board: %+v", got)
	}
	// Sync stops: a latched look applies when the fallback runs out, and
	// later data at once.
	// (Data keeps coming, so its source is not lost meanwhile.)
	r.e.Data(frame(1, 3, slots(1, 255, 255, 255, 255)))
	r.clk.Advance(SyncLossSACN / 2)
	r.e.Data(frame(1, 4, slots(1, 255, 255, 255, 255)))
	r.clk.Advance(SyncLossSACN / 2)
	r.e.check()
	if c := r.f.next(t); c.Body["colour"] != "#ffffff" || !c.At.IsZero() {
		t.Fatalf("%+v", c)
	}
	r.e.Data(frame(1, 5, slots(1, 255, 1, 1, 1)))
	if c := r.f.next(t); c.Body["colour"] != "#010101" || !c.At.IsZero() {
		t.Fatalf("%+v", c)
	}
}

// TestCoalesce: while a target's send is on its way, newer looks replace
// each other; only the newest goes next, never a queue.
func TestCoalesce(t *testing.T) {
	r := newRigWith(t, Options{Patch: groupPatch(), Role: auth.RoleOperator}, true)
	r.e.Data(sacnFrame(1, "a", 100, 1, slots(1, 255, 1, 0, 0)))
	r.f.next(t) // on its way, held
	for i := range 10 {
		r.e.Data(sacnFrame(1, "a", 100, uint8(2+i), slots(1, 255, byte(2+i), 0, 0)))
	}
	r.f.hold <- struct{}{}
	if c := r.f.next(t); c.Body["colour"] != "#0b0000" {
		t.Fatalf("%+v", c)
	}
	r.f.hold <- struct{}{}
	if n := testutil.ToFloat64(r.e.m.coalesced.WithLabelValues("group")); n != 9 {
		t.Errorf("coalesced %v, want 9", n)
	}
	r.e.Data(sacnFrame(1, "a", 100, 20, slots(1, 255, 99, 0, 0)))
	if c := r.f.next(t); c.Body["colour"] != "#630000" {
		t.Fatalf("%+v", c)
	}
	r.f.hold <- struct{}{}
}

// TestLineShare: one DMX send at a time on a line, each charged the
// line time it took; a line in debt takes none until repaid, while the
// targets keep only their newest look. (decide and finish alone, on the
// fake clock: no sends.)
func TestLineShare(t *testing.T) {
	var p Patch
	var boards []fleet.BoardView
	for i := range 16 {
		id := string(rune('a' + i))
		p.Fixtures = append(p.Fixtures, Fixture{Universe: 1, Address: 1 + 5*i, Profile: ProfileRGB, Board: id})
		boards = append(boards, fleet.BoardView{ID: id, Line: "line0", Address: i + 1})
	}
	p.Fixtures = append(p.Fixtures, Fixture{Universe: 2, Address: 1, Profile: ProfileRGB, Board: "lan1"})
	boards = append(boards, fleet.BoardView{ID: "lan1", URL: "http://lan1"})
	clk := clock.NewFake(t0)
	// Half the line: a burst of 50 ms of line time.
	e, err := New(Options{Fleet: newFakeFleet(boards...), Patch: &p, Role: auth.RoleOperator, Clock: clk, LineShare: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, Slots)
	for i := range 16 {
		copy(data[5*i:], []byte{255, 1, 2, 3, 0})
	}
	e.Data(sacnFrame(1, "a", 100, 1, data))
	e.Data(sacnFrame(2, "a", 100, 1, slots(1, 255, 1, 2, 3, 0)))
	jobs := e.decide(boards)
	if len(jobs) != 2 || jobs[0].key != "board a" || jobs[1].key != "board lan1" {
		t.Fatalf("first decision %v, want one line send and the LAN board", keys(jobs))
	}
	if more := e.decide(boards); len(more) != 0 {
		t.Fatalf("%v while the line's send is on", keys(more))
	}
	e.finish(jobs[1], true, time.Second) // the LAN is not charged
	// 30 ms, then 30 ms: 50 ms of burst gone and 10 ms in debt.
	e.finish(jobs[0], true, 30*time.Millisecond)
	jobs = e.decide(boards)
	if len(jobs) != 1 {
		t.Fatalf("%v", keys(jobs))
	}
	e.finish(jobs[0], true, 30*time.Millisecond)
	if jobs := e.decide(boards); len(jobs) != 0 {
		t.Fatalf("%v sent in debt", keys(jobs))
	}
	clk.Advance(20 * time.Millisecond) // 10 ms of line time repaid at half
	if jobs := e.decide(boards); len(jobs) != 1 {
		t.Fatalf("%v after the debt", keys(jobs))
	}
	// A newer look for a waiting target replaces its pending one.
	data[5*15+1] = 9
	e.Data(sacnFrame(1, "a", 100, 2, data))
	if n := testutil.ToFloat64(e.m.coalesced.WithLabelValues("board")); n != 1 {
		t.Errorf("coalesced %v", n)
	}
	if n := testutil.ToFloat64(e.m.lineTime.WithLabelValues("line0")); n != 0.06 {
		t.Errorf("line time %v", n)
	}
}

func keys(js []job) []string {
	var k []string
	for _, j := range js {
		k = append(k, j.key)
	}
	return k
}

// TestAccess: role none sends nothing and lists no source; role read
// lists sources and sends nothing.
func TestAccess(t *testing.T) {
	for _, role := range []auth.Role{auth.RoleNone, auth.RoleViewer} {
		r := newRig(t, groupPatch(), role)
		r.e.Data(sacnFrame(1, "a", 100, 1, slots(1, 255, 255, 0, 0)))
		r.clk.Advance(checkEvery)
		n := len(r.e.Sources())
		if role == auth.RoleNone && n != 0 || role == auth.RoleViewer && n != 1 {
			t.Errorf("%v: %d sources", role, n)
		}
		select {
		case c := <-r.f.calls:
			t.Errorf("%v sent %+v", role, c)
		default:
		}
	}
}

// FuzzParsePatch: any bytes are a patch that checks, or ErrBadPatch;
// never a panic; an accepted patch survives its own JSON.
func FuzzParsePatch(f *testing.F) {
	f.Add([]byte(`{"fixtures":[{"universe":1,"address":1,"profile":"rgb","board":"b1"}],"universes":[{"universe":1,"loss":"release"}]}`))
	f.Add([]byte(`{"fixtures":[{"universe":1,"address":1,"profile":"holo","group":1},{"universe":1,"address":5,"profile":"rgb","line":"l","line_address":3}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePatch(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadPatch) {
				t.Fatalf("%v is not ErrBadPatch", err)
			}
			return
		}
		j, _ := json.Marshal(p)
		if _, err := ParsePatch(bytes.NewReader(j)); err != nil {
			t.Fatalf("accepted patch %s refused again: %v", j, err)
		}
		var s [Slots]byte
		for _, fx := range p.Fixtures {
			LookOf(fx, &s)
		}
	})
}

// TestSourceLabels: sources making up names make at most MaxSourceLabels
// packet series; a source keeps the name it first gave.
func TestSourceLabels(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	for i := range 3 * MaxSourceLabels {
		fr := sacnFrame(1, fmt.Sprint("k", i), 100, 1, slots(1, 0))
		fr.Name = fmt.Sprint("name ", i)
		r.e.Data(fr)
		if i%MaxSources == MaxSources-1 {
			r.clk.Advance(SourceLossSACN)
			r.e.check()
		}
	}
	if n := testutil.CollectAndCount(r.e.m.packets); n != MaxSourceLabels+1 {
		t.Errorf("%d packet series, want %d", n, MaxSourceLabels+1)
	}
}

// TestRetryNotReached: a look that did not reach its target is sent
// again after RetryAfter, without a new packet.
func TestRetryNotReached(t *testing.T) {
	r := newRig(t, groupPatch(), auth.RoleOperator)
	r.f.fail.Store(1)
	r.e.Data(sacnFrame(1, "a", 100, 1, slots(1, 255, 255, 0, 0)))
	if c := r.f.next(t); c.Body["colour"] != "#ff0000" {
		t.Fatalf("%+v", c)
	}
	waitFor(t, func() bool {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		return !r.e.targets["group 1"].retryAt.IsZero()
	})
	r.clk.Advance(RetryAfter)
	if c := r.f.next(t); c.Body["colour"] != "#ff0000" {
		t.Fatalf("retry: %+v", c)
	}
	if n := testutil.ToFloat64(r.e.m.failed.WithLabelValues("group")); n != 1 {
		t.Errorf("failed %v", n)
	}
}

// TestGroupFixturesFirst: a look's group fixtures are started before
// the boards patched one by one, so that the group frames reach each
// line together and go out back to back.
func TestGroupFixturesFirst(t *testing.T) {
	p := &Patch{Fixtures: []Fixture{
		{Universe: 1, Address: 1, Profile: ProfileRGB, Board: "0a"},
		{Universe: 1, Address: 6, Profile: ProfileRGB, Group: 5},
		{Universe: 1, Address: 11, Profile: ProfileRGB, Label: "zone=bar"},
		{Universe: 2, Address: 1, Profile: ProfileRGB, Group: 2},
	}}
	e, err := New(Options{Fleet: newFakeFleet(), Patch: p})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range e.order {
		kinds = append(kinds, e.targets[k].fx.Kind())
	}
	if want := []string{"group", "group", "board", "board"}; !cmp.Equal(kinds, want) {
		t.Fatalf("targets started in the order %v (%v), want %v", kinds, e.order, want)
	}
}
