package network

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

type viaAPKey struct{}

// ViaAP reports whether r came in on the access point's listener.
func ViaAP(r *http.Request) bool {
	v, _ := r.Context().Value(viaAPKey{}).(bool)
	return v
}

// WithViaAP marks a context as that of a connection on the access point.
func WithViaAP(ctx context.Context) context.Context {
	return context.WithValue(ctx, viaAPKey{}, true)
}

// APListener is the simulator's access point: a second HTTP listener that
// serves the same handler as the station's, with every request marked so
// ViaAP reports true. It may be opened and closed many times (across
// restarts too); it reopens on the port it last had when it can, so
// clients find it again after a name or passphrase change.
type APListener struct {
	// Addr is where it listens (host:port; port 0 picks one).
	Addr    string
	Handler http.Handler
	// OnOpen, when set, is told the address each time it opens.
	OnOpen func(net.Addr)
	Log    *slog.Logger

	mu   sync.Mutex
	srv  *http.Server
	last string
	wg   sync.WaitGroup
}

// Open starts serving.
func (l *APListener) Open() (net.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv != nil {
		return nil, errors.New("already open")
	}
	var ln net.Listener
	if l.last != "" {
		// The port it had may be taken by now; then any will do.
		ln, _ = net.Listen("tcp", l.last)
	}
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", l.Addr); err != nil {
			return nil, err
		}
	}
	l.last = ln.Addr().String()
	srv := &http.Server{Handler: l.Handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second, // as board.NewHTTPServer
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return WithViaAP(ctx) }}
	if l.Log != nil {
		srv.ErrorLog = slog.NewLogLogger(l.Log.Handler(), slog.LevelDebug)
	}
	l.srv = srv
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_ = srv.Serve(ln)
	}()
	if l.OnOpen != nil {
		l.OnOpen(ln.Addr())
	}
	return ln.Addr(), nil
}

// Close stops serving and drops every connection on it.
func (l *APListener) Close() {
	l.mu.Lock()
	srv := l.srv
	l.srv = nil
	l.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	l.wg.Wait()
}
