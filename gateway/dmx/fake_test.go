package dmx

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// call is one Do the fake fleet saw.
type call struct {
	Sel  fleet.Selector
	Kind string
	Body map[string]any
	At   time.Time
}

// fakeFleet records Do calls; hold, when set, blocks each Do until a
// value arrives on it.
type fakeFleet struct {
	boards []fleet.BoardView
	calls  chan call
	hold   chan struct{}
	// fail is how many Do calls to fail (not reached) before the rest
	// succeed.
	fail atomic.Int32
}

func newFakeFleet(boards ...fleet.BoardView) *fakeFleet {
	return &fakeFleet{boards: boards, calls: make(chan call, 1024)}
}

func (f *fakeFleet) Boards(fleet.Filter) []fleet.BoardView { return f.boards }

func (f *fakeFleet) Do(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	if _, err := fleet.Prepare(sel, a, time.Time{}); err != nil {
		return nil, err
	}
	c := call{Sel: sel, Kind: a.Kind, At: a.At}
	if len(a.Body) > 0 {
		_ = json.Unmarshal(a.Body, &c.Body)
	}
	f.calls <- c
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("fake: not reached")
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
		}
	}
	via := "lan"
	if len(sel.Groups) > 0 {
		via = "group"
	}
	return []fleet.Result{{Board: "x", Via: via}}, nil
}

// next waits for the next Do call.
func (f *fakeFleet) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no Do call")
	}
	return call{}
}

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

// rig is an engine over a fake fleet and a fake clock, running.
type rig struct {
	e   *Engine
	f   *fakeFleet
	clk *clock.Fake
}

func newRig(t *testing.T, p *Patch, role auth.Role, boards ...fleet.BoardView) *rig {
	return newRigWith(t, Options{Patch: p, Role: role}, false, boards...)
}

// newRigWith is newRig with options; hold makes every Do wait for a
// value on f.hold.
func newRigWith(t *testing.T, o Options, hold bool, boards ...fleet.BoardView) *rig {
	t.Helper()
	clk := clock.NewFake(t0)
	f := newFakeFleet(boards...)
	if hold {
		f.hold = make(chan struct{})
	}
	o.Fleet, o.Clock = f, clk
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &rig{e: e, f: f, clk: clk}
}

// slots builds a universe frame with the given values from address 1.
func slots(at int, vals ...byte) []byte {
	b := make([]byte, Slots)
	copy(b[at-1:], vals)
	return b
}

func sacnFrame(uni int, key string, prio uint8, seq uint8, data []byte) Frame {
	return Frame{Proto: ProtoSACN, Universe: uni, Key: key, Name: key, Addr: "127.0.0.1:1", Priority: prio,
		Sequence: seq, HasSequence: true, Slots: data}
}
