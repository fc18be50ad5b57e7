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
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
	ctx, cancel := restCallContext(r)
	defer cancel()
	stream, err := s.client.WatchEvents(ctx, req)
	pipeSSE(w, r, stream, err, 0)
}

// restCallContext is the context of a REST request's call over the pipe:
// its metadata (restCallMetadata), ended with the request.
func restCallContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithCancel(metadata.NewOutgoingContext(r.Context(), restCallMetadata(r)))
}

// sseEvent is what an event stream sends: a numbered, typed message.
type sseEvent[T any] interface {
	*T
	proto.Message
	GetN() uint64
	GetType() string
}

// pipeSSE answers a watch call made over the pipe (its stream and error)
// as Server-Sent Events:
//
//	id: <n>
//	event: <type>
//	data: <event JSON on one line>
//
// A call the gate refused (it sends no WatchHeader) is answered with its
// status. When the watch ends on an error (the watcher fell behind), a
// last "event: error" carries {"error","message"}. With keepAlive, a
// comment line goes out after that long without an event.
func pipeSSE[T any, P sseEvent[T]](w http.ResponseWriter, r *http.Request, stream grpc.ServerStreamingClient[T], err error, keepAlive time.Duration) {
	var first P
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
	type recv struct {
		ev  P
		err error
	}
	evs := make(chan recv)
	go func() {
		if first != nil {
			evs <- recv{ev: first}
		}
		for {
			ev, err := stream.Recv()
			select {
			case evs <- recv{ev, err}:
			case <-r.Context().Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var keep <-chan time.Time
	if keepAlive > 0 {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		keep = t.C
	}
	for {
		var werr error
		select {
		case <-r.Context().Done():
			return
		case <-keep:
			_, werr = io.WriteString(w, ": keep-alive\n\n")
		case x := <-evs:
			if x.err != nil {
				st := status.Convert(x.err)
				if !errors.Is(x.err, io.EOF) && st.Code() != codes.Canceled && r.Context().Err() == nil {
					_, body := restError(st)
					b, _ := jsonMarshal(body)
					fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
					if flusher != nil {
						flusher.Flush()
					}
				}
				return
			}
			b, err := jsonPb.Marshal(x.ev)
			if err != nil {
				return
			}
			_, werr = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", x.ev.GetN(), x.ev.GetType(), b)
		}
		if werr != nil {
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
