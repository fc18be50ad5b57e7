package rollout

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// Metrics names, as the rollouts dashboard reads them.
var (
	descBoards = prometheus.NewDesc(metricname.GatewayRolloutBoards, "Boards of a rollout by phase.", []string{"rollout", "phase"}, nil)
	descState  = prometheus.NewDesc(metricname.GatewayRolloutState, "1 for the rollout's current state.", []string{"rollout", "state"}, nil)
	descWave   = prometheus.NewDesc(metricname.GatewayRolloutWave, "The wave being updated (1-based; waves+1 when done).", []string{"rollout"}, nil)
	descWaves  = prometheus.NewDesc(metricname.GatewayRolloutWaves, "How many waves the rollout has.", []string{"rollout"}, nil)
	descSent   = prometheus.NewDesc(metricname.GatewayRolloutSentBytesTotal, "Image bytes sent to the rollout's boards by this process.", []string{"rollout"}, nil)
	descWindow = prometheus.NewDesc(metricname.GatewayRolloutWindowOpen,
		"1 while the rollout may update boards (its plan has no window, or the window is open); 0 while it waits for its window to open.", []string{"rollout"}, nil)
)

// Collector exports every rollout the engine knows to Prometheus
// (rollouts are few; finished ones keep their last figures).
func (e *Engine) Collector() prometheus.Collector { return collector{e} }

type collector struct{ e *Engine }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBoards, descState, descWave, descWaves, descSent, descWindow} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	now := e.o.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, r := range e.runs {
		counts := map[string]int{}
		for _, b := range r.boards {
			counts[b.Phase]++
		}
		for _, ph := range Phases {
			ch <- prometheus.MustNewConstMetric(descBoards, prometheus.GaugeValue, float64(counts[ph]), id, ph)
		}
		for _, s := range []string{StateRunning, StatePaused, StateAborted, StateReverting, StateReverted, StateDone} {
			v := 0.0
			if r.r.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, id, s)
		}
		ch <- prometheus.MustNewConstMetric(descWave, prometheus.GaugeValue, float64(r.r.Wave+1), id)
		ch <- prometheus.MustNewConstMetric(descWaves, prometheus.GaugeValue, float64(len(r.r.Waves)), id)
		ch <- prometheus.MustNewConstMetric(descSent, prometheus.CounterValue, float64(r.sent.Load()), id)
		open := 0.0
		if r.r.Plan.Window.Open(now) {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(descWindow, prometheus.GaugeValue, open, id)
	}
}
