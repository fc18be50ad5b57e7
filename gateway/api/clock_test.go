package api

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestBoardClockFields: a board's clock estimate reaches the Board
// message (and its JSON); a board without one shows no synced_at.
func TestBoardClockFields(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	b := boardOf(fleet.BoardView{ID: "02aabbccddee", Clock: &fleet.BoardClock{OffsetUS: -1740830400000000, UncertaintyUS: 140, SyncedAt: at, Via: "lan"}})
	if b.ClockOffsetUs != -1740830400000000 || b.ClockUncertaintyUs != 140 || !b.ClockSyncedAt.AsTime().Equal(at) {
		t.Fatalf("board %v", b)
	}
	js, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"clockOffsetUs":"-1740830400000000"`, `"clockUncertaintyUs":"140"`, `"clockSyncedAt":"2025-03-01T12:00:00Z"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON %s lacks %s", js, want)
		}
	}
	if b := boardOf(fleet.BoardView{ID: "02aabbccddee"}); b.ClockSyncedAt != nil || b.ClockUncertaintyUs != 0 {
		t.Fatalf("unmeasured board %v", b)
	}
}
