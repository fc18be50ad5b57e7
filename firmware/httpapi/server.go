// Package httpapi serves the board API over HTTP: it routes /api/v1 paths
// to the handlers the feature packages declare (api.Route) and applies the
// specification's Authentication rules around them, in this order:
//
//  1. CORS: a preflight (OPTIONS with Access-Control-Request-Method) from a
//     trusted origin is answered 204 with the allowed methods and headers;
//     replies to a trusted origin carry Access-Control-Allow-Origin.
//  2. Routing: an unknown path, or a method the path does not have, is
//     404 not_found.
//  3. Changing methods (PUT, POST, PATCH, DELETE) must name the board in
//     Host (an IP literal, the hostname, or hostname.local): 403
//     forbidden_host.
//  4. With a password set, changing methods and private GETs need it as
//     Bearer or Basic (any user): 401 auth_required with
//     WWW-Authenticate: Bearer. A password presented on any request is
//     checked, and wrong ones slow their address down (see FreeFailures):
//     429 too_many_attempts with Retry-After while it is locked. A
//     request that presents the right one, or any request while no
//     password is set, is trusted (see Trusted): the event stream keeps a
//     slot for such clients.
//  5. POST and PATCH need Content-Type application/json: 415 content_type.
//     Raw uploads (PUT with bytes) are exempt.
//
// Over the host link none of these rules apply; the link server calls the
// same handlers through Lookup.
package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

// Prefix is the path prefix of every API endpoint.
const Prefix = "/api/v1"

// Access answers the questions of the Authentication rules from the
// board's current web settings.
type Access interface {
	// Hostname is the board's .local name without the suffix.
	Hostname() string
	// HasPassword reports whether a password is set.
	HasPassword() bool
	// CheckPassword reports whether p is the password.
	CheckPassword(p string) bool
	// TrustedOrigin reports whether a browser origin may call the API.
	TrustedOrigin(origin string) bool
}

// Options tune a Server. Zero values take the defaults.
type Options struct {
	Log *slog.Logger
	// Clock times the locks of password guessing (clock.Real when nil).
	Clock clock.Clock
	// MaxTracked bounds the addresses whose wrong passwords are
	// remembered (MaxTracked when 0).
	MaxTracked int
}

// Server routes and guards the API.
type Server struct {
	access  Access
	log     *slog.Logger
	guesses *guesses

	mu     sync.RWMutex
	routes map[string]map[string]api.Route // path -> method -> route
}

// New returns a server with no routes.
func New(access Access, o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	return &Server{access: access, log: o.Log, guesses: newGuesses(o.Clock, o.MaxTracked),
		routes: map[string]map[string]api.Route{}}
}

// trustedKey marks the context of a trusted request.
type trustedKey struct{}

// Trusted reports whether the server found r trusted: no password is
// set, or r presented it. Requests that did not come through a Server
// (the host link's) are not.
func Trusted(r *http.Request) bool {
	t, _ := r.Context().Value(trustedKey{}).(bool)
	return t
}

// Handle adds routes. A later route for the same method and path replaces
// the earlier one.
func (s *Server) Handle(routes ...api.Route) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range routes {
		m := s.routes[r.Path]
		if m == nil {
			m = map[string]api.Route{}
			s.routes[r.Path] = m
		}
		m[r.Method] = r
	}
}

// Routes returns every route, sorted by path then method.
func (s *Server) Routes() []api.Route {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []api.Route
	for _, m := range s.routes {
		for _, r := range m {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// Lookup finds the route for a method and an API path (without the
// prefix, without the query).
func (s *Server) Lookup(method, path string) (api.Route, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.routes[path][method]
	return r, ok
}

func (s *Server) methods(path string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ms []string
	for m := range s.routes[path] {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	return ms
}

// ServeHTTP implements the rules in the package doc.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	trusted := origin != "" && s.access.TrustedOrigin(origin)
	if origin != "" {
		w.Header().Add("Vary", "Origin")
	}
	if trusted {
		w.Header().Set("Access-Control-Allow-Origin", origin)
	}

	path, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok || path == "" {
		api.WriteError(w, api.Errorf(api.ErrNotFound, "no endpoint %s", r.URL.Path))
		return
	}
	if r.Method == http.MethodOptions {
		s.preflight(w, r, path, trusted)
		return
	}
	route, ok := s.Lookup(r.Method, path)
	if !ok {
		if ms := s.methods(path); len(ms) > 0 {
			api.WriteError(w, api.Errorf(api.ErrNotFound, "%s %s is not served; it has %s", r.Method, path, strings.Join(ms, ", ")))
			return
		}
		api.WriteError(w, api.Errorf(api.ErrNotFound, "no endpoint %s", path))
		return
	}
	trusted, err := s.check(r, route)
	if err != nil {
		var e *api.Error
		if errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", retryAfter(s.guesses.locked(addressKey(r.RemoteAddr))))
		}
		api.WriteError(w, err)
		return
	}
	if trusted {
		r = r.WithContext(context.WithValue(r.Context(), trustedKey{}, true))
	}
	route.Handler.ServeHTTP(w, r)
}

// retryAfter is a Retry-After value: whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

func changing(method string) bool {
	switch method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// check applies the rules of the package doc and reports whether r is
// trusted.
func (s *Server) check(r *http.Request, route api.Route) (trusted bool, err error) {
	change := changing(r.Method)
	if change && !s.hostNamesBoard(r.Host) {
		return false, api.Errorf(api.ErrForbiddenHost, "Host %q does not name this board; use its IP address, %s or %s.local", r.Host, s.access.Hostname(), s.access.Hostname())
	}
	trusted = true
	if s.access.HasPassword() {
		trusted, err = s.password(r)
		if err != nil {
			return false, err
		}
		if !trusted && (change || route.Private) {
			return false, api.Errorf(api.ErrAuthRequired, "this board has a password; send it as Authorization: Bearer <password>")
		}
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodPatch) && !route.Raw {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return false, api.Errorf(api.ErrContentType, "%s needs Content-Type: application/json", r.Method)
		}
	}
	return trusted, nil
}

// password checks the password r presents, if any, under the limit on
// guessing: ok is true for the right one; err is too_many_attempts while
// r's address is locked.
func (s *Server) password(r *http.Request) (ok bool, err error) {
	got, presented := presentedPassword(r)
	if !presented {
		return false, nil
	}
	key := addressKey(r.RemoteAddr)
	if left := s.guesses.locked(key); left > 0 {
		return false, api.Errorf(ErrTooManyAttempts, "too many wrong passwords from %s; try again in %s s", key, retryAfter(left))
	}
	if s.access.CheckPassword(got) {
		s.guesses.succeeded(key)
		return true, nil
	}
	s.guesses.failed(key)
	s.log.Warn("http: wrong password", "remote", r.RemoteAddr, "path", r.URL.Path)
	return false, nil
}

// hostNamesBoard reports whether a Host header names this board.
func (s *Server) hostNamesBoard(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		return true
	}
	name := strings.ToLower(s.access.Hostname())
	return host == name || host == name+".local"
}

// presentedPassword returns the password r carries as Bearer or Basic
// (any user name); presented is false when it carries none. A malformed
// Basic value counts as a wrong password.
func presentedPassword(r *http.Request) (pw string, presented bool) {
	auth := r.Header.Get("Authorization")
	switch {
	case len(auth) > 7 && strings.EqualFold(auth[:7], "bearer "):
		return strings.TrimSpace(auth[7:]), true
	case len(auth) > 6 && strings.EqualFold(auth[:6], "basic "):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth[6:]))
		if err != nil {
			return "", true
		}
		_, p, ok := strings.Cut(string(raw), ":")
		if !ok {
			return "", true
		}
		return p, true
	}
	return "", false
}

// preflight answers a CORS preflight for a trusted origin.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request, path string, trusted bool) {
	ms := s.methods(path)
	if len(ms) == 0 {
		api.WriteError(w, api.Errorf(api.ErrNotFound, "no endpoint %s", path))
		return
	}
	if trusted && r.Header.Get("Access-Control-Request-Method") != "" {
		h := w.Header()
		h.Set("Access-Control-Allow-Methods", strings.Join(append(ms, "OPTIONS"), ", "))
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
		h.Set("Access-Control-Max-Age", "600")
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
	}
	w.Header().Set("Allow", strings.Join(append(ms, "OPTIONS"), ", "))
	w.WriteHeader(http.StatusNoContent)
}
