package rs485

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestNewBoot: an uptime that went back, or grew by less than the time
// that passed (beyond the slack of whole seconds and late reads), is a
// new boot; one that kept pace is not.
func TestNewBoot(t *testing.T) {
	for _, c := range []struct {
		name     string
		was, now uint32
		elapsed  time.Duration
		want     bool
	}{
		{"kept pace", 100, 110, 10 * time.Second, false},
		{"whole seconds short", 100, 109, 10*time.Second + 900*time.Millisecond, false},
		{"read 2 s late", 100, 109, 10*time.Second + 2*time.Second, false},
		{"went back", 100, 3, time.Second, true},
		{"young board swapped", 1, 3, 8 * time.Second, true},
		{"power cycled at start", 0, 0, 4 * time.Second, true},
		{"same reply twice", 5, 5, 0, false},
	} {
		if got := newBoot(c.was, c.elapsed, c.now); got != c.want {
			t.Errorf("%s: newBoot(%d, %v, %d) = %v, want %v", c.name, c.was, c.elapsed, c.now, got, c.want)
		}
	}
}

// TestYoungBoardRestartSeen: under the master's (fake) clock, a board
// whose uptime grew by 2 s in 10 s started again, though its uptime did not
// go back; the restart is told only once GET /info says whose it was.
func TestYoungBoardRestartSeen(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := New(Options{Name: "t", Clock: clk, Addresses: []int{7}})
	sink := newRecSink()
	l.sched.sink = sink
	b := &board{addr: 7, ref: fleet.Ref{Driver: l.name, Addr: "7"}, id: "aaaaaaaaaaaa", present: true}
	l.gotUptime(b, 1)
	clk.Advance(5 * time.Second)
	l.gotUptime(b, 6)
	if b.booted {
		t.Fatal("an uptime that kept pace taken for a restart")
	}
	clk.Advance(10 * time.Second)
	l.gotUptime(b, 8)
	if !b.booted || b.needs&needInfo == 0 || b.needs&needReplay == 0 {
		t.Fatalf("restart not seen: booted %v needs %b", b.booted, b.needs)
	}
	if sink.RestartedN["7"] != 0 {
		t.Fatal("restart told before the board said who it is")
	}
	// The same id: a restart of that board.
	if !l.identifiedOrSame(b, "aaaaaaaaaaaa") {
		t.Fatal("the same id not taken")
	}
}

// identifiedOrSame runs the id check of a GET /info follow-up.
func (l *Line) identifiedOrSame(b *board, id string) bool {
	return id == b.id || l.identified(b, id)
}

// TestBoardSwappedAtSameAddress: a board is taken off the line and a new
// one (another id, no happening yet, like the old one) answers at its
// address before the old one was missed long enough to be lost. The
// master reads the new board's id, tells the sink it is another board
// (Seen with its identity, no Restarted), enables its happenings and
// delivers them from its first.
func TestBoardSwappedAtSameAddress(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	a := startBoard(t, line, 5, []int{2})
	l, sink := startMaster(t, line, Options{Addresses: []int{5}, MissLimit: 100})
	sink.Wait(t, 20*time.Second, "the first board seen with its states", func(s *recSink) bool {
		return field(s.Infos["5"], "id") == a.Board.Identity().ID && len(s.States["5"]) >= 5
	})
	a.Stop()
	// A poll goes unanswered (a swap takes longer than a poll), yet far
	// fewer than MissLimit: the old board is never reported lost.
	timeouts := l.Stats().Timeouts
	waitFor(t, 20*time.Second, "a poll unanswered", func() bool { return l.Stats().Timeouts > timeouts })
	b := startBoard(t, line, 5, []int{2})
	newID := b.Board.Identity().ID
	sink.Wait(t, 20*time.Second, "the new board seen", func(s *recSink) bool { return field(s.Infos["5"], "id") == newID })
	b.Emit("touch", map[string]any{"action": "down", "x": 3, "y": 4})
	sink.Wait(t, 20*time.Second, "the new board's first happening", func(s *recSink) bool { return len(s.Hs["5"]) == 1 })
	sink.Mu.Lock()
	defer sink.Mu.Unlock()
	if h := sink.Hs["5"][0]; h.Seq != 1 || h.Kind != "touch" {
		t.Errorf("happening %+v, want the new board's touch 1", h)
	}
	if sink.RestartedN["5"] != 0 || len(sink.LostWhy["5"]) != 0 {
		t.Errorf("a swap told as restart %d or loss %v", sink.RestartedN["5"], sink.LostWhy["5"])
	}
}

// TestLostWhileCommandsWait: callers keep the line busy with commands to
// a board that went away, so that polls wait; each command that no try
// got a reply to counts as a missed poll, and the board is reported lost.
func TestLostWhileCommandsWait(t *testing.T) {
	t.Parallel()
	line := newLine(t, simline.Faults{})
	a := startBoard(t, line, 9, nil)
	l, sink := startMaster(t, line, Options{Addresses: []int{9}, ReplyWait: 100 * time.Millisecond, Retries: -1,
		PollInterval: time.Hour})
	sink.Wait(t, 20*time.Second, "seen", func(s *recSink) bool { return s.SeenN["9"] == 1 })
	a.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l.Call(ctx, "9", "GET", "/info", nil)
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	sink.Wait(t, 20*time.Second, "lost", func(s *recSink) bool { return len(s.LostWhy["9"]) == 1 })
}
