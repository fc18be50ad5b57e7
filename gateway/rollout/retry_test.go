package rollout_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// busyFleet is a fleet whose calls to one board fail as a line kept busy
// (a show's timed sends) or a gateway restarting makes them fail, while
// busy is set.
type busyFleet struct {
	rollout.Fleet
	board string
	busy  atomic.Bool
	// err is what a busy board's calls fail with (nil: fleet.ErrNoReply).
	err error
}

// failed is the error of a call to id, nil when it goes through.
func (f *busyFleet) failed(id, method, path string) error {
	if id != f.board || !f.busy.Load() {
		return nil
	}
	return fmt.Errorf("%w: %s %s: the line is busy", cmp.Or[error](f.err, fleet.ErrNoReply), method, path)
}

func (f *busyFleet) Call(ctx context.Context, id, method, path string, body []byte) (fleet.Reply, error) {
	if err := f.failed(id, method, path); err != nil {
		return fleet.Reply{}, err
	}
	return f.Fleet.Call(ctx, id, method, path, body)
}

func (f *busyFleet) CallRaw(ctx context.Context, id, method, path, ct string, body io.Reader, n int64) (fleet.Reply, error) {
	if err := f.failed(id, method, path); err != nil {
		return fleet.Reply{}, err
	}
	return f.Fleet.CallRaw(ctx, id, method, path, ct, body, n)
}

// TestLineBusyWaitsWithoutRetries: a board reached only over an RS485
// line that a show's timed sends keep busy (its calls fail as
// fleet.ErrLineBusy: never sent) waits at the gate, saying so, and spends
// none of its retries however long the show goes on; once the line is
// free it is updated. Before, each such call spent a retry (the soak's
// line boards stayed pending, their retries spent, for as long as the
// show ran). Time runs on a fake clock.
func TestLineBusyWaitsWithoutRetries(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 3, 9, 22, 0, 0, 0, time.UTC))
	bs := startBoards(t, 1)
	var bf *busyFleet
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) {
		bf = &busyFleet{Fleet: o.Fleet, board: bs.ids[0], err: fleet.ErrLineBusy}
		bf.busy.Store(true)
		o.Fleet, o.Clock, o.Kick, o.Settle = bf, fake, time.Hour, time.Nanosecond
	})
	g.waitOnline(t, 1)
	a := g.add(t, testImage(t, "2.0.0", 30000))
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true},
		Retries: 1, Backoff: rollout.Duration(time.Second),
		Timeouts: rollout.Timeouts{Restart: rollout.Duration(time.Hour), Confirm: rollout.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for n := range 5 { // five rechecks: more than the plan's retries
		b := waitBoard(t, g, st.ID, bs.ids[0], fmt.Sprintf("wait %d", n), func(b rollout.Board) bool {
			return b.Waiting == rollout.WaitLineBusy && b.NextTry.After(last)
		})
		if b.Phase != rollout.PhasePending || b.Attempts != 0 {
			t.Fatalf("wait %d: board %s after %d attempts (%s), want pending after none", n, b.Phase, b.Attempts, b.Error)
		}
		last = b.NextTry
		fake.Set(b.NextTry)
	}
	bf.busy.Store(false)
	defer fake.Run(50 * time.Millisecond)()
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if b := boardRows(t, g, st.ID)[bs.ids[0]]; b.Phase != rollout.PhaseSucceeded || b.Attempts != 0 {
		t.Fatalf("board %s after %d attempts (%s)", b.Phase, b.Attempts, b.Error)
	}
	if boots := bs.bootsOf(0); len(boots) != 2 || boots[1] != "2.0.0" {
		t.Errorf("the board booted %v", boots)
	}
}

// TestRetryWaitBounded: a board whose calls fail again and again (its
// line busy with a show for minutes) waits at most MaxBackoff between two
// tries, also across a change of the engine running the rollout (a new
// coordinator, a restarted gateway: the board's record carries its next
// try), so it is updated within MaxBackoff of its line being free.
// Before, the wait doubled without bound: after a dozen failures the
// board's next try was over half an hour away (the soak's line boards
// left pending for 15 minutes). Time runs on a fake clock.
func TestRetryWaitBounded(t *testing.T) {
	const failures = 12
	start := time.Date(2026, 3, 9, 22, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	bs := startBoards(t, 1)
	dir := t.TempDir()
	var bf *busyFleet
	tune := func(o *rollout.Options) {
		bf = &busyFleet{Fleet: o.Fleet, board: bs.ids[0]}
		bf.busy.Store(true)
		o.Fleet, o.Clock, o.Kick, o.Settle = bf, fake, time.Hour, time.Nanosecond
	}
	g := startGateway(t, dir, bs.urls, tune)
	g.waitOnline(t, 1)
	a := g.add(t, testImage(t, "2.0.0", 30000))
	st, err := g.eng.Create(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true},
		Retries: rollout.MaxRetries, Backoff: rollout.Duration(time.Second),
		Timeouts: rollout.Timeouts{Restart: rollout.Duration(time.Hour), Confirm: rollout.Duration(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= failures; n++ {
		if n == failures/2 {
			// The engine changes hands: a new one reads the records.
			g.stop()
			g = startGateway(t, dir, bs.urls, tune)
			g.waitOnline(t, 1)
		}
		b := waitBoard(t, g, st.ID, bs.ids[0], fmt.Sprintf("failure %d", n), func(b rollout.Board) bool { return b.Attempts >= n })
		if b.Phase != rollout.PhasePending {
			t.Fatalf("failure %d: board %s", n, b.Phase)
		}
		if wait := b.NextTry.Sub(fake.Now()); wait > rollout.MaxBackoff {
			t.Fatalf("failure %d: next try %v away, more than %v", n, wait, rollout.MaxBackoff)
		}
		if n < failures {
			fake.Set(b.NextTry)
		}
	}
	// The line is free now: the board starts at its next try and is
	// updated.
	bf.busy.Store(false)
	freed := fake.Now()
	defer fake.Run(50 * time.Millisecond)()
	g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	b := boardRows(t, g, st.ID)[bs.ids[0]]
	if b.Phase != rollout.PhaseSucceeded {
		t.Fatalf("board %s (%s)", b.Phase, b.Error)
	}
	for _, s := range b.Timeline {
		if s.Phase == rollout.PhaseStaging {
			// Within its last wait (and a scheduler's tick).
			if d := s.Time.Sub(freed); d > rollout.MaxBackoff+time.Second {
				t.Errorf("the board started %v after its line was free, more than %v", d, rollout.MaxBackoff)
			}
			break
		}
	}
	if boots := bs.bootsOf(0); len(boots) != 2 || boots[1] != "2.0.0" {
		t.Errorf("the board booted %v", boots)
	}
}
