package console_test

import (
	"testing"

	"github.com/holofleet/holofleet/bus/testbin"
)

// consoleRigs is how many of the browser tests (TestConsole,
// TestConsoleRollout, TestConsoleInstallation: each a gateway and a
// browser of its own) run at once.
const consoleRigs = 3

// TestMain runs the console's rigs all at once. They spend their time
// waiting (on the page, on boards over a simulated line), not computing,
// but -parallel defaults to GOMAXPROCS: on two cores the third waited
// for one of the others to end (414 s at load 39 with two at a time,
// 316 s at load 65 with three). A -parallel given on the command line
// wins.
func TestMain(m *testing.M) { testbin.RunParallel(m, consoleRigs) }
