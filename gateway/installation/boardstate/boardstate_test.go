package boardstate

import (
	"slices"
	"testing"
)

// TestAll: every state once, Unassigned last (Home Assistant's sensor
// lists them as its options in this order).
func TestAll(t *testing.T) {
	want := []string{"in_sync", "drifted", "applying", "unreachable", "failed", "needs_lan", "unassigned"}
	if !slices.Equal(All, want) {
		t.Fatalf("All = %v, want %v", All, want)
	}
	if !slices.Equal(Checked, want[:len(want)-1]) {
		t.Fatalf("Checked = %v", Checked)
	}
}
