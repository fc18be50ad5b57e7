package rollout

import "testing"

// TestOverallFailure: the overall threshold waits for its sample, counts
// only the failures beyond those an operator accepted, and pauses at the
// share (not only above it).
func TestOverallFailure(t *testing.T) {
	for _, c := range []struct {
		name                               string
		failed, finished, acked, minSample int
		share                              float64
		want                               string
	}{
		{"below the sample", 2, 2, 0, 3, 0.25, ""},
		{"at the share", 1, 4, 0, 3, 0.25, "1 of 4 finished boards failed (threshold 25%)"},
		{"under the share", 1, 5, 0, 3, 0.25, ""},
		{"accepted failures", 2, 4, 2, 3, 0.25, ""},
		{"one more than accepted", 3, 4, 2, 3, 0.25, "3 of 4 finished boards failed (threshold 25%)"},
		{"none failed", 0, 10, 0, 3, 0.25, ""},
	} {
		if got := OverallFailure(c.failed, c.finished, c.acked, c.minSample, c.share); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
