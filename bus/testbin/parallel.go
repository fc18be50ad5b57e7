package testbin

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// RunParallel runs a test package's tests (TestMain calls it with its m)
// with up to n parallel tests at once unless -test.parallel says
// otherwise, and exits with their result. It is for packages whose tests
// spend their time waiting on processes (boards, gateways, brokers), not
// computing: go test's default of GOMAXPROCS would leave a two-core
// machine mostly idle and run them one pair after another.
func RunParallel(m *testing.M, n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
