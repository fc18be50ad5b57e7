package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"google.golang.org/grpc/metadata"
)

// Request ids. Every API request has one: the caller's when it sends a
// usable one (REST header X-Request-Id, gRPC metadata x-request-id), else
// 16 hex digits made here. It is logged with the request and given back:
// as the X-Request-Id header of every REST reply and as x-request-id in
// the gRPC header metadata. The request log itself is written by the gate
// (guard.go), which knows who made the call.
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
