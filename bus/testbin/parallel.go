package testbin

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/holofleet/holofleet/bus/testlevel"
)

// RunParallel runs a test package's tests (TestMain calls it with its m)
// with up to n parallel tests at once unless -test.parallel says
// otherwise, and exits with their result. It is for packages whose tests
// spend their time waiting on processes (boards, gateways, brokers), not
// computing: go test's default of GOMAXPROCS would leave a two-core
// machine mostly idle and run them one pair after another.
func RunParallel(m *testing.M, n int) {
	flag.Parse()
	if err := testlevel.Parallel(n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
