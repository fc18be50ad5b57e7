package cue

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// metrics are the engine's Prometheus metrics (docs/metrics.md).
type metrics struct {
	fires  *prometheus.CounterVec
	failed *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.CueFiresTotal,
			Help: "Cues fired (handed to the fleet), by cue list."}, []string{"list"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.CueFiresFailedTotal,
			Help: "Cues fired of which an action failed or a board refused or missed its change, by cue list."}, []string{"list"}),
	}
	if reg != nil {
		reg.MustRegister(m.fires, m.failed)
	}
	return m
}

// count records one fire of list's cue and how it went.
func (m *metrics) count(list string, f Fired) {
	m.fires.WithLabelValues(list).Inc()
	c := m.failed.WithLabelValues(list) // the series exists from the first fire on
	if f.Failed > 0 || len(f.Errors) > 0 {
		c.Inc()
	}
}
