package api

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// metrics counts API requests (gRPC and REST alike, as REST reaches the
// gRPC server):
//
//	holo_gateway_api_requests_total{method, code}
//	holo_gateway_api_request_seconds{method}   (unary calls)
//
// Both exist from the start for every method of the fleet service (the
// counter with every gRPC code, the histogram for unary methods), at zero,
// so rates and alerts read 0 rather than nothing before the first call.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, svc grpc.ServiceDesc) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricname.GatewayAPIRequestsTotal,
			Help: "Fleet API requests by method and gRPC code (REST included).",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricname.GatewayAPIRequestSeconds,
			Help:    "Fleet API unary request latency by method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"method"}),
	}
	var err error
	m.requests, err = register(reg, m.requests)
	if err != nil {
		return nil, err
	}
	m.latency, err = register(reg, m.latency)
	if err != nil {
		return nil, err
	}
	for _, md := range svc.Methods {
		m.latency.WithLabelValues(md.MethodName)
		m.initCodes(md.MethodName)
	}
	for _, sd := range svc.Streams {
		m.initCodes(sd.StreamName)
	}
	return m, nil
}

// initCodes makes method's request counter for every gRPC code.
func (m *metrics) initCodes(method string) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		m.requests.WithLabelValues(method, c.String())
	}
}

// register adds c to reg, or returns the collector already registered
// under the same name (a second Server in one process shares it).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old, nil
			}
		}
		return c, fmt.Errorf("api: metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	name := path.Base(info.FullMethod)
	m.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
	m.requests.WithLabelValues(name, status.Code(err).String()).Inc()
	return resp, err
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	m.requests.WithLabelValues(path.Base(info.FullMethod), status.Code(err).String()).Inc()
	return err
}
