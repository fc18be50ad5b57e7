package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/firmware/api"
)

type access struct {
	pw      string
	trusted string
}

func (a access) Hostname() string            { return "holo-ab12" }
func (a access) HasPassword() bool           { return a.pw != "" }
func (a access) CheckPassword(p string) bool { return p == a.pw }
func (a access) TrustedOrigin(o string) bool { return o == a.trusted }

func newServer(pw string) *Server {
	s := New(access{pw: pw, trusted: "https://ok.example"}, Options{})
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 200, map[string]bool{"ok": true}) })
	s.Handle(
		api.Route{Method: "GET", Path: "/thing", Handler: ok},
		api.Route{Method: "PATCH", Path: "/thing", Handler: ok},
		api.Route{Method: "GET", Path: "/secret", Handler: ok, Private: true},
		api.Route{Method: "PUT", Path: "/upload", Handler: ok, Raw: true},
	)
	return s
}

func TestRules(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:pw"))
	tests := []struct {
		name   string
		pw     string
		method string
		path   string
		host   string
		ctype  string
		auth   string
		status int
		code   string
	}{
		{"open get", "pw", "GET", "/api/v1/thing", "evil", "", "", 200, ""},
		{"no prefix", "", "GET", "/thing", "1.2.3.4", "", "", 404, "not_found"},
		{"unknown", "", "GET", "/api/v1/nope", "1.2.3.4", "", "", 404, "not_found"},
		{"wrong method", "", "DELETE", "/api/v1/thing", "1.2.3.4", "", "", 404, "not_found"},
		{"ip host", "", "PATCH", "/api/v1/thing", "10.0.0.9:80", "application/json", "", 200, ""},
		{"ipv6 host", "", "PATCH", "/api/v1/thing", "[::1]:80", "application/json", "", 200, ""},
		{"name host", "", "PATCH", "/api/v1/thing", "HOLO-AB12", "application/json", "", 200, ""},
		{"local host", "", "PATCH", "/api/v1/thing", "holo-ab12.local.", "application/json", "", 200, ""},
		{"other name", "", "PATCH", "/api/v1/thing", "holo-ab13.local", "application/json", "", 403, "forbidden_host"},
		{"localhost", "", "PATCH", "/api/v1/thing", "localhost", "application/json", "", 403, "forbidden_host"},
		{"json with charset", "", "PATCH", "/api/v1/thing", "1.2.3.4", "application/json; charset=utf-8", "", 200, ""},
		{"no type", "", "PATCH", "/api/v1/thing", "1.2.3.4", "", "", 415, "content_type"},
		{"raw upload", "", "PUT", "/api/v1/upload", "1.2.3.4", "application/octet-stream", "", 200, ""},
		{"password missing", "pw", "PATCH", "/api/v1/thing", "1.2.3.4", "application/json", "", 401, "auth_required"},
		{"bearer", "pw", "PATCH", "/api/v1/thing", "1.2.3.4", "application/json", "Bearer pw", 200, ""},
		{"bearer lower", "pw", "PATCH", "/api/v1/thing", "1.2.3.4", "application/json", "bearer pw", 200, ""},
		{"basic", "pw", "PATCH", "/api/v1/thing", "1.2.3.4", "application/json", basic, 200, ""},
		{"basic garbage", "pw", "PATCH", "/api/v1/thing", "1.2.3.4", "application/json", "Basic !!", 401, "auth_required"},
		{"private", "pw", "GET", "/api/v1/secret", "1.2.3.4", "", "", 401, "auth_required"},
		{"private ok", "pw", "GET", "/api/v1/secret", "1.2.3.4", "", "Bearer pw", 200, ""},
		{"auth before type", "pw", "PATCH", "/api/v1/thing", "1.2.3.4", "", "", 401, "auth_required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(tt.pw)
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader("{}"))
			r.Host = tt.host
			if tt.ctype != "" {
				r.Header.Set("Content-Type", tt.ctype)
			}
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.code) {
				t.Fatalf("got %d %s, want %d %s", w.Code, w.Body, tt.status, tt.code)
			}
			if w.Code == 401 && w.Header().Get("WWW-Authenticate") != "Bearer" {
				t.Error("401 without WWW-Authenticate: Bearer")
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	s := newServer("")
	for _, tc := range []struct {
		origin string
		allow  bool
	}{{"https://ok.example", true}, {"https://bad.example", false}} {
		r := httptest.NewRequest("OPTIONS", "/api/v1/thing", nil)
		r.Header.Set("Origin", tc.origin)
		r.Header.Set("Access-Control-Request-Method", "PATCH")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		got := w.Header().Get("Access-Control-Allow-Origin") == tc.origin && strings.Contains(w.Header().Get("Access-Control-Allow-Methods"), "PATCH")
		if w.Code != 204 || got != tc.allow {
			t.Errorf("%s: %d %v", tc.origin, w.Code, w.Header())
		}
	}
}
