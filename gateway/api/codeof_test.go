package api

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestCodeOfCallerErrors: a selector or action the caller got wrong is the
// caller's error (400), never an internal one (500), however the fleet
// core reports it.
func TestCodeOfCallerErrors(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: group 0 (groups are 1-31)", fleet.ErrBadSelector),
		fmt.Errorf("%w: mode", fleet.ErrBadAction),
	} {
		if got := codeOf(err); got != codes.InvalidArgument {
			t.Errorf("codeOf(%v) = %v, want InvalidArgument", err, got)
		}
	}
}
