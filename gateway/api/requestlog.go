package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Request ids. Every API request has one: the caller's when it sends a
// usable one (REST header X-Request-Id, gRPC metadata x-request-id), else
// 16 hex digits made here. It is logged with the request and given back:
// as the X-Request-Id header of every REST reply and as x-request-id in
// the gRPC header metadata.
const (
	RequestIDHeader = "X-Request-Id"
	RequestIDKey    = "x-request-id" // gRPC metadata key
	// maxRequestID bounds a caller's id; longer ones are replaced.
	maxRequestID = 64
)

// validRequestID accepts 1-64 characters of letters, digits and ._:-, so
// a caller's id is safe in headers and logs.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// newRequestID makes 16 hex digits.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// restRequestID gives an HTTP request its id before it is routed: the
// header stays on r for the REST handlers to pass on as metadata, and is
// set on the reply.
func restRequestID(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(RequestIDHeader)
	if !validRequestID(id) {
		id = newRequestID()
		r.Header.Set(RequestIDHeader, id)
	}
	w.Header().Set(RequestIDHeader, id)
}

// incomingRequestID is the id in ctx's metadata, or a new one.
func incomingRequestID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(RequestIDKey); len(v) > 0 && validRequestID(v[0]) {
		return v[0]
	}
	return newRequestID()
}

// requestLog logs every request once it ends, at Info: method, gRPC code,
// duration and request id; refused and failed ones also carry the error.
// Health checks and reflection (probes, every few seconds) log at Debug.
type requestLog struct{ log *slog.Logger }

func (l requestLog) done(ctx context.Context, method, id string, start time.Time, err error) {
	attrs := []slog.Attr{slog.String("method", method), slog.String("code", status.Code(err).String()),
		slog.Duration("duration", time.Since(start)), slog.String("request_id", id)}
	if err != nil {
		attrs = append(attrs, slog.String("err", status.Convert(err).Message()))
	}
	level := slog.LevelInfo
	if openMethod(method) {
		level = slog.LevelDebug
	}
	l.log.LogAttrs(ctx, level, "api: request", attrs...)
}

func (l requestLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	id := incomingRequestID(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDKey, id))
	resp, err := h(ctx, req)
	l.done(ctx, info.FullMethod, id, start, err)
	return resp, err
}

func (l requestLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	id := incomingRequestID(ss.Context())
	_ = ss.SetHeader(metadata.Pairs(RequestIDKey, id))
	err := h(srv, ss)
	l.done(ss.Context(), info.FullMethod, id, start, err)
	return err
}
