package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// NewBuildInfo returns a collector of one constant series,
// holo_gateway_build_info{version, goversion} 1, which dashboards use to
// list the gateways Prometheus scrapes.
func NewBuildInfo(version string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        metricname.GatewayBuildInfo,
		Help:        "The gateway's version and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
