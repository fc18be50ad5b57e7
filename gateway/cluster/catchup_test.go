package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestMissing: a gateway taking a board over publishes, of what it kept
// of the board, what the stream lacks: the restart the old owner never
// published (its boot's happenings started again at seq 1 with no
// restart before them: a reorder in the soak), the happenings it had not
// sent (killed with them in memory: a gap), and nothing twice.
func TestMissing(t *testing.T) {
	h := func(seq uint16) fleet.Event {
		return fleet.Event{Board: "b", Type: fleet.EventHappening, Kind: "scene_started", Seq: seq,
			Data: []byte(fmt.Sprintf(`{"seq":%d,"t_ms":%d}`, seq, 1000+int(seq)))}
	}
	old := func(seq uint16) fleet.Event { // the previous boot's happening of the same seq
		e := h(seq)
		e.Data = []byte(fmt.Sprintf(`{"seq":%d,"t_ms":%d}`, seq, 90000+int(seq)))
		return e
	}
	restarted := fleet.Event{Board: "b", Type: fleet.EventRestarted}
	story := func(lastRestarted bool, hs ...fleet.Event) streamStory {
		s := streamStory{happenings: map[happeningKey]bool{}, lastRestarted: lastRestarted}
		for _, e := range hs {
			s.happenings[keyOf(e)] = true
			s.lastSeq = e.Seq
		}
		return s
	}
	desc := func(es []fleet.Event) []string {
		var out []string
		for _, e := range es {
			if e.Type == fleet.EventRestarted {
				out = append(out, "restarted")
			} else {
				out = append(out, fmt.Sprint(e.Seq))
			}
		}
		return out
	}
	kept := []fleet.Event{restarted, h(1), h(2), h(3)}
	for _, tc := range []struct {
		name  string
		kept  []fleet.Event
		story streamStory
		want  []string
	}{
		{"the old owner published nothing of this boot", kept, story(false, old(1), old(2), old(3), old(17)), []string{"restarted", "1", "2", "3"}},
		{"the old owner published the restart only", kept, story(true, old(17)), []string{"1", "2", "3"}},
		{"the old owner published up to 2", kept, story(false, old(3), h(1), h(2)), []string{"3"}},
		{"the old owner published everything", kept, story(false, h(1), h(2), h(3)), nil},
		{"nothing of the board in the stream", kept, story(false), []string{"restarted", "1", "2", "3"}},
		{"no restart kept, two happenings missing", []fleet.Event{h(5), h(6), h(7)}, story(false, h(5)), []string{"6", "7"}},
		// A gateway that started after the board restarted knows no
		// earlier boot: the seqs starting again say it.
		{"a restart no one published", []fleet.Event{h(2), h(3)}, story(false, old(57), old(58)), []string{"restarted", "2", "3"}},
		{"going on from the stream", []fleet.Event{h(59), h(60)}, story(false, old(57), old(58)), []string{"59", "60"}},
		// The old owner was behind when the board restarted: the old
		// boot's last happenings go before the restart and the new boot.
		{"the old owner behind at the restart", []fleet.Event{old(57), old(58), old(59), restarted, h(1), h(2)},
			story(false, old(57)), []string{"58", "59", "restarted", "1", "2"}},
		{"the old owner published the old boot and the restart", []fleet.Event{old(58), old(59), restarted, h(1), h(2)},
			story(true, old(58), old(59)), []string{"1", "2"}},
		{"the stream is in the new boot", []fleet.Event{old(58), old(59), restarted, h(1), h(2)},
			story(false, old(58), old(59), h(1)), []string{"2"}},
		{"two restarts kept", []fleet.Event{old(59), restarted, restarted, h(1)},
			story(false, old(59)), []string{"restarted", "restarted", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := desc(missing(tc.kept, tc.story)); !slices.Equal(got, tc.want) {
				t.Errorf("missing = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestKeepLocked: what a standby gateway keeps of a board holds the
// last catchUpMargin of its happenings (a minute at the show's 10 a
// second: 600, where it kept 256, and a takeover of a board whose owner
// was 30 s behind lost the older ones), at most standbyKeep events, the
// newest, restarts among them.
func TestKeepLocked(t *testing.T) {
	t.Run("a minute", func(t *testing.T) {
		ev := &events{standby: map[string][]fleet.Event{}}
		t0 := time.Now()
		for i := range 900 { // 90 s at 10 a second
			ev.keepLocked(fleet.Event{Board: "b", Type: fleet.EventHappening, Seq: uint16(i + 1), Time: t0.Add(time.Duration(i) * 100 * time.Millisecond)})
		}
		q := ev.standby["b"]
		if len(q) != 601 || q[0].Seq != 300 || q[len(q)-1].Seq != 900 {
			t.Fatalf("kept %d events, %d to %d; want the last minute: 601, 300 to 900", len(q), q[0].Seq, q[len(q)-1].Seq)
		}
	})
	ev := &events{standby: map[string][]fleet.Event{}}
	for i := range standbyKeep + 10 {
		ev.keepLocked(fleet.Event{Board: "b", Type: fleet.EventHappening, Seq: uint16(i + 1)})
	}
	ev.keepLocked(fleet.Event{Board: "b", Type: fleet.EventState, Kind: "leds"}) // not kept
	q := ev.standby["b"]
	if len(q) != standbyKeep || q[0].Seq != 11 || q[len(q)-1].Seq != standbyKeep+10 {
		t.Fatalf("kept %d events, %d to %d", len(q), q[0].Seq, q[len(q)-1].Seq)
	}
	// The old boot's last happenings stay kept across a restart (its
	// owner may not have published them yet).
	ev.keepLocked(fleet.Event{Board: "b", Type: fleet.EventRestarted})
	ev.keepLocked(fleet.Event{Board: "b", Type: fleet.EventHappening, Seq: 1})
	q = ev.standby["b"]
	if len(q) != standbyKeep || q[len(q)-3].Seq != standbyKeep+10 || q[len(q)-2].Type != fleet.EventRestarted || q[len(q)-1].Seq != 1 {
		t.Fatalf("after a restart: %d kept, the last %+v", len(q), q[len(q)-3:])
	}
}

// TestOwnsLocal: this gateway publishes a board's events when its record
// names this gateway in this run; a record it wrote in an earlier run is
// not its own until rewritten (another gateway may have claimed the
// board meanwhile: both published its events, each twice in the soak);
// nothing is its own before the records are read.
func TestOwnsLocal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		loaded  bool
		rec     *record
		standby bool
		want    bool
	}{
		{"records not read yet", false, &record{View: fleet.BoardView{Gateway: "gw1"}, Boot: "now"}, false, false},
		{"no record yet", true, nil, false, false},
		{"this run's record", true, &record{View: fleet.BoardView{Gateway: "gw1"}, Boot: "now"}, false, true},
		{"an earlier run's record", true, &record{View: fleet.BoardView{Gateway: "gw1"}, Boot: "before"}, false, false},
		{"another gateway's", true, &record{View: fleet.BoardView{Gateway: "gw2"}, Boot: "x"}, false, false},
		{"deleted", true, &record{gone: true}, false, false},
		{"standing by", true, nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{name: "gw1", boot: "now", loaded: tc.loaded, records: map[string]*record{}, standby: map[string]bool{"b": tc.standby}}
			if tc.rec != nil {
				c.records["b"] = tc.rec
			}
			if got := c.ownsLocal("b"); got != tc.want {
				t.Errorf("ownsLocal = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRestartedOwner: a record whose owner's heartbeat names another run
// than the one that wrote it belongs to a gateway that restarted since:
// a gateway that reaches the board too takes it over (with what it kept
// of the board meanwhile, which the restarted owner never saw).
func TestRestartedOwner(t *testing.T) {
	c := &Cluster{gateways: map[string]*gwState{"gw1": {hb: Heartbeat{Name: "gw1", Boot: "run2"}}}}
	for _, tc := range []struct {
		rec  record
		want bool
	}{
		{record{View: fleet.BoardView{Gateway: "gw1"}, Boot: "run1"}, true},
		{record{View: fleet.BoardView{Gateway: "gw1"}, Boot: "run2"}, false},
		{record{View: fleet.BoardView{Gateway: "gw1"}}, false},            // an old record without a boot
		{record{View: fleet.BoardView{Gateway: "gw9"}, Boot: "x"}, false}, // never heard
	} {
		if got := c.restartedLocked(&tc.rec); got != tc.want {
			t.Errorf("restartedLocked(%+v) = %v, want %v", tc.rec, got, tc.want)
		}
	}
}

func TestSeqFollows(t *testing.T) {
	for _, tc := range []struct {
		a, b uint16
		want bool
	}{{2, 1, true}, {1, 2, false}, {5, 5, false}, {1, 65535, true}, {3, 65534, true}, {65535, 1, false}, {40000, 1, false}} {
		if got := seqFollows(tc.a, tc.b); got != tc.want {
			t.Errorf("seqFollows(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestDeadLocked: a gateway not heard alive is taken for dead (its boards
// taken over) only once this gateway has listened for DeadAfter since it
// started: one that just joined may have missed a live gateway's
// heartbeat in what it read at joining, and took that gateway's board
// (TestJoinKeepsLiveOwners under load).
func TestDeadLocked(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	c := &Cluster{name: "b", clk: clk, started: clk.Now(), o: Options{DeadAfter: 4 * time.Second},
		gateways: map[string]*gwState{"a": {hb: Heartbeat{Name: "a"}, heard: clk.Now()}}}
	if c.deadLocked("a") || c.deadLocked("b") {
		t.Fatal("a gateway heard alive, or this one, taken for dead")
	}
	if c.deadLocked("c") {
		t.Fatal("a gateway not heard yet taken for dead just after the start")
	}
	clk.Advance(4 * time.Second)
	if !c.deadLocked("c") || !c.deadLocked("a") {
		t.Fatal("gateways silent for DeadAfter since the start not taken for dead")
	}
}
