// Package metrics turns what the gateway knows into Prometheus metrics:
// one collector per concern, each in its own file, all named under the
// holo_gateway_ prefix with the unit in the name and _total on counters.
//
//	Fleet     (fleet.go)    boards known and online by firmware, per-board
//	                        info, groups, reachability, last seen, events;
//	                        the fleet's event counters and watchers
//	Lines     (lines.go)    each RS485 line's bytes, frames, JSON lines, bad
//	                        CRC, garbage, timeouts, retries, polls, poll
//	                        cycle, busy time (utilisation), boards
//	Boards    (boards.go)   per-board uptime, free memory and Wi-Fi signal
//	                        (from the boards' system state events, or GET
//	                        /info when a board sends none), and the board's
//	                        own link counters (GET /link, polled slowly)
//	Commands  (commands.go) command latency by transport and kind, failures
//	BuildInfo (build.go)    the gateway's version
//
// Labels are bounded: line names, transports, command kinds (a fixed set),
// groups 1-31, firmware versions, and board ids, the one label that grows
// with the installation. docs/metrics.md lists every name, with the names
// the MQTT bridge and rollouts use.
//
// Collectors read their sources when scraped (Fleet, Lines, Boards) or
// count as things happen (Commands); only Boards runs a goroutine of its
// own (Run), which its caller owns.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric of the gateway.
const Namespace = "holo_gateway"

// Errors of the package.
var (
	// ErrRegister: a collector could not be registered (a name clash).
	ErrRegister = errors.New("metrics: registering a collector")
)

// Register registers every collector on reg.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("%w: %w", ErrRegister, err)
		}
	}
	return nil
}
