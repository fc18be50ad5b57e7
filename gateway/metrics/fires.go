package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metricname"
)

// FireBuckets are the buckets of fire skew and lateness, in seconds: a
// character at 115200 baud is 87 µs, a group frame about a millisecond,
// a LAN call a few; beyond 100 ms a fire is plainly late.
var FireBuckets = []float64{.00005, .0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .5, 2.5}

// Fires measures timed fires (fleet.Action.At), from fleet.FireReport:
//
//	holo_gateway_fire_skew_seconds              histogram: first to last board's change, per fire of 2+ boards
//	holo_gateway_fire_lateness_seconds{how}     histogram: each board's change after the moment asked (0 when early)
//	holo_gateway_fire_early_total{how}          boards that changed before the moment
//
// how is line, board or gateway (fleet.FireLine, FireBoard, FireGateway):
// what the gateway knows of each change (fleet.FireChange).
type Fires struct {
	skew  prometheus.Histogram
	late  *prometheus.HistogramVec
	early *prometheus.CounterVec
}

// FireHows are the ways a board is fired, the how label.
var FireHows = []string{fleet.FireLine, fleet.FireBoard, fleet.FireGateway}

// NewFires returns a Fires collector with every how at zero; feed it with
// (*fleet.Fleet).ObserveFire(f.Observe).
func NewFires() *Fires {
	f := &Fires{
		skew: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricname.GatewayFireSkewSeconds,
			Help: "Time from the first to the last board's change in a timed fire of two boards or more.", Buckets: FireBuckets}),
		late: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricname.GatewayFireLatenessSeconds,
			Help: "How long after the moment asked each board of a timed fire changed, by how it was fired (0 when early).", Buckets: FireBuckets},
			[]string{"how"}),
		early: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.GatewayFireEarlyTotal,
			Help: "Boards of timed fires that changed before the moment asked, by how they were fired."}, []string{"how"}),
	}
	for _, h := range FireHows {
		f.late.WithLabelValues(h)
		f.early.WithLabelValues(h)
	}
	return f
}

// Observe counts one timed fire.
func (f *Fires) Observe(r fleet.FireReport) {
	if len(r.Changes) >= 2 {
		f.skew.Observe(r.Skew().Seconds())
	}
	for _, c := range r.Changes {
		d := c.Lateness(r.At)
		if d < 0 {
			f.early.WithLabelValues(c.How).Inc()
			d = 0
		}
		f.late.WithLabelValues(c.How).Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (f *Fires) Describe(ch chan<- *prometheus.Desc) {
	f.skew.Describe(ch)
	f.late.Describe(ch)
	f.early.Describe(ch)
}

// Collect implements prometheus.Collector.
func (f *Fires) Collect(ch chan<- prometheus.Metric) {
	f.skew.Collect(ch)
	f.late.Collect(ch)
	f.early.Collect(ch)
}
