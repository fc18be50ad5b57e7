package fleet

import "testing"

// Happening numbers wrap: what a driver hands over once is never handed
// over again, across the wrap too.
func TestSeqAfter(t *testing.T) {
	for _, tc := range []struct {
		a, b uint16
		want bool
	}{
		{1, 0, true},          // none seen yet: every number is new
		{0, 0, false},         // 0 is no happening
		{2, 1, true},          //
		{1, 1, false},         // the same one
		{1, 2, false},         // an older one
		{1, 65535, true},      // across the wrap
		{65535, 1, false},     // behind, across the wrap
		{1 + 1<<15, 1, false}, // half the circle ahead counts as behind
		{1 << 15, 1, true},    // just under half ahead
	} {
		if got := SeqAfter(tc.a, tc.b); got != tc.want {
			t.Errorf("SeqAfter(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
