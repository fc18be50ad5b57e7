package defaults_test

import (
	"fmt"
	"time"

	"github.com/holofleet/holofleet/gateway/defaults"
)

// Options of a component: zero (or less) takes the default, and a
// negative retry count means none.
func Example() {
	type options struct {
		Timeout time.Duration
		Queue   int
		Retries int
	}
	o := options{Queue: 5, Retries: -1}
	o.Timeout = defaults.Positive(o.Timeout, 2*time.Second)
	o.Queue = defaults.Positive(o.Queue, 64)
	o.Retries = defaults.Limit(o.Retries, 3)
	fmt.Println(o.Timeout, o.Queue, o.Retries)
	// Output: 2s 5 0
}
