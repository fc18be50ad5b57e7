package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/metricname"
)

// Lines collects the counters of each RS485 line the gateway masters,
// labelled by line name:
//
//	holo_gateway_line_transmit_bytes_total      bytes the gateway sent
//	holo_gateway_line_receive_bytes_total       bytes it received
//	holo_gateway_line_transmit_frames_total     native frames sent
//	holo_gateway_line_receive_frames_total      native frames received
//	holo_gateway_line_transmit_json_lines_total JSON lines sent
//	holo_gateway_line_receive_json_lines_total  JSON lines received
//	holo_gateway_line_bad_crc_total             frames failing their CRC
//	holo_gateway_line_garbage_total             bytes runs and replies that parse as nothing
//	holo_gateway_line_timeouts_total            requests no reply came for in time
//	holo_gateway_line_retries_total             requests sent again
//	holo_gateway_line_polls_total               poll requests
//	holo_gateway_line_poll_cycle_seconds        the last full round over every board
//	holo_gateway_line_busy_seconds_total        time the line carried the gateway's bytes;
//	                                            its rate is the line's utilisation (0-1)
//	holo_gateway_line_boards                    boards found on the line
//
// The boards' own view of the link (overruns of their receive buffer
// among others) is in holo_gateway_board_link_* (Boards).
type Lines struct {
	src func() map[string]fleet.LineStats
	cs  []lineMetric
}

type lineMetric struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
	get  func(fleet.LineStats) float64
}

// NewLines returns the Lines collector of the line counters src returns
// by driver name ("rs485:line0"); (*fleet.Fleet).Stats().Lines is one.
func NewLines(src func() map[string]fleet.LineStats) *Lines {
	m := func(n, help string, typ prometheus.ValueType, get func(fleet.LineStats) float64) lineMetric {
		return lineMetric{prometheus.NewDesc(n, help, []string{"line"}, nil), typ, get}
	}
	c, g := prometheus.CounterValue, prometheus.GaugeValue
	return &Lines{src: src, cs: []lineMetric{
		m(metricname.GatewayLineTransmitBytesTotal, "Bytes the gateway sent on the line.", c, func(s fleet.LineStats) float64 { return float64(s.BytesOut) }),
		m(metricname.GatewayLineReceiveBytesTotal, "Bytes the gateway received on the line.", c, func(s fleet.LineStats) float64 { return float64(s.BytesIn) }),
		m(metricname.GatewayLineTransmitFramesTotal, "Native frames the gateway sent.", c, func(s fleet.LineStats) float64 { return float64(s.FramesOut) }),
		m(metricname.GatewayLineReceiveFramesTotal, "Native frames the gateway received.", c, func(s fleet.LineStats) float64 { return float64(s.FramesIn) }),
		m(metricname.GatewayLineTransmitJSONLinesTotal, "JSON lines the gateway sent.", c, func(s fleet.LineStats) float64 { return float64(s.LinesOut) }),
		m(metricname.GatewayLineReceiveJSONLinesTotal, "JSON lines the gateway received.", c, func(s fleet.LineStats) float64 { return float64(s.LinesIn) }),
		m(metricname.GatewayLineBadCRCTotal, "Received frames whose CRC did not match.", c, func(s fleet.LineStats) float64 { return float64(s.BadCRC) }),
		m(metricname.GatewayLineGarbageTotal, "Received byte runs and replies that were neither a valid frame nor a JSON line.", c, func(s fleet.LineStats) float64 { return float64(s.Garbage) }),
		m(metricname.GatewayLineTimeoutsTotal, "Requests no reply came for in time.", c, func(s fleet.LineStats) float64 { return float64(s.Timeouts) }),
		m(metricname.GatewayLineRetriesTotal, "Requests sent again after a timeout or a bad reply.", c, func(s fleet.LineStats) float64 { return float64(s.Retries) }),
		m(metricname.GatewayLinePollsTotal, "Poll requests sent to the boards.", c, func(s fleet.LineStats) float64 { return float64(s.Polls) }),
		m(metricname.GatewayLinePollCycleSeconds, "Duration of the last full poll round over every known board.", g, func(s fleet.LineStats) float64 { return s.PollCycle.Seconds() }),
		m(metricname.GatewayLineBusySecondsTotal, "Time the line carried the gateway's bytes; its rate is the line's utilisation.", c, func(s fleet.LineStats) float64 { return s.Busy.Seconds() }),
		m(metricname.GatewayLineBoards, "Boards found on the line.", g, func(s fleet.LineStats) float64 { return float64(s.Boards) }),
	}}
}

// Describe implements prometheus.Collector.
func (c *Lines) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.cs {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector.
func (c *Lines) Collect(ch chan<- prometheus.Metric) {
	for driver, st := range c.src() {
		line := fleet.LineName(driver)
		for _, m := range c.cs {
			ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.get(st), line)
		}
	}
}
