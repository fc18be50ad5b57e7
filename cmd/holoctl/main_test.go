package main

import (
	"os"
	"testing"
)

// asHoloctl, set to 1 in its environment, makes this test binary run
// holoctl's main instead of the tests: tests that start holoctl as a
// process of its own (TestBinary) start it so, rather than building a
// second binary.
const asHoloctl = "HOLOCTL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asHoloctl) == "1" {
		main() // exits
	}
	os.Exit(m.Run())
}
