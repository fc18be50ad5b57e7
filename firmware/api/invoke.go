package api

import (
	"bytes"
	"net/http"
)

// Invoke runs a route's handler in process, as the host link and the
// console do, so every way into the board shares one implementation of
// each endpoint. It returns the status and the reply body without its
// trailing line break.
func Invoke(h http.Handler, r *http.Request) (status int, body []byte) {
	rec := &Recorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.status, bytes.TrimRight(rec.buf.Bytes(), "\r\n")
}

// Recorder is an http.ResponseWriter that keeps the reply in memory.
type Recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

// Header implements http.ResponseWriter.
func (r *Recorder) Header() http.Header { return r.header }

// WriteHeader implements http.ResponseWriter; the first status wins.
func (r *Recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

// Write implements http.ResponseWriter.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.buf.Write(b)
}

// Flush implements http.Flusher (a no-op: the reply is kept whole).
func (r *Recorder) Flush() {}
