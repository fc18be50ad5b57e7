package dmx

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

type metrics struct {
	packets   *prometheus.CounterVec
	merges    *prometheus.CounterVec
	syncs     *prometheus.CounterVec
	changes   *prometheus.CounterVec
	failed    *prometheus.CounterVec
	coalesced *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	lost      prometheus.Counter
	polls     prometheus.Counter
	latency   prometheus.Histogram
	lineTime  *prometheus.CounterVec
	share     prometheus.Gauge
}

// newMetrics makes the engine's metrics; share is the line share DMX
// sends may take (exported so that rules can compare the line time taken
// with it).
func newMetrics(reg prometheus.Registerer, share float64) *metrics {
	m := &metrics{
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXPacketsTotal,
			Help: "DMX data packets taken, by protocol (sacn, artnet), universe and source name."}, []string{"protocol", "universe", "source"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXMergesTotal,
			Help: "DMX frames merged from more than one source of the same priority, by universe."}, []string{"universe"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXSyncPacketsTotal,
			Help: "E1.31 synchronisation packets and ArtSyncs received, by protocol."}, []string{"protocol"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXChangesSentTotal,
			Help: "Changes sent to boards from DMX, by target kind (group, board) and transport (group, rs485, lan)."}, []string{"target", "transport"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXChangesFailedTotal,
			Help: "Changes from DMX a board refused or the fleet could not send, by target kind."}, []string{"target"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXCoalescedTotal,
			Help: "Looks replaced by a newer one before they were sent, by target kind."}, []string{"target"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXDroppedTotal,
			Help: "DMX input not acted on, by reason (malformed, unpatched, sequence, sources, denied, read_only, unknown_target)."}, []string{"reason"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.DMXSourcesLostTotal,
			Help: "DMX sources dropped after their loss time with no packet (a stream its source terminated is not counted)."}),
		polls: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.DMXArtPollTotal,
			Help: "ArtPolls answered."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: metricname.DMXLatencySeconds,
			Help:    "From a DMX packet in (or the sync packet's moment) to the target's last change sent (a group frame's end on its line).",
			Buckets: []float64{.001, .0025, .005, .01, .0227, .05, .1, .25, .5, 1}}),
	}
	m.lineTime = prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.DMXLineSecondsTotal,
		Help: "Time RS485 lines spent on DMX sends (what the line share is charged), by line."}, []string{"line"})
	m.share = prometheus.NewGauge(prometheus.GaugeOpts{Name: metricname.DMXLineShare,
		Help: "Share of each RS485 line's time DMX sends may take (--dmx-line-share, 0-1)."})
	m.share.Set(share)
	for _, r := range []string{"malformed", "unpatched", "sequence", "sources", "denied", "read_only", "unknown_target"} {
		m.dropped.WithLabelValues(r)
	}
	for _, p := range []string{"sacn", "artnet"} {
		m.syncs.WithLabelValues(p)
	}
	if reg != nil {
		reg.MustRegister(m.packets, m.merges, m.syncs, m.changes, m.failed, m.coalesced, m.dropped, m.lost, m.polls, m.latency, m.lineTime, m.share)
	}
	return m
}
