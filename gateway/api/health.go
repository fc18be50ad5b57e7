package api

// Probes: is the gateway alive, is it ready to serve.
//
//	GET /healthz   200 {"status":"ok"} while the process answers HTTP
//	GET /readyz    200 {"status":"ready","checks":{"store":"ok",...}} when
//	               every ReadyCheck passes, else 503 {"status":"not_ready",
//	               "error":"unavailable","message":"not ready: mqtt: ...",
//	               "checks":{...}}
//
// gRPC clients get the same answer from the standard grpc.health.v1.Health
// service: service "" and "holo.fleet.v1.FleetService" are SERVING when
// /readyz would answer 200, NOT_SERVING otherwise (and once the server
// stops). Check runs the checks; Watch follows a refresh every
// HealthInterval. The probes and server reflection need no token.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/bus/clock"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// ReadyCheck is one input of the gateway's readiness (the store, the
// drivers, the MQTT broker connection): Ready returns nil when that part
// is ready, else an error saying why not. It must answer quickly; it runs
// on every /readyz and health check with ReadyTimeout.
type ReadyCheck interface {
	Ready(ctx context.Context) error
}

// ReadyFunc is a function as a ReadyCheck.
type ReadyFunc func(ctx context.Context) error

// Ready calls f.
func (f ReadyFunc) Ready(ctx context.Context) error { return f(ctx) }

// Probe defaults.
const (
	// ReadyTimeout bounds one round of readiness checks.
	ReadyTimeout = 2 * time.Second
	// DefaultHealthInterval is how often the gRPC health status is
	// refreshed for Watch callers.
	DefaultHealthInterval = 5 * time.Second
)

// ErrNotReady is the error of a readiness round that found a part not
// ready; the message names each part and why.
var ErrNotReady = errors.New("not ready")

// Probe is the JSON body of /healthz and /readyz.
type Probe struct {
	Status  string            `json:"status"`
	Error   string            `json:"error,omitempty"`
	Message string            `json:"message,omitempty"`
	Checks  map[string]string `json:"checks,omitempty"`
}

// ready runs every check and returns the probe body and an ErrNotReady
// error naming the parts that are not ready.
func (s *Server) ready(ctx context.Context) (Probe, error) {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	p := Probe{Status: "ready", Checks: map[string]string{}}
	var bad []string
	names := make([]string, 0, len(s.cfg.Ready))
	for name := range s.cfg.Ready {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := s.cfg.Ready[name].Ready(ctx); err != nil {
			p.Checks[name] = err.Error()
			bad = append(bad, name+": "+err.Error())
			continue
		}
		p.Checks[name] = "ok"
	}
	if len(bad) == 0 {
		return p, nil
	}
	err := fmt.Errorf("%w: %s", ErrNotReady, strings.Join(bad, "; "))
	p.Status, p.Error, p.Message = "not_ready", codeName(codes.Unavailable), err.Error()
	return p, err
}

func writeProbe(w http.ResponseWriter, code int, p Probe) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b, _ := jsonMarshal(p)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, Probe{Status: "ok"})
}

func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	p, err := s.ready(r.Context())
	s.setHealth(err == nil)
	if err != nil {
		writeProbe(w, http.StatusServiceUnavailable, p)
		return
	}
	writeProbe(w, http.StatusOK, p)
}

// healthNames are the services the gRPC health status is set for.
var healthNames = []string{"", fleetv1.FleetService_ServiceDesc.ServiceName}

func (s *Server) setHealth(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, n := range healthNames {
		s.health.SetServingStatus(n, st)
	}
}

// refreshHealth sets the gRPC health status from a readiness round.
func (s *Server) refreshHealth(ctx context.Context) {
	_, err := s.ready(ctx)
	s.setHealth(err == nil)
}

// healthLoop refreshes the health status every HealthInterval until ctx
// ends, for Watch callers.
func (s *Server) healthLoop(ctx context.Context) {
	clock.Every(ctx, s.clk, s.cfg.HealthInterval, func() { s.refreshHealth(ctx) })
}

// healthService is grpc-go's health server whose Check runs the readiness
// checks first, so a probe always sees the state of now.
type healthService struct {
	*health.Server
	s *Server
}

func (h healthService) Check(ctx context.Context, r *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if slices.Contains(healthNames, r.GetService()) {
		h.s.refreshHealth(ctx)
	}
	resp, err := h.Server.Check(ctx, r)
	if status.Code(err) == codes.NotFound {
		return nil, status.Errorf(codes.NotFound, "unknown service %q (the gateway reports %q and %q)", r.GetService(), healthNames[0], healthNames[1])
	}
	return resp, err
}
