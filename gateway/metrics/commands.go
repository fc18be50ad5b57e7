package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metricname"
)

// CommandBuckets are the latency buckets of commands, in seconds: a
// group frame takes about a millisecond on the wire, a call over RS485
// tens of milliseconds, a timed-out call with its retries seconds.
var CommandBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Commands counts the commands the fleet core runs for its callers (the
// API, MQTT, rollouts, and Boards' own polls), from fleet.Observation:
//
//	holo_gateway_command_duration_seconds{transport, kind}  histogram
//	holo_gateway_command_failures_total{transport, kind}     commands that got no answer
//
// transport is rs485, lan or group; kind is an action kind (leds,
// scene_apply, ...) or a call's method and resource ("GET /link").
type Commands struct {
	latency  *prometheus.HistogramVec
	failures *prometheus.CounterVec
}

// ActionKinds are the fleet's action kinds, as Observation.Kind names
// them.
var ActionKinds = []string{fleet.ActionSceneApply, fleet.ActionSceneEnd, fleet.ActionLEDs,
	fleet.ActionScreenShow, fleet.ActionScreenOff, fleet.ActionHolo}

// InitialCommands are the (transport, kind) pairs whose series exist from
// the start at zero, so dashboards and alerts read 0 rather than nothing
// before the first command: every action kind on each transport (group
// frames carry actions only), and the calls the gateway makes on its own
// to every board (GET /info, GET /link). Other call kinds (a method and
// one of the board API's resources) appear with their first command:
// made in advance they would be some 200 series of zeros per transport.
func InitialCommands() [][2]string {
	var out [][2]string
	for _, tr := range []string{fleet.ViaRS485, fleet.ViaLAN, fleet.ViaGroup} {
		for _, k := range ActionKinds {
			out = append(out, [2]string{tr, k})
		}
		if tr != fleet.ViaGroup {
			out = append(out, [2]string{tr, "GET /info"}, [2]string{tr, "GET /link"})
		}
	}
	return out
}

// NewCommands returns a Commands collector with the InitialCommands
// series at zero; feed it with (*fleet.Fleet).Observe(c.Observe).
func NewCommands() *Commands {
	c := newCommands()
	for _, tk := range InitialCommands() {
		c.latency.WithLabelValues(tk[0], tk[1])
		c.failures.WithLabelValues(tk[0], tk[1])
	}
	return c
}

func newCommands() *Commands {
	return &Commands{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricname.GatewayCommandDurationSeconds,
			Help:    "Time the gateway took to run a command on boards, by transport and kind.",
			Buckets: CommandBuckets,
		}, []string{"transport", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricname.GatewayCommandFailuresTotal,
			Help: "Commands that failed before a board answered (no reply, unreachable, bad reply), by transport and kind.",
		}, []string{"transport", "kind"}),
	}
}

// Observe counts one command.
func (c *Commands) Observe(o fleet.Observation) {
	c.latency.WithLabelValues(o.Transport, o.Kind).Observe(o.Duration.Seconds())
	if o.Err != nil {
		c.failures.WithLabelValues(o.Transport, o.Kind).Inc()
	}
}

// Describe implements prometheus.Collector.
func (c *Commands) Describe(ch chan<- *prometheus.Desc) {
	c.latency.Describe(ch)
	c.failures.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Commands) Collect(ch chan<- prometheus.Metric) {
	c.latency.Collect(ch)
	c.failures.Collect(ch)
}
