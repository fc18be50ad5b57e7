package api

// The HTTP front: what every request meets on the listener before it is
// routed, gRPC included.
//
//   - In demo mode (for requests without a token) and with --insecure-lab
//     (for every request), the gateway lets callers in without a token, so
//     it refuses what a web page could send on a user's behalf: a Host
//     other than localhost, 127.0.0.1 or [::1] (DNS rebinding; more names
//     with AllowHosts), an Origin other than the Host's own, and changing
//     requests whose Content-Type a page may send cross-site without a
//     CORS preflight (text/plain, forms, none): they must be
//     application/json (or gRPC; the raw image of POST /v1/artifacts may
//     be application/octet-stream). No answer ever carries
//     Access-Control-Allow-Origin. Reads of non-API paths (/metrics,
//     /firmware/) are served as usual.
//   - Request bodies are bounded (Limits.MaxBody) before they are read: a
//     larger Content-Length is answered 413 at once; a chunked body is
//     read up to the limit, then 413. POST /v1/artifacts streams large
//     images and is let through only once the caller is known to be
//     allowed to upload (serveUpload).
//   - The HTTP server's timeouts (Limits) cut slow headers, slow bodies
//     and stuck writes; streams (events, rollout events, gRPC streams, an
//     upload) lift their own deadlines once admitted.

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/defaults"
)

// Limits bound what clients may send and hold. Zero fields take the
// defaults (DefaultLimits); a negative value turns that limit off.
type Limits struct {
	// MaxBody bounds a REST request body and a gRPC message, in bytes.
	MaxBody int64
	// The HTTP server's timeouts (net/http's meanings). WriteTimeout
	// bounds a call's whole answer; streams lift it once admitted.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// StreamsPerToken and Streams bound the open watch streams (events
	// and rollout events, every transport) of one token and in total.
	StreamsPerToken, Streams int
	// Rate is the changing calls a token may make per second on
	// average; Burst how many at once.
	Rate  float64
	Burst int
	// PublicStreamsPerSource and PublicStreams bound the open streams of
	// the services anyone may call (gRPC health Watch; reflection in demo
	// mode and a lab), per source address and in all. They are a pool of
	// their own: however full, it never takes a slot of the
	// authenticated streams above.
	PublicStreamsPerSource, PublicStreams int
	// PublicStreamIdle ends a health Watch or reflection stream (with or
	// without a token) that has neither sent nor received a message for
	// this long (DeadlineExceeded).
	PublicStreamIdle time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxBody           = 1 << 20
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 2 * time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultStreamsPerToken   = 32
	DefaultStreams           = 1024
	DefaultRate              = 20
	DefaultBurst             = 40
	// Public streams: a few per source (a probe, grpcurl), a pool that a
	// crowd of sources fills long before the memory of the gateway.
	DefaultPublicStreamsPerSource = 8
	DefaultPublicStreams          = 256
	DefaultPublicStreamIdle       = 2 * time.Minute
)

// DefaultLimits returns the defaults.
func DefaultLimits() Limits {
	return Limits{MaxBody: DefaultMaxBody, ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout,
		WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout, StreamsPerToken: DefaultStreamsPerToken,
		Streams: DefaultStreams, Rate: DefaultRate, Burst: DefaultBurst,
		PublicStreamsPerSource: DefaultPublicStreamsPerSource, PublicStreams: DefaultPublicStreams,
		PublicStreamIdle: DefaultPublicStreamIdle}
}

// withDefaults fills zero fields and turns negative ones into "none" (0
// for net/http and the limiters; gRPC's own ceiling for MaxBody).
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	l.ReadHeaderTimeout = defaults.Limit(l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	l.ReadTimeout = defaults.Limit(l.ReadTimeout, d.ReadTimeout)
	l.WriteTimeout = defaults.Limit(l.WriteTimeout, d.WriteTimeout)
	l.IdleTimeout = defaults.Limit(l.IdleTimeout, d.IdleTimeout)
	switch {
	case l.MaxBody == 0:
		l.MaxBody = d.MaxBody
	case l.MaxBody < 0:
		l.MaxBody = 1<<31 - 1 // gRPC's own ceiling
	}
	l.StreamsPerToken = defaults.Limit(l.StreamsPerToken, d.StreamsPerToken)
	l.Streams = defaults.Limit(l.Streams, d.Streams)
	l.PublicStreamsPerSource = defaults.Limit(l.PublicStreamsPerSource, d.PublicStreamsPerSource)
	l.PublicStreams = defaults.Limit(l.PublicStreams, d.PublicStreams)
	l.PublicStreamIdle = defaults.Limit(l.PublicStreamIdle, d.PublicStreamIdle)
	l.Rate = defaults.Limit(l.Rate, d.Rate) // none: no limit (auth.NewRateLimiter)
	l.Burst = defaults.Positive(l.Burst, d.Burst)
	return l
}

// ServeHTTP checks every request at the door (front), then routes gRPC to
// the gRPC server and the rest to the HTTP mux, with a request id
// (requestlog.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	isGRPC := r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
	if !isGRPC {
		restRequestID(w, r)
		r = r.WithContext(auth.WithRequestID(r.Context(), r.Header.Get(RequestIDHeader)))
	}
	if !s.front(w, r, isGRPC) {
		return
	}
	if isGRPC {
		if streamMethods[r.URL.Path] {
			liftDeadlines(w, true)
		}
		s.grpc.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// front runs the door's checks; false means it answered the request.
func (s *Server) front(w http.ResponseWriter, r *http.Request, isGRPC bool) bool {
	if !s.credentialCheck(w, r, isGRPC) {
		return false
	}
	if code, err := s.siteCheck(r, isGRPC); err != nil {
		a := auth.Attributes{Surface: auth.SurfaceREST, Client: r.RemoteAddr, Agent: r.UserAgent(),
			Operation: r.Method + " " + r.URL.Path, RequestID: r.Header.Get(RequestIDHeader)}
		if isGRPC {
			a.Surface, a.Operation = auth.SurfaceGRPC, r.URL.Path
		}
		s.guard.Record(a, false, code.String(), err.Error())
		if isGRPC {
			grpcRefuse(w, status.New(code, err.Error()))
			return false
		}
		httpCode := httpStatus(code)
		if code == codes.InvalidArgument {
			httpCode = http.StatusUnsupportedMediaType
		}
		writeBody(w, httpCode, ErrorBody{Error: codeName(code), Message: err.Error()})
		return false
	}
	if isGRPC || streamedUpload(r) {
		return true // gRPC messages are bounded by the gRPC server; uploads stream
	}
	return s.limitBody(w, r)
}

// streamedUpload reports whether r is a raw upload its handler streams
// and bounds itself: a firmware image (POST /v1/artifacts) or an
// installation's content file (POST /v1/installation/content).
func streamedUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && (r.URL.Path == "/v1/artifacts" || r.URL.Path == "/v1/installation/content")
}

// credentialCheck refuses, on every path and in every mode, a request
// whose Authorization header is present but empty, blank, malformed or
// repeated (401, recorded): such a request is never "without a token",
// so it can neither pass as the demo's loopback admin nor skip the
// checks made of tokenless requests. False means it answered.
func (s *Server) credentialCheck(w http.ResponseWriter, r *http.Request, isGRPC bool) bool {
	c := auth.CallerOfHTTP(r)
	if !c.Presented {
		return true
	}
	_, err := auth.Credential(c)
	if err == nil {
		return true
	}
	a := auth.Attributes{Surface: auth.SurfaceREST, Client: r.RemoteAddr, Agent: r.UserAgent(),
		Operation: r.Method + " " + r.URL.Path, RequestID: r.Header.Get(RequestIDHeader)}
	if isGRPC {
		a.Surface, a.Operation = auth.SurfaceGRPC, r.URL.Path
	}
	s.guard.Refuse(a, err)
	if isGRPC {
		grpcRefuse(w, status.New(codes.Unauthenticated, err.Error()))
		return false
	}
	writeBody(w, http.StatusUnauthorized, ErrorBody{Error: codeName(codes.Unauthenticated), Message: err.Error()})
	return false
}

// tokenless reports whether r would be let in without a token: in a lab,
// or in demo mode when r carries no credential at all (the loopback
// identity; a present credential was checked by credentialCheck and is
// a token's). The identity follows from the parsed credential, never
// from whether some header has a value.
func (s *Server) tokenless(r *http.Request) bool {
	if s.cfg.InsecureLab {
		return true
	}
	if !s.cfg.Demo {
		return false
	}
	secret, err := auth.Credential(auth.CallerOfHTTP(r))
	return err != nil || secret == ""
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// siteCheck refuses, where callers are let in without a token, what a web
// page could send on a user's behalf (see the top of this file).
func (s *Server) siteCheck(r *http.Request, isGRPC bool) (codes.Code, error) {
	if !s.tokenless(r) {
		return codes.OK, nil
	}
	if !isGRPC && safeMethod(r.Method) && !strings.HasPrefix(r.URL.Path, "/v1/") {
		return codes.OK, nil
	}
	if !s.allowedHost(r.Host) {
		return codes.PermissionDenied, fmt.Errorf("host %q refused: without tokens (demo mode, --insecure-lab) the gateway answers only requests addressed to localhost, 127.0.0.1 or [::1]%s", r.Host, s.allowHint())
	}
	if o := r.Header.Values("Origin"); len(o) > 0 && !sameOrigin(o[0], r.Host) {
		return codes.PermissionDenied, fmt.Errorf("cross-site request from origin %q refused (the gateway serves no other site)", o[0])
	}
	if isGRPC || safeMethod(r.Method) {
		return codes.OK, nil
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case mt == "application/json":
	case mt == "application/octet-stream" && streamedUpload(r):
	case r.Header.Get("Content-Type") == "" && r.Method != http.MethodPost && r.ContentLength == 0:
		// PUT, PATCH and DELETE without a body: a page cannot send them
		// cross-site without a preflight, which is never granted.
	default:
		return codes.InvalidArgument, fmt.Errorf("changing requests must be sent as Content-Type: application/json (got %q)", r.Header.Get("Content-Type"))
	}
	return codes.OK, nil
}

func (s *Server) allowedHost(host string) bool {
	if auth.LoopbackHost(host) {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.Trim(h, "[]"))
	for _, a := range s.cfg.AllowHosts {
		if strings.EqualFold(strings.Trim(a, "[]"), h) {
			return true
		}
	}
	return false
}

func (s *Server) allowHint() string {
	if len(s.cfg.AllowHosts) == 0 {
		return " (--allow-host adds names)"
	}
	return " or " + strings.Join(s.cfg.AllowHosts, ", ")
}

// sameOrigin reports whether an Origin header names the site at host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null", garbage
	}
	return strings.EqualFold(u.Host, host)
}

// limitBody reads a request body of at most MaxBody bytes before anything
// else does; a larger one is answered 413 with the limit.
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) bool {
	limit := s.limits.MaxBody
	tooLarge := func() bool {
		// The connection cannot be reused with a body left unread.
		w.Header().Set("Connection", "close")
		writeBody(w, http.StatusRequestEntityTooLarge, ErrorBody{Error: ReasonTooLarge,
			Message: fmt.Sprintf("request body larger than %d bytes, the gateway's limit (--max-body)", limit)})
		return false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if n > limit {
		return tooLarge()
	}
	if err != nil {
		w.Header().Set("Connection", "close")
		writeBody(w, http.StatusBadRequest, ErrorBody{Error: codeName(codes.InvalidArgument),
			Message: "reading the request body: " + err.Error()})
		return false
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(&buf)
	r.ContentLength = n
	return true
}

// liftDeadlines clears the server's write deadline of a stream (and its
// read deadline when the stream also reads, an upload or a gRPC stream),
// which the HTTP server's timeouts would otherwise cut.
func liftDeadlines(w http.ResponseWriter, read bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	if read {
		_ = rc.SetReadDeadline(time.Time{})
	}
}

// streamRoute serves a REST stream: deadlines lifted, and a refusal by
// the stream limits (grpc-gateway writes it) told when to come back.
func streamRoute(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		liftDeadlines(w, false)
		h.ServeHTTP(retryWriter{w}, r)
	})
}

// retryWriter adds Retry-After to a 429 that lacks one.
type retryWriter struct{ http.ResponseWriter }

func (w retryWriter) WriteHeader(code int) {
	if code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(int(auth.StreamRetry/time.Second)))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w retryWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// grpcRefuse answers a gRPC request with a status and no message (a
// trailers-only response).
func grpcRefuse(w http.ResponseWriter, st *status.Status) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(st.Code())))
	h.Set("Grpc-Message", url.PathEscape(st.Message()))
	w.WriteHeader(http.StatusOK)
}

// preflight decides a REST request served outside grpc-gateway before
// any of its body is read (the upload): who is calling and whether they
// may. A refusal is recorded; an allowed call is recorded by the gate
// when it is made over the pipe.
func (s *Server) preflight(r *http.Request, method string) (auth.Identity, error) {
	ru := rules[method]
	return s.admitREST(r, ru.verb, ru.res, method[strings.LastIndex(method, "/")+1:])
}

// admitREST is the gate of a route served outside grpc-gateway: who is
// calling (a refusal recorded) and whether they may (auth.Guard.Check
// records a denial). The error is a status error.
func (s *Server) admitREST(r *http.Request, verb auth.Verb, res auth.Resource, op string) (auth.Identity, error) {
	c := auth.CallerOfHTTP(r)
	a := auth.Attributes{Surface: auth.SurfaceREST, Verb: verb, Resource: res, Client: c.Addr, Agent: c.Agent,
		Operation: op, RequestID: r.Header.Get(RequestIDHeader)}
	id, _, err := s.guard.Admit(c, a)
	if err != nil {
		return id, Err(err)
	}
	return id, nil
}

// metricsAuth serves h to viewers and up only (Config.MetricsAuth).
func (s *Server) metricsAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.admitREST(r, auth.VerbRead, auth.ResMetrics, "GET /metrics"); err != nil {
			writeError(w, Status(err))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// restMetadata is what a REST request passes to the gRPC side: the peer's
// address, whether a proxy forwarded it, its client program and the
// request id (never a client's own metadata: grpc-gateway forwards no
// client header but Authorization).
func restMetadata(r *http.Request) metadata.MD {
	md := metadata.Pairs(auth.RemoteAddrKey, r.RemoteAddr, RequestIDKey, r.Header.Get(RequestIDHeader))
	if ua := printable(r.UserAgent(), 256); ua != "" {
		md.Set("holo-user-agent", ua)
	}
	if auth.Forwarded(r.Header) {
		md.Set(auth.ForwardedKey, "1")
	}
	return md
}

// restCallMetadata is restMetadata with the request's Authorization
// values, for REST handlers outside grpc-gateway that call the gRPC side
// themselves (grpc-gateway passes them on its own).
func restCallMetadata(r *http.Request) metadata.MD {
	md := restMetadata(r)
	if a := r.Header.Values("Authorization"); len(a) > 0 {
		md.Set("authorization", a...)
	}
	return md
}

// printable keeps the printable ASCII of s (gRPC metadata allows no
// more), at most n bytes.
func printable(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		}
	}
	return b.String()
}
