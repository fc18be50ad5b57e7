package dmx

import "github.com/prometheus/client_golang/prometheus"

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
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_packets_total",
			Help: "DMX data packets taken, by protocol (sacn, artnet), universe and source name."}, []string{"protocol", "universe", "source"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_merges_total",
			Help: "DMX frames merged from more than one source of the same priority, by universe."}, []string{"universe"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_sync_packets_total",
			Help: "E1.31 synchronisation packets and ArtSyncs received, by protocol."}, []string{"protocol"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_changes_sent_total",
			Help: "Changes sent to boards from DMX, by target kind (group, board) and transport (group, rs485, lan)."}, []string{"target", "transport"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_changes_failed_total",
			Help: "Changes from DMX a board refused or the fleet could not send, by target kind."}, []string{"target"}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_coalesced_total",
			Help: "Looks replaced by a newer one before they were sent, by target kind."}, []string{"target"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_dropped_total",
			Help: "DMX input not acted on, by reason (malformed, unpatched, sequence, sources, denied, read_only, unknown_target)."}, []string{"reason"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "holo_dmx_sources_lost_total",
			Help: "DMX sources dropped after their loss time with no packet (a stream its source terminated is not counted)."}),
		polls: prometheus.NewCounter(prometheus.CounterOpts{Name: "holo_dmx_artpoll_total",
			Help: "ArtPolls answered."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "holo_dmx_latency_seconds",
			Help:    "From a DMX packet in (or the sync packet's moment) to the target's last change sent (a group frame's end on its line).",
			Buckets: []float64{.001, .0025, .005, .01, .0227, .05, .1, .25, .5, 1}}),
	}
	m.lineTime = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "holo_dmx_line_seconds_total",
		Help: "Time RS485 lines spent on DMX sends (what the line share is charged), by line."}, []string{"line"})
	m.share = prometheus.NewGauge(prometheus.GaugeOpts{Name: "holo_dmx_line_share",
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
