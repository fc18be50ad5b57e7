package mqtt

import (
	"errors"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// CommandResults are the values of holo_mqtt_commands_total's result
// label.
var CommandResults = []string{"ok", "error", "refused", "rate_limited"}

// metrics are the bridge's Prometheus series (holo_mqtt_*).
type metrics struct {
	published  prometheus.Counter
	happenings prometheus.Counter
	retries    prometheus.Counter
	commands   *prometheus.CounterVec
	latency    prometheus.Histogram
}

func newMetrics(b *Bridge, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.MQTTPublishedTotal,
			Help: "MQTT publications the broker acknowledged."}),
		happenings: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.MQTTHappeningsTotal,
			Help: "Board happenings queued for MQTT."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.MQTTRetriesTotal,
			Help: "Publications sent again after a lost connection."}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.MQTTCommandsTotal,
			Help: "MQTT commands by result (ok, error, refused, rate_limited)."}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricname.MQTTPublishLatencySeconds,
			Help:    "Time from queueing a message to the broker's ack.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	// Every result exists from the start, at zero.
	for _, r := range CommandResults {
		m.commands.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.published, m.happenings, m.retries, m.commands, m.latency,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricname.MQTTQueuedTotal,
			Help: "Messages put on the outbound spool."}, func() float64 { return float64(b.queue.Stats().Queued) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricname.MQTTDroppedTotal,
			Help: "Messages dropped because the spool was full."}, func() float64 { return float64(b.queue.Stats().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricname.MQTTSpilledTotal,
			Help: "Messages written to the on-disk spool."}, func() float64 { return float64(b.queue.Stats().Spilled) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.MQTTSpoolMessages,
			Help: "Messages waiting in the spool."}, func() float64 { return float64(b.queue.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.MQTTConnected,
			Help: "1 while the bridge is connected to the broker."}, func() float64 {
			if b.connected.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricname.MQTTConnectsTotal,
			Help: "Successful connections to the broker."}, func() float64 { return float64(b.st.connects.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

func sortedIDs[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
