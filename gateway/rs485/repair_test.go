package rs485

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/simline"
)

// TestGroupSceneMissedRepaired: a member that misses a group scene start
// (a SCENE frame, or POST /scenes/apply as a group line) is found out at
// its next status read and sent the start addressed, once; the member
// that took it is not sent it again, and a start both take repairs
// nothing.
func TestGroupSceneMissedRepaired(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, l *Line) error
	}{
		{"frame", func(ctx context.Context, l *Line) error { return l.Group(ctx, 2, &frame.SceneRequest{Slot: 3}) }},
		{"line", func(ctx context.Context, l *Line) error {
			return l.GroupCall(ctx, 2, "POST", "/scenes/apply", []byte(`{"slot":3}`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := newLine(t, simline.Faults{})
			deaf := &scriptBoard{addr: 7, groups: []int{2}, missGroupScene: 1}
			took := &scriptBoard{addr: 8, groups: []int{2}}
			deaf.start(t, line)
			took.start(t, line)
			l, sink := startMaster(t, line, Options{Addresses: []int{7, 8}, PollInterval: 10 * time.Millisecond,
				PollWait: 100 * time.Millisecond, ClockEvery: -1})
			sink.Wait(t, 20*time.Second, "both seen in group 2", func(s *recSink) bool {
				return s.States["7"]["link"] != nil && s.States["8"]["link"] != nil
			})
			afterPolls(t, l, 4) // both have given a status block
			ctx := context.Background()
			started := func(n int) {
				t.Helper()
				sink.Wait(t, 20*time.Second, "the scene started on both", func(s *recSink) bool {
					return len(s.Hs["7"]) >= n && len(s.Hs["8"]) >= n
				})
			}
			if err := tc.send(ctx, l); err != nil {
				t.Fatal(err)
			}
			started(1)
			if err := tc.send(ctx, l); err != nil {
				t.Fatal(err)
			}
			started(2)
			afterPolls(t, l, 4) // a wrong repair would have gone by then
			deaf.mu.Lock()
			defer deaf.mu.Unlock()
			took.mu.Lock()
			defer took.mu.Unlock()
			if want := []string{"addressed", "group"}; !slices.Equal(deaf.scenes, want) {
				t.Errorf("the member that missed the first start took %v, want %v", deaf.scenes, want)
			}
			if want := []string{"group", "group"}; !slices.Equal(took.scenes, want) {
				t.Errorf("the member that took both took %v, want %v", took.scenes, want)
			}
			if n := l.Repaired(); n != 1 {
				t.Errorf("Repaired() = %d, want 1", n)
			}
		})
	}
}
