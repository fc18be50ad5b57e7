// Package testlevel tells a test how much of itself to run.
//
// The suite has two levels. `make test` runs every test in its smoke form:
// the same path as the full test (the same processes, kills, partitions and
// checks) on fewer rounds, so that the whole suite stays within minutes on
// two cores. `make soak` sets HOLO_SOAK=1 and runs the full forms: fifty
// kills instead of five, every power-cut point instead of a few, thousands
// of boards instead of dozens. A test picks its size with [Pick]:
//
//	kills := testlevel.Pick(5, 50)
//
// Tests that exist only as soaks (the long cluster soak) call [RequireSoak]
// first and are skipped by `make test`. A package whose tests mostly wait
// sets how many run at once with [Parallel].
package testlevel

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// Env is the environment variable that selects the soak level. Any value
// other than empty or "0" selects it.
const Env = "HOLO_SOAK"

// Soak reports whether the full (soak) forms of the tests are wanted.
func Soak() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0"
}

// Pick returns smoke in `make test` and soak in `make soak`.
func Pick[T any](smoke, soak T) T {
	if Soak() {
		return soak
	}
	return smoke
}

// RequireSoak skips a test that only makes sense at the soak level.
func RequireSoak(tb testing.TB) {
	tb.Helper()
	if !Soak() {
		tb.Skipf("a soak: runs in make soak (%s=1)", Env)
	}
}

// Parallel sets go test's -parallel to n unless the command line gave
// one; call it from TestMain after flag.Parse. A package whose tests
// spend their time waiting (on processes, browsers, simulated lines), not
// computing, would otherwise run only GOMAXPROCS of them at once and
// leave a two-core machine mostly idle.
func Parallel(n int) error {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	return flag.Set("test.parallel", strconv.Itoa(n))
}
