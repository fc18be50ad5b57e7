package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/holofleet/holofleet/gateway/auth"
)

func TestLimitsWithDefaults(t *testing.T) {
	d := DefaultLimits()
	if diff := cmp.Diff(Limits{}.withDefaults(), d); diff != "" {
		t.Errorf("zero Limits (-got +want):\n%s", diff)
	}
	off := Limits{MaxBody: -1, ReadTimeout: -1, WriteTimeout: -1, Streams: -1, StreamsPerToken: -1, Rate: -1}.withDefaults()
	if off.ReadTimeout != 0 || off.WriteTimeout != 0 || off.Streams != 0 || off.StreamsPerToken != 0 || off.Rate != 0 || off.MaxBody < 1<<30 {
		t.Errorf("negative limits are not off: %+v", off)
	}
	if off.ReadHeaderTimeout != d.ReadHeaderTimeout {
		t.Errorf("an unset limit lost its default: %+v", off)
	}
	set := Limits{Rate: 2, Burst: 5, WriteTimeout: time.Second}.withDefaults()
	if set.Rate != 2 || set.Burst != 5 || set.WriteTimeout != time.Second {
		t.Errorf("given limits changed: %+v", set)
	}
	for _, v := range []time.Duration{d.ReadHeaderTimeout, d.ReadTimeout, d.WriteTimeout, d.IdleTimeout} {
		if v <= 0 {
			t.Errorf("a default timeout is off: %+v", d)
		}
	}
}

func TestSiteCheck(t *testing.T) {
	demo := &Server{cfg: Config{Demo: true}}
	lab := &Server{cfg: Config{InsecureLab: true, AllowHosts: []string{"lab-gw"}}}
	plain := &Server{}
	req := func(method, path, host string, hdr ...string) *http.Request {
		r := httptest.NewRequest(method, path, strings.NewReader(""))
		r.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		if method == "POST" || len(hdr) > 0 && hdr[0] == "Content-Type" {
			r.ContentLength = 2
		}
		return r
	}
	json := []string{"Content-Type", "application/json"}
	for _, tc := range []struct {
		name string
		s    *Server
		r    *http.Request
		grpc bool
		want codes.Code
	}{
		{"demo json to localhost", demo, req("POST", "/v1/actions", "localhost:8480", json...), false, codes.OK},
		{"demo json to 127.0.0.1", demo, req("POST", "/v1/actions", "127.0.0.1", json...), false, codes.OK},
		{"demo text/plain", demo, req("POST", "/v1/actions", "localhost", "Content-Type", "text/plain"), false, codes.InvalidArgument},
		{"demo form", demo, req("POST", "/v1/tokens", "localhost", "Content-Type", "application/x-www-form-urlencoded"), false, codes.InvalidArgument},
		{"demo no type", demo, req("POST", "/v1/tokens", "localhost"), false, codes.InvalidArgument},
		{"demo json+charset", demo, req("POST", "/v1/tokens", "localhost", "Content-Type", "application/json; charset=utf-8"), false, codes.OK},
		{"demo upload", demo, req("POST", "/v1/artifacts", "localhost", "Content-Type", "application/octet-stream"), false, codes.OK},
		{"demo octet elsewhere", demo, req("POST", "/v1/actions", "localhost", "Content-Type", "application/octet-stream"), false, codes.InvalidArgument},
		{"demo installation content", demo, req("POST", "/v1/installation/content", "localhost", "Content-Type", "application/octet-stream"), false, codes.OK},
		{"demo installation content, wrong method", demo, req("PUT", "/v1/installation/content", "localhost", "Content-Type", "application/octet-stream"), false, codes.InvalidArgument},
		{"demo octet to an installation apply", demo, req("POST", "/v1/installation/apply", "localhost", "Content-Type", "application/octet-stream"), false, codes.InvalidArgument},
		{"demo bodiless delete", demo, req("DELETE", "/v1/tokens/x", "localhost"), false, codes.OK},
		{"demo rebound host", demo, req("POST", "/v1/actions", "evil.example", json...), false, codes.PermissionDenied},
		{"demo rebound read", demo, req("GET", "/v1/tokens", "evil.example"), false, codes.PermissionDenied},
		{"demo metrics any host", demo, req("GET", "/metrics", "gw.example"), false, codes.OK},
		{"demo firmware any host", demo, req("GET", "/firmware/x.bin", "10.0.0.5:8480"), false, codes.OK},
		{"demo foreign origin", demo, req("POST", "/v1/actions", "localhost", "Content-Type", "application/json", "Origin", "http://evil.example"), false, codes.PermissionDenied},
		{"demo own origin", demo, req("POST", "/v1/actions", "localhost:8480", "Content-Type", "application/json", "Origin", "http://localhost:8480"), false, codes.OK},
		{"demo with token any host", demo, req("POST", "/v1/actions", "evil.example", "Authorization", "Bearer x"), false, codes.OK},
		{"demo grpc rebound", demo, req("POST", "/holo.fleet.v1.FleetService/ListBoards", "evil.example"), true, codes.PermissionDenied},
		{"demo grpc localhost", demo, req("POST", "/holo.fleet.v1.FleetService/ListBoards", "localhost:8480"), true, codes.OK},
		{"lab token does not help", lab, req("POST", "/v1/actions", "evil.example", "Authorization", "Bearer x"), false, codes.PermissionDenied},
		{"lab allowed host", lab, req("POST", "/v1/actions", "LAB-GW:8480", json...), false, codes.OK},
		{"tokens mode any host", plain, req("POST", "/v1/actions", "evil.example", "Content-Type", "text/plain"), false, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.siteCheck(tc.r, tc.grpc)
			if got != tc.want || (err == nil) != (tc.want == codes.OK) {
				t.Errorf("siteCheck = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRetryAfterHeader(t *testing.T) {
	w := httptest.NewRecorder()
	writeError(w, Status(&auth.LimitError{What: "x", RetryAfter: 1500 * time.Millisecond}))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
		t.Errorf("%d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	w = httptest.NewRecorder()
	retryWriter{w}.WriteHeader(http.StatusTooManyRequests)
	if w.Header().Get("Retry-After") != "5" {
		t.Errorf("stream refusal Retry-After %q", w.Header().Get("Retry-After"))
	}
}
