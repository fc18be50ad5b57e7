package cue

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/gateway/timecode"
)

// TestDecideChase: the chase's decisions, without boards or clocks.
func TestDecideChase(t *testing.T) {
	cues := []Cue{
		{Number: "1"}, // no timecode: never fired by the chase
		{Number: "2", Timecode: "00:00:01:00"},
		{Number: "3", Timecode: "00:00:02:00"},
		{Number: "4", Timecode: "00:00:02:10"},
	}
	tc := func(s string, r timecode.Rate) timecode.Timecode {
		t.Helper()
		v, err := timecode.Parse(s, r)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	e25, e30 := timecode.EBU, timecode.SMPTE
	for _, c := range []struct {
		name string
		prev string
		had  bool
		// ahead: the frames prev is ahead of the source (freewheeled)
		ahead int
		rate  timecode.Rate
		now   string
		want  chaseStep
	}{
		{"first frame before every cue", "", false, 0, e25, "00:00:00:10", chaseStep{standby: 0}},
		{"first frame chases", "", false, 0, e25, "00:00:02:05", chaseStep{fire: []int{2}, standby: 3}},
		{"the same frame", "00:00:02:05", true, 0, e25, "00:00:02:05", chaseStep{same: true, standby: -1}},
		{"the next frame, no cue", "00:00:00:10", true, 0, e25, "00:00:00:11", chaseStep{standby: -1}},
		{"the frame of a cue", "00:00:00:24", true, 0, e25, "00:00:01:00", chaseStep{fire: []int{1}, standby: 2}},
		{"a dropped packet passes two cues", "00:00:01:24", true, 0, e25, "00:00:02:10", chaseStep{fire: []int{2, 3}, standby: 4}},
		{"a second forward still plays", "00:00:01:00", true, 0, e25, "00:00:02:00", chaseStep{fire: []int{2}, standby: 3}},
		{"more than a second forward chases", "00:00:00:00", true, 0, e25, "00:00:02:01", chaseStep{fire: []int{2}, standby: 3}},
		{"back chases", "00:00:02:20", true, 0, e25, "00:00:01:05", chaseStep{fire: []int{1}, standby: 2}},
		{"back before every cue", "00:00:02:20", true, 0, e25, "00:00:00:05", chaseStep{standby: 0}},
		{"a stopped chase chases", "00:00:01:24", false, 0, e25, "00:00:02:00", chaseStep{fire: []int{2}, standby: 3}},
		{"a new rate chases", "00:00:01:24", true, 0, e30, "00:00:02:00", chaseStep{fire: []int{2}, standby: 3}},
		// A sender kept off the processor: the chase freewheeled 3 frames
		// past cue 3's frame (02:00) and fired it; the sender's late
		// frames catch up, firing nothing (not cue 2, behind the
		// position, then cue 3 again), until the source is where the
		// chase is.
		{"a late frame while ahead catches up", "00:00:02:02", true, 3, e25, "00:00:01:24", chaseStep{standby: -1, behind: 3}},
		{"the next late frame catches up", "00:00:02:02", true, 2, e25, "00:00:02:00", chaseStep{standby: -1, behind: 2}},
		{"caught up", "00:00:02:02", true, 1, e25, "00:00:02:02", chaseStep{same: true, standby: -1}},
		{"a stopped chase ahead catches up", "00:00:02:02", false, 10, e25, "00:00:01:24", chaseStep{standby: -1, behind: 3}},
		{"further back than it ran ahead chases", "00:00:02:02", true, 2, e25, "00:00:01:24", chaseStep{fire: []int{1}, standby: 2}},
		{"not ahead: back by a frame chases", "00:00:02:02", true, 0, e25, "00:00:01:24", chaseStep{fire: []int{1}, standby: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var prev timecode.Timecode
			if c.prev != "" {
				prev = tc(c.prev, timecode.EBU)
			}
			got := decideChase(cues, prev, c.had, c.ahead, tc(c.now, c.rate))
			if diff := cmp.Diff(got, c.want, cmp.AllowUnexported(chaseStep{})); diff != "" {
				t.Fatalf("(-got +want)\n%s", diff)
			}
		})
	}
}
