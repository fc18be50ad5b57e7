package osc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

type metrics struct {
	messages    *prometheus.CounterVec
	subscribers prometheus.Gauge
	dropped     prometheus.Counter
	feedback    prometheus.Counter
	timed       prometheus.Gauge
	refused     *prometheus.CounterVec
	replies     *prometheus.CounterVec
	replyBytes  prometheus.Counter
	limited     *prometheus.CounterVec
	conns       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.OSCMessagesTotal,
			Help: "OSC messages received, by address class and outcome (ok, error, denied)."}, []string{"class", "outcome"}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricname.OSCSubscribers,
			Help: "OSC clients subscribed to feedback now."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.OSCSubscribersDroppedTotal,
			Help: "OSC subscribers dropped for not keeping up with their feedback."}),
		feedback: prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.OSCFeedbackTotal,
			Help: "OSC feedback messages queued for subscribers."}),
		timed: prometheus.NewGauge(prometheus.GaugeOpts{Name: metricname.OSCTimedBundles,
			Help: "OSC timed bundles waiting for their moment."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.OSCBundlesRefusedTotal,
			Help: "OSC timed bundles refused before anything was scheduled, by reason (horizon: timed beyond the fire horizon; capacity: too many waiting)."}, []string{"reason"}),
	}
	m.replies = prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.OSCRepliesTotal,
		Help: "OSC replies, by outcome: sent, or dropped for the UDP reply budgets (size: more than the packet answered; rate: the host's replies per second)."}, []string{"outcome"})
	m.replyBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: metricname.OSCReplyBytesTotal,
		Help: "Bytes of OSC replies sent."})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricname.OSCLimitedTotal,
		Help: "OSC clients held to a limit: TCP connections refused (connections) or closed idle (idle), subscriptions refused (subscribers)."}, []string{"limit"})
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: metricname.OSCTCPConnections, Help: "OSC TCP connections open now."})
	for _, l := range []string{"connections", "idle", "subscribers"} {
		m.limited.WithLabelValues(l)
	}
	for _, o := range []string{"sent", "size", "rate"} {
		m.replies.WithLabelValues(o)
	}
	for _, r := range []string{"horizon", "capacity"} {
		m.refused.WithLabelValues(r)
	}
	for _, c := range Classes {
		for _, o := range []string{StatusOK, StatusError, StatusDenied} {
			m.messages.WithLabelValues(c, o)
		}
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.subscribers, m.dropped, m.feedback, m.timed, m.refused, m.replies, m.replyBytes, m.limited, m.conns)
	}
	return m
}

func (m *metrics) count(class, outcome string) { m.messages.WithLabelValues(class, outcome).Inc() }
