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
//     WWW-Authenticate: Bearer.
//  5. POST and PATCH need Content-Type application/json: 415 content_type.
//     Raw uploads (PUT with bytes) are exempt.
//
// Over the host link none of these rules apply; the link server calls the
// same handlers through Lookup.
package httpapi

import (
	"encoding/base64"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"

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

// Server routes and guards the API.
type Server struct {
	access Access
	log    *slog.Logger

	mu     sync.RWMutex
	routes map[string]map[string]api.Route // path -> method -> route
}

// New returns a server with no routes.
func New(access Access, log *slog.Logger) *Server {
	return &Server{access: access, log: log, routes: map[string]map[string]api.Route{}}
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
	if err := s.check(r, route); err != nil {
		api.WriteError(w, err)
		return
	}
	route.Handler.ServeHTTP(w, r)
}

func changing(method string) bool {
	switch method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func (s *Server) check(r *http.Request, route api.Route) error {
	change := changing(r.Method)
	if change && !s.hostNamesBoard(r.Host) {
		return api.Errorf(api.ErrForbiddenHost, "Host %q does not name this board; use its IP address, %s or %s.local", r.Host, s.access.Hostname(), s.access.Hostname())
	}
	if change || route.Private {
		if s.access.HasPassword() && !s.passwordMatches(r) {
			return api.Errorf(api.ErrAuthRequired, "this board has a password; send it as Authorization: Bearer <password>")
		}
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodPatch) && !route.Raw {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return api.Errorf(api.ErrContentType, "%s needs Content-Type: application/json", r.Method)
		}
	}
	return nil
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

func (s *Server) passwordMatches(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	var got string
	switch {
	case len(auth) > 7 && strings.EqualFold(auth[:7], "bearer "):
		got = strings.TrimSpace(auth[7:])
	case len(auth) > 6 && strings.EqualFold(auth[:6], "basic "):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(auth[6:]))
		if err != nil {
			return false
		}
		_, p, ok := strings.Cut(string(raw), ":")
		if !ok {
			return false
		}
		got = p
	default:
		return false
	}
	return s.access.CheckPassword(got)
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
