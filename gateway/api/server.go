// Package api serves the gateway's fleet API (holo.fleet.v1.FleetService)
// over gRPC and REST on one listener, with /metrics and the OpenAPI
// description beside it.
//
// Routing on the one listener:
//
//	HTTP/2 with Content-Type application/grpc*  -> the gRPC server (h2c
//	                                               without TLS, h2 with it)
//	GET /metrics                                -> Prometheus
//	GET /healthz, GET /readyz                   -> the probes (health.go)
//	GET /v1/openapi.json                        -> the OpenAPI 2.0 document
//	                                               (openapi.go)
//	GET /v1/events, Accept: text/event-stream   -> Server-Sent Events
//	POST /v1/artifacts (raw image body)         -> UploadArtifact (rollout.go)
//	anything else under /v1/                    -> grpc-gateway (REST)
//
// Every request first meets the front (front.go): body limits, and in
// demo mode or a lab the checks against cross-site requests. REST goes
// through grpc-gateway to the same gRPC server over an in-process pipe, so
// the gRPC interceptors (metrics, then the gate of guard.go: identity,
// authorisation, limits, audit, request log) see every request once.
// A path the document lists asked with a method it does not list is
// answered 405 with an Allow header naming the methods it has; an unknown
// path is 404. The gRPC side also serves grpc.health.v1.Health and server
// reflection (grpcurl list, grpc_health_probe), without a token.
// REST JSON uses the proto field names (snake_case) and shows unset fields;
// 64-bit numbers (an event's n) are JSON strings as protojson writes them.
// GET /v1/events without the SSE Accept header streams newline-delimited
// JSON objects {"result": event} (grpc-gateway's form); with it, each event
// is an SSE message whose id is the event's n, whose event name is its type
// and whose data is its JSON; Last-Event-ID resumes after that event.
//
// Errors: see Status for the gRPC codes. REST errors are JSON objects
// {"error": snake_case code, "message": text}. A board's own error (a call
// the board answered with status 400 or more) arrives over REST with the
// board's status and exactly its {"error","message"}; over gRPC as the
// code matching that status, message "code: message", and an ErrorInfo
// detail (domain BoardErrorDomain) holding the board's code and message.
// A request too large (for gRPC's 4 MiB message limit, for the transport
// to the board, for a firmware slot) is 413 too_large over REST, naming
// the limit; 429 is left to limits a retry may pass (restError).
package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rest"
	"github.com/holofleet/holofleet/gateway/rollout"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// Config is what a Server needs.
type Config struct {
	Fleet  fleet.Service
	Tokens *auth.Tokens
	// InsecureLab serves every call without a token.
	InsecureLab bool
	// Demo serves calls from loopback addresses without a token.
	Demo bool
	// TLSCert and TLSKey are PEM files; both set turns TLS on.
	TLSCert, TLSKey string
	// Registerer receives the API metrics and Gatherer feeds /metrics;
	// nil means Prometheus' default registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	Logger     *slog.Logger
	// Extra serves more HTTP handlers on the same listener, by
	// http.ServeMux pattern (the firmware artifact store, for example).
	// They do their own authentication.
	Extra map[string]http.Handler
	// ExtraOpenAPI are OpenAPI 2.0 fragments (paths, definitions, tags)
	// describing Extra's routes, merged into /v1/openapi.json (a path and
	// method or definition described twice fails New).
	ExtraOpenAPI [][]byte
	// Artifacts and Rollouts serve the firmware RPCs (and POST
	// /v1/artifacts); nil answers them UNIMPLEMENTED.
	Artifacts Artifacts
	Rollouts  rollout.Service
	// Cluster serves GetCluster and RemoveGateway on a gateway of a
	// cluster; nil answers them UNIMPLEMENTED.
	Cluster Cluster
	// Installation serves holo.fleet.v1.InstallationService (gRPC only;
	// its REST surface is gateway/installation's own handler under
	// /v1/installation); nil answers it UNIMPLEMENTED.
	Installation fleetv1.InstallationServiceServer
	// Cues serves holo.fleet.v1.CueService, over gRPC and REST under
	// /v1/cuelists (cues.go); nil: the cue routes answer UNIMPLEMENTED.
	Cues Cues
	// Ready are the inputs of /readyz and of the gRPC health status, by
	// name (the gateway's main fills them: store, drivers, mqtt). None
	// means ready whenever the server answers.
	Ready map[string]ReadyCheck
	// HealthInterval is how often the gRPC health status is refreshed
	// for Watch callers (default DefaultHealthInterval); Clock times it.
	HealthInterval time.Duration
	Clock          clock.Clock
	// Audit receives the audit records of every surface served here and
	// answers GET /v1/audit; nil keeps no records (ListAudit answers
	// UNIMPLEMENTED).
	Audit AuditLog
	// Limits bound bodies, timeouts, streams and rates (zero: defaults).
	Limits Limits
	// MetricsAuth makes /metrics need a viewer token.
	MetricsAuth bool
	// AllowHosts are Host names accepted besides localhost, 127.0.0.1
	// and [::1] from callers let in without a token (demo, lab).
	AllowHosts []string
	// Guard, when set, is the door to use (the gateway shares one with
	// its other surfaces); else New builds one from Tokens, InsecureLab,
	// Demo and Audit.
	Guard *auth.Guard
}

// Server is the fleet API on one listener. Serve runs it once.
type Server struct {
	cfg     Config
	log     *slog.Logger
	grpc    *grpc.Server
	pipe    *pipeListener
	conn    *grpc.ClientConn
	client  fleetv1.FleetServiceClient
	gw      *runtime.ServeMux
	mux     *http.ServeMux
	metrics *metrics
	health  *health.Server
	clk     clock.Clock
	openapi []byte  // the document at /v1/openapi.json
	routes  *routes // paths and their methods, for 405 answers
	guard   *auth.Guard
	limits  Limits
	cues    Cues // nil: no cue engine
}

// fixedPaths are served by the HTTP mux with GET beside the document's
// paths.
var fixedPaths = []string{"/metrics", "/v1/openapi.json", "/healthz", "/readyz"}

// jsonPb is the REST JSON form: proto names, unset fields shown, and
// compact (protojson varies its spacing on purpose; REST output does not).
var jsonPb = compactJSONPb{&runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
}}

type compactJSONPb struct{ *runtime.JSONPb }

func (c compactJSONPb) Marshal(v any) ([]byte, error) {
	b, err := c.JSONPb.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b, nil
	}
	return out.Bytes(), nil
}

// New builds the server; nothing listens until Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Fleet == nil {
		return nil, errors.New("api: Config.Fleet is required")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("api: TLS needs both a certificate and a key file")
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.DefaultRegisterer
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	cfg.HealthInterval = defaults.Positive(cfg.HealthInterval, DefaultHealthInterval)
	s := &Server{cfg: cfg, log: defaults.Log(cfg.Logger), pipe: newPipeListener(), clk: defaults.Clock(cfg.Clock)}
	var err error
	if s.openapi, err = OpenAPI(); err != nil {
		return nil, err
	}
	for _, extra := range cfg.ExtraOpenAPI {
		if s.openapi, err = mergeOpenAPI(s.openapi, extra); err != nil {
			return nil, err
		}
	}
	if s.routes, err = newRoutes(s.openapi, fixedPaths...); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, fleetv1.FleetService_ServiceDesc)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.limits = cfg.Limits.withDefaults()
	s.guard = cfg.Guard
	if s.guard == nil {
		s.guard = &auth.Guard{Tokens: cfg.Tokens, Insecure: cfg.InsecureLab, LoopbackFree: cfg.Demo}
		if cfg.Audit != nil {
			s.guard.Audit = cfg.Audit
		}
	}
	g := &gate{guard: s.guard, log: s.log, rate: auth.NewRateLimiter(s.limits.Rate, s.limits.Burst, nil),
		streams: auth.NewStreamLimiter(s.limits.StreamsPerToken, s.limits.Streams),
		public: auth.NewNamedStreamLimiter(s.limits.PublicStreamsPerSource, s.limits.PublicStreams,
			"public streams (health, reflection) from one source address", "public streams (health, reflection) on the gateway"),
		openReflection: cfg.Demo || cfg.InsecureLab, idle: s.limits.PublicStreamIdle, clk: s.clk}
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(int(s.limits.MaxBody)),
		grpc.ChainUnaryInterceptor(m.unary, g.unary),
		grpc.ChainStreamInterceptor(m.stream, g.stream),
	)
	fleetv1.RegisterFleetServiceServer(s.grpc, &service{fleet: cfg.Fleet, tokens: cfg.Tokens,
		arts: cfg.Artifacts, rollouts: cfg.Rollouts, audit: cfg.Audit, cluster: cfg.Cluster})

	if cfg.Installation != nil {
		fleetv1.RegisterInstallationServiceServer(s.grpc, cfg.Installation)
	}
	if cfg.Cues != nil {
		s.cues = cfg.Cues
		fleetv1.RegisterCueServiceServer(s.grpc, &cueService{cues: cfg.Cues})
	}

	s.health = health.NewServer()
	s.setHealth(false) // until the first readiness round
	healthpb.RegisterHealthServer(s.grpc, healthService{Server: s.health, s: s})
	reflection.Register(s.grpc)

	s.conn, err = grpc.NewClient("passthrough:///holo-gateway-pipe",
		grpc.WithContextDialer(s.pipe.dial),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("api: in-process client: %w", err)
	}
	s.client = fleetv1.NewFleetServiceClient(s.conn)

	s.gw = runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonPb),
		// Only Authorization (passed by grpc-gateway itself) reaches the
		// gRPC side; no client header may pose as our metadata.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(func(_ context.Context, r *http.Request) metadata.MD {
			return restMetadata(r)
		}),
		// ServeHTTP has set X-Request-Id on the reply already.
		runtime.WithOutgoingHeaderMatcher(func(key string) (string, bool) {
			if key == RequestIDKey {
				return "", false
			}
			return runtime.MetadataHeaderPrefix + key, true
		}),
		runtime.WithErrorHandler(func(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, status.Convert(err))
		}),
		runtime.WithRoutingErrorHandler(s.routingError),
	)
	if err := fleetv1.RegisterFleetServiceHandlerClient(context.Background(), s.gw, s.client); err != nil {
		return nil, fmt.Errorf("api: REST routes: %w", err)
	}
	if err := fleetv1.RegisterCueServiceHandlerClient(context.Background(), s.gw, fleetv1.NewCueServiceClient(s.conn)); err != nil {
		return nil, fmt.Errorf("api: REST routes: %w", err)
	}

	s.mux = http.NewServeMux()
	var metricsH http.Handler = promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})
	if cfg.MetricsAuth {
		metricsH = s.metricsAuth(metricsH)
	}
	s.mux.Handle("GET /metrics", metricsH)
	s.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.openapi)
	})
	s.mux.HandleFunc("GET /healthz", s.serveHealthz)
	s.mux.HandleFunc("GET /readyz", s.serveReadyz)
	s.mux.Handle("GET /v1/events", streamRoute(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			s.serveSSE(w, r)
			return
		}
		s.gw.ServeHTTP(w, r)
	})))
	s.mux.Handle("GET /v1/rollouts/{id}/events", streamRoute(s.gw))
	if s.cues != nil {
		s.mux.Handle("GET /v1/cuelists/events", streamRoute(http.HandlerFunc(s.serveCueEvents)))
	}
	s.mux.HandleFunc("POST /v1/artifacts", s.serveUpload)
	for pattern, h := range cfg.Extra {
		s.mux.Handle(pattern, h)
	}
	s.mux.Handle("/", s.gw)
	return s, nil
}

// Serve answers on ln until ctx ends, then stops: open streams (event
// watches) end, in-flight calls get a few seconds to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler:           s,
		Protocols:         &protos,
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		WriteTimeout:      s.limits.WriteTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.grpc.Serve(s.pipe) })
	wg.Go(func() { s.healthLoop(base) })
	errc := make(chan error, 1)
	wg.Go(func() {
		var err error
		if s.cfg.TLSCert != "" {
			hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			err = hs.ServeTLS(ln, s.cfg.TLSCert, s.cfg.TLSKey)
		} else {
			err = hs.Serve(ln)
		}
		errc <- err
	})
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancelBase()
	s.health.Shutdown() // watchers see NOT_SERVING before the end
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = hs.Shutdown(shutCtx)
	cancel()
	s.grpc.Stop()
	_ = s.conn.Close()
	s.pipe.Close()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("api: serve: %w", err)
	}
	return nil
}

// routingError answers a REST request grpc-gateway has no route for: a
// path the document lists asked with another method is 405 with Allow;
// the rest is grpc-gateway's answer (404, 400) through writeError.
func (s *Server) routingError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		if allow := s.routes.allow(r.URL.Path); allow != nil && !slices.Contains(allow, r.Method) {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeBody(w, http.StatusMethodNotAllowed, ErrorBody{Error: "method_not_allowed",
				Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))})
			return
		}
	}
	if code == http.StatusMethodNotAllowed {
		// grpc-gateway knows a route the document does not: still the
		// right status, without a list.
		writeBody(w, http.StatusMethodNotAllowed, ErrorBody{Error: "method_not_allowed",
			Message: fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)})
		return
	}
	runtime.DefaultRoutingErrorHandler(ctx, mux, m, w, r, code)
}

// writeError writes a REST error body for st.
func writeError(w http.ResponseWriter, st *status.Status) {
	code, body := restError(st)
	if code == http.StatusTooManyRequests {
		if d, ok := retryAfter(st); ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		}
	}
	writeBody(w, code, body)
}

// writeBody writes a REST error body with its status (a 401 with the
// bearer challenge).
func writeBody(w http.ResponseWriter, code int, body ErrorBody) {
	rest.Error(w, code, body.Error, body.Message)
}
