package cluster

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// Metrics (every series of a gateway in a cluster also carries its
// gateway label, added by the gateway's main):
//
//	holo_gateway_cluster_partitioned                  1 while cut off from the engine
//	holo_gateway_cluster_gateway_up{peer}             1 per gateway heard alive, 0 dead
//	holo_gateway_cluster_gateway_boards{peer}         boards each gateway owns
//	holo_gateway_cluster_gateway_lines{peer}          RS485 lines each gateway masters
//	holo_gateway_cluster_gateway_heartbeat_age_seconds{peer}  since each other gateway was last heard
//	holo_gateway_cluster_boards                       boards of the installation
//	holo_gateway_cluster_standby_boards               boards reached here, owned elsewhere
//	holo_gateway_cluster_coordinator                  1 on the rollout coordinator
//	holo_gateway_cluster_reconnects_total             engine connections regained
//	holo_gateway_cluster_record_writes_total          board records written
//	holo_gateway_cluster_record_conflicts_total       writes refused (another gateway wrote first)
//	holo_gateway_cluster_takeovers_total              boards taken over from a dead gateway
//	holo_gateway_cluster_routed_total{direction}      requests routed out to / in from other gateways
//	holo_gateway_cluster_events_published_total       events this gateway put on the stream
//	holo_gateway_cluster_events_pending               events waiting for the engine
//	holo_gateway_cluster_events_lost_total            events dropped while waiting too long
type collector struct {
	c                                          *Cluster
	partitioned, up, boardsOf, boards, standby *prometheus.Desc
	coordinator, reconnects, writes, conflicts *prometheus.Desc
	takeovers, routed, published, pending      *prometheus.Desc
	lost, lines, heard                         *prometheus.Desc
}

// Collector returns the cluster's metrics.
func (c *Cluster) Collector() prometheus.Collector {
	d := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(n, help, labels, nil)
	}
	return &collector{c: c,
		partitioned: d(metricname.GatewayClusterPartitioned, "1 while this gateway is cut off from the cluster's engine (it serves its own boards only)."),
		up:          d(metricname.GatewayClusterGatewayUp, "1 for each gateway of the cluster heard alive, 0 for one taken for dead.", "peer"),
		boardsOf:    d(metricname.GatewayClusterGatewayBoards, "Boards each gateway of the cluster owns.", "peer"),
		boards:      d(metricname.GatewayClusterBoards, "Boards of the whole installation."),
		standby:     d(metricname.GatewayClusterStandbyBoards, "Boards this gateway reaches that another gateway owns."),
		coordinator: d(metricname.GatewayClusterCoordinator, "1 on the gateway that coordinates rollouts now."),
		reconnects:  d(metricname.GatewayClusterReconnectsTotal, "Connections to the engine regained."),
		writes:      d(metricname.GatewayClusterRecordWritesTotal, "Board records this gateway wrote."),
		conflicts:   d(metricname.GatewayClusterRecordConflictsTotal, "Board record writes refused because another gateway wrote first."),
		takeovers:   d(metricname.GatewayClusterTakeoversTotal, "Boards this gateway took over from a gateway that died or lost them."),
		routed:      d(metricname.GatewayClusterRoutedTotal, "Requests routed to other gateways (out) and from them (in).", "direction"),
		published:   d(metricname.GatewayClusterEventsPublishedTotal, "Events this gateway put on the cluster's stream."),
		pending:     d(metricname.GatewayClusterEventsPending, "Events waiting for the engine."),
		lost:        d(metricname.GatewayClusterEventsLostTotal, "Events dropped after waiting too long for the engine."),
		lines:       d(metricname.GatewayClusterGatewayLines, "RS485 lines each gateway of the cluster masters.", "peer"),
		heard:       d(metricname.GatewayClusterGatewayHeartbeatAgeSeconds, "Time since this gateway last received each other gateway's heartbeat.", "peer"),
	}
}

func (m *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.partitioned, m.up, m.boardsOf, m.boards, m.standby, m.coordinator, m.reconnects,
		m.writes, m.conflicts, m.takeovers, m.routed, m.published, m.pending, m.lost, m.lines, m.heard} {
		ch <- d
	}
}

func (m *collector) Collect(ch chan<- prometheus.Metric) {
	st := m.c.Status()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	cnt := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	g(m.partitioned, b2f(st.Partitioned))
	coord := false
	for _, gw := range st.Gateways {
		g(m.up, b2f(gw.Alive), gw.Name)
		g(m.boardsOf, float64(gw.Boards), gw.Name)
		g(m.lines, float64(gw.Lines), gw.Name)
		if gw.Name != st.Name && gw.Heard > 0 {
			g(m.heard, gw.Heard.Seconds(), gw.Name)
		}
		if gw.Name == st.Name {
			coord = gw.Coordinator
		}
	}
	g(m.boards, float64(st.Boards))
	g(m.standby, float64(st.Standby))
	g(m.coordinator, b2f(coord || m.c.isCoordinator()))
	cnt(m.reconnects, st.Reconnects)
	cnt(m.writes, st.RecordWrites)
	cnt(m.conflicts, st.WriteConflicts)
	cnt(m.takeovers, st.Takeovers)
	cnt(m.routed, st.RoutedOut, "out")
	cnt(m.routed, st.RoutedIn, "in")
	cnt(m.published, st.EventsPublished)
	g(m.pending, float64(st.EventsPending))
	cnt(m.lost, m.c.ev.lostEvents())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
