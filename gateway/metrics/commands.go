package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/fleet"
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

// NewCommands returns an empty Commands collector; feed it with
// (*fleet.Fleet).Observe(c.Observe).
func NewCommands() *Commands {
	return &Commands{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    name("command_duration_seconds"),
			Help:    "Time the gateway took to run a command on boards, by transport and kind.",
			Buckets: CommandBuckets,
		}, []string{"transport", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: name("command_failures_total"),
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
