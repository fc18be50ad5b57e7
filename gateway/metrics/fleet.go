package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metricname"
)

// FleetSource is what the Fleet collector reads when scraped;
// *fleet.Fleet is one.
type FleetSource interface {
	Stats() fleet.Stats
	Boards(fleet.Filter) []fleet.BoardView
}

// NoGroup is the group label of holo_gateway_board_group for a board in no
// group.
const NoGroup = "none"

// Fleet collects the boards the fleet core knows and its event counters:
//
//	holo_gateway_boards{firmware, online}                  boards by version and state
//	holo_gateway_board_info{board, hostname, firmware, line, address}  1
//	holo_gateway_board_online{board}                        1 reachable, 0 not
//	holo_gateway_board_reachable{board, transport}          1 per transport reaching it now
//	holo_gateway_board_group{board, group}                  1 per group membership; group "none"
//	                                                        for a board in no group
//	holo_gateway_board_last_seen_timestamp_seconds{board}
//	holo_gateway_board_events_total{board}                  events put on the stream
//	holo_gateway_events_received_total                      driver reports, repeats included
//	holo_gateway_events_published_total                     events put on the fleet stream
//	holo_gateway_events_duplicate_total                     repeats dropped
//	holo_gateway_events_dropped_total                       lost by watchers that fell behind
//	holo_gateway_events_replay_missed_total                 asked for after leaving the buffer
//	holo_gateway_events_unattributed_total                  from a place with no known board
//	holo_gateway_event_watchers                             watchers attached
//	holo_gateway_registry_write_errors_total                failed registry writes
type Fleet struct {
	src FleetSource

	boards, info, online, reachable, group, lastSeen, boardEvents *prometheus.Desc
	received, published, duplicate, dropped, replayMissed         *prometheus.Desc
	unattributed, watchers, persistErrors                         *prometheus.Desc
}

// NewFleet returns the Fleet collector of src.
func NewFleet(src FleetSource) *Fleet {
	d := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(n, help, labels, nil)
	}
	return &Fleet{src: src,
		boards:        d(metricname.GatewayBoards, "Boards the gateway knows, by firmware version and whether they are reachable now.", "firmware", "online"),
		info:          d(metricname.GatewayBoardInfo, "One series per known board carrying its hostname, firmware, line and bus address; always 1.", "board", "hostname", "firmware", "line", "address"),
		online:        d(metricname.GatewayBoardOnline, "1 when some transport reaches the board now, else 0.", "board"),
		reachable:     d(metricname.GatewayBoardReachable, "1 for each transport (rs485:<line>, lan) that reaches the board now.", "board", "transport"),
		group:         d(metricname.GatewayBoardGroup, "1 for each group (1-31) the board belongs to; group \"none\" for a board in none.", "board", "group"),
		lastSeen:      d(metricname.GatewayBoardLastSeenTimestampSeconds, "When the board last answered, in seconds since the Unix epoch.", "board"),
		boardEvents:   d(metricname.GatewayBoardEventsTotal, "Events of the board put on the fleet stream.", "board"),
		received:      d(metricname.GatewayEventsReceivedTotal, "Reports the drivers made (happenings, state changes, restarts, losses), repeats included."),
		published:     d(metricname.GatewayEventsPublishedTotal, "Events put on the fleet event stream."),
		duplicate:     d(metricname.GatewayEventsDuplicateTotal, "Reports dropped as repeats of what was already on the stream."),
		dropped:       d(metricname.GatewayEventsDroppedTotal, "Events lost by watchers that fell behind."),
		replayMissed:  d(metricname.GatewayEventsReplayMissedTotal, "Events a resuming watcher asked for after they had left the replay buffer."),
		unattributed:  d(metricname.GatewayEventsUnattributedTotal, "Reports from a place where no board is known yet."),
		watchers:      d(metricname.GatewayEventWatchers, "Event watchers attached now (API streams, MQTT bridge, metrics)."),
		persistErrors: d(metricname.GatewayRegistryWriteErrorsTotal, "Failed writes of board records to the store."),
	}
}

// Describe implements prometheus.Collector.
func (c *Fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.boards, c.info, c.online, c.reachable, c.group, c.lastSeen, c.boardEvents,
		c.received, c.published, c.duplicate, c.dropped, c.replayMissed, c.unattributed, c.watchers, c.persistErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Fleet) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	views := c.src.Boards(fleet.Filter{})
	type key struct {
		firmware string
		online   bool
	}
	counts := map[key]int{}
	for _, v := range views {
		counts[key{v.Firmware, v.Online}]++
		online := 0.0
		if v.Online {
			online = 1
		}
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, v.ID, v.Hostname, v.Firmware, v.Line, strconv.Itoa(v.Address))
		ch <- prometheus.MustNewConstMetric(c.online, prometheus.GaugeValue, online, v.ID)
		for _, t := range v.Transports {
			ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, 1, v.ID, t)
		}
		for _, g := range v.Groups {
			ch <- prometheus.MustNewConstMetric(c.group, prometheus.GaugeValue, 1, v.ID, strconv.Itoa(g))
		}
		if len(v.Groups) == 0 {
			// Dashboards list boards by group: one in no group is listed too.
			ch <- prometheus.MustNewConstMetric(c.group, prometheus.GaugeValue, 1, v.ID, NoGroup)
		}
		if !v.LastSeen.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lastSeen, prometheus.GaugeValue, float64(v.LastSeen.UnixMilli())/1e3, v.ID)
		}
		ch <- prometheus.MustNewConstMetric(c.boardEvents, prometheus.CounterValue, float64(st.PerBoard[v.ID]), v.ID)
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.boards, prometheus.GaugeValue, float64(n), k.firmware, strconv.FormatBool(k.online))
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(c.received, st.EventsIn)
	counter(c.published, st.Events)
	counter(c.duplicate, st.Duplicates)
	counter(c.dropped, st.Dropped)
	counter(c.replayMissed, st.ReplayMissed)
	counter(c.unattributed, st.Unattributed)
	counter(c.persistErrors, st.PersistErrors)
	ch <- prometheus.MustNewConstMetric(c.watchers, prometheus.GaugeValue, float64(st.Watchers))
}
