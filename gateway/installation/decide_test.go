package installation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	strat := Strategy{WaveSize: 2, MaxInFlight: 2, FailureThreshold: 0.5, MinSample: 2}
	run := func(state string, wave int) Run {
		return Run{State: state, Wave: wave, Strategy: strat, Waves: [][]string{{"a", "b"}, {"c", "d"}}}
	}
	phases := func(p ...string) map[string]*RunBoard {
		m := map[string]*RunBoard{}
		for i, id := range []string{"a", "b", "c", "d"} {
			m[id] = &RunBoard{Board: id, Wave: i / 2, Phase: p[i]}
		}
		return m
	}
	P, A, S, F, U, C := PhasePending, PhaseApplying, PhaseInSync, PhaseFailed, PhaseUnreachable, PhaseCancelled
	tests := []struct {
		name    string
		r       Run
		boards  map[string]*RunBoard
		working map[string]bool
		want    decision
	}{
		{"starts the first wave", run(RunRunning, 0), phases(P, P, P, P), nil,
			decision{state: RunRunning, start: []string{"a", "b"}}},
		{"in-flight limit", run(RunRunning, 0), phases(A, P, P, P), map[string]bool{"a": true},
			decision{state: RunRunning, start: []string{"b"}}},
		{"full", run(RunRunning, 0), phases(A, A, P, P), map[string]bool{"a": true, "b": true},
			decision{state: RunRunning}},
		{"applying after a crash is started again", run(RunRunning, 0), phases(A, S, P, P), nil,
			decision{state: RunRunning, start: []string{"a"}}},
		{"next wave once the first is done", run(RunRunning, 0), phases(S, U, P, P), nil,
			decision{state: RunRunning, wave: 1, reason: "wave 2 of 2", start: []string{"c", "d"}}},
		{"threshold pauses", run(RunRunning, 0), phases(F, F, P, P), nil,
			decision{state: RunPaused, reason: "2 of 2 finished boards failed (threshold 50%)"}},
		{"below the sample no pause", run(RunRunning, 0), phases(F, A, P, P), map[string]bool{"b": true},
			decision{state: RunRunning}},
		{"acknowledged failures do not pause again", Run{State: RunRunning, Strategy: strat, Waves: [][]string{{"a", "b"}, {"c", "d"}}, AckFailed: 2},
			phases(F, F, P, P), nil, decision{state: RunRunning, wave: 1, reason: "wave 2 of 2", start: []string{"c", "d"}}},
		{"paused starts nothing", run(RunPaused, 0), phases(P, P, P, P), nil, decision{state: RunPaused}},
		{"done when every wave finished", run(RunRunning, 1), phases(S, S, S, S), nil,
			decision{state: RunDone, wave: 2, reason: "every board finished", finish: true}},
		{"done waits for workers", run(RunRunning, 1), phases(S, S, S, S), map[string]bool{"d": true},
			decision{state: RunDone, wave: 2, reason: "every board finished"}},
		{"abort cancels the pending", run(RunAborted, 0), phases(A, S, P, P), map[string]bool{"a": true},
			decision{state: RunAborted, cancel: []string{"c", "d"}}},
		{"abort finishes once idle", run(RunAborted, 0), phases(S, S, C, C), nil,
			decision{state: RunAborted, finish: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.working
			if w == nil {
				w = map[string]bool{}
			}
			got := decide(tc.r, tc.boards, w)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
