package metrics

import (
	"testing"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestBoardClock: the clock gauges follow the boards' views: online boards
// with an estimate get both, others none.
func TestBoardClock(t *testing.T) {
	src := testFleet()
	src.views[0].Clock = &fleet.BoardClock{OffsetUS: -1_500_250, UncertaintyUS: 180, SyncedAt: t0, Via: "lan"}
	src.views[2].Clock = &fleet.BoardClock{OffsetUS: 1, UncertaintyUS: 1, SyncedAt: t0} // offline
	b := NewBoards(src, BoardsOptions{PollEvery: -1})
	const want = `
# HELP holo_gateway_board_clock_offset_seconds The board's monotonic clock (time since its boot) minus the gateway's (Unix time), as last aligned, while online.
# TYPE holo_gateway_board_clock_offset_seconds gauge
holo_gateway_board_clock_offset_seconds{board="b1"} -1.50025
# HELP holo_gateway_board_clock_uncertainty_seconds How far the true clock offset may be from board_clock_offset_seconds.
# TYPE holo_gateway_board_clock_uncertainty_seconds gauge
holo_gateway_board_clock_uncertainty_seconds{board="b1"} 0.00018
`
	compare(t, b, want, "holo_gateway_board_clock_offset_seconds", "holo_gateway_board_clock_uncertainty_seconds")
}
