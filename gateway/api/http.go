package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// serveSSE streams events as Server-Sent Events:
//
//	id: <n>
//	event: <type>
//	data: <event JSON on one line>
//
// The query takes WatchEventsRequest's fields (group, selector, firmware,
// online, ids, after); a Last-Event-ID header sets after. When the
// watcher falls behind, a last "event: error" carries {"error","message"}.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	req := &fleetv1.WatchEventsRequest{}
	if err := runtime.PopulateQueryParameters(req, r.URL.Query(), utilities.NewDoubleArray(nil)); err != nil {
		writeError(w, status.New(codes.InvalidArgument, err.Error()))
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			writeError(w, status.New(codes.InvalidArgument, "Last-Event-ID must be an event number"))
			return
		}
		req.After = &n
	}
	md := restCallMetadata(r)
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(r.Context(), md))
	defer cancel()
	stream, err := s.client.WatchEvents(ctx, req)
	var first *fleetv1.Event
	if err == nil {
		var md metadata.MD
		md, err = stream.Header()
		if err == nil && len(md.Get(WatchHeader)) == 0 {
			// A refused call has no headers: its status comes with Recv.
			first, err = stream.Recv()
		}
	}
	if err != nil {
		writeError(w, status.Convert(err))
		return
	}
	flusher := openSSE(w)
	for {
		ev, err := first, error(nil)
		if ev == nil {
			ev, err = stream.Recv()
		}
		first = nil
		if err != nil {
			st := status.Convert(err)
			if !errors.Is(err, io.EOF) && st.Code() != codes.Canceled && r.Context().Err() == nil {
				_, body := restError(st)
				b, _ := jsonMarshal(body)
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
				if flusher != nil {
					flusher.Flush()
				}
			}
			return
		}
		b, err := jsonPb.Marshal(ev)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.GetN(), ev.GetType(), b); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// openSSE answers 200 with the headers of a Server-Sent Events stream
// (never cached, never buffered by a proxy), sends them at once and
// returns the flusher of each event (nil when w has none).
func openSSE(w http.ResponseWriter) http.Flusher {
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	return flusher
}

// pipeListener is an in-process listener: the REST front dials it to reach
// the gRPC server without the network. Its connections' addresses have
// network "pipe", which the auth Guard recognises.
type pipeListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (p *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-p.ch:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeListener) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

func (p *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (p *pipeListener) dial(ctx context.Context, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.ch <- server:
		return client, nil
	case <-p.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, net.ErrClosed
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
