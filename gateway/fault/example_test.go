package fault_test

import (
	"fmt"

	"github.com/holofleet/holofleet/gateway/fault"
)

// ErrNoSuchCue is a domain package's sentinel: its class says how every
// surface answers it.
var ErrNoSuchCue = fault.New(fault.NotFound, "cues: no such cue")

func Example() {
	err := fmt.Errorf("%w: %q", ErrNoSuchCue, "finale")
	c := fault.Of(err)
	fmt.Println(err)
	fmt.Println(c, c.HTTP(), c.GRPC(), c.MQTT(), c.OSC())
	// Output:
	// cues: no such cue: "finale"
	// not_found 404 NotFound error error
}
