package ota

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
)

// releases is a TLS release site with its own CA: channel latest offers
// 2.0.0, dev publishes nothing.
type releases struct {
	srv     *httptest.Server
	plain   *httptest.Server
	img     []byte
	fetches atomic.Int32
}

func newReleases(t *testing.T) *releases {
	rs := &releases{img: testImage(t, "2.0.0", "holo-board", 200000)}
	rs.plain = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(rs.img)
	}))
	mux := http.NewServeMux()
	mux.HandleFunc("/ch/latest.json", func(w http.ResponseWriter, r *http.Request) {
		rs.fetches.Add(1)
		_ = json.NewEncoder(w).Encode(Manifest{Version: "2.0.0", ImageURL: "../img/2.0.0.bin", Size: int64(len(rs.img)),
			SHA256: shaHex(rs.img), ReleaseURL: "https://example.invalid/2.0.0"})
	})
	mux.HandleFunc("/ch/lying.json", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(Manifest{Version: "2.0.0", ImageURL: "../img/2.0.0.bin", Size: int64(len(rs.img)),
			SHA256: strings.Repeat("00", 32)})
	})
	mux.HandleFunc("/ch/downgrade.json", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, rs.plain.URL+"/x.json", http.StatusFound)
	})
	mux.HandleFunc("/img/2.0.0.bin", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "2.0.0.bin", time.Time{}, strings.NewReader(string(rs.img)))
	})
	mux.HandleFunc("/img/to-plain.bin", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, rs.plain.URL+"/img.bin", http.StatusFound)
	})
	rs.srv = httptest.NewTLSServer(mux)
	t.Cleanup(func() { rs.srv.Close(); rs.plain.Close() })
	return rs
}

func pullEnv(t *testing.T, rs *releases, online *atomic.Bool, clk clock.Clock) *env {
	e := newEnv(t)
	e.svc.Close()
	e.srv.Close()
	svc, err := New(Config{DataDir: e.dir, Running: 0, Expect: HostExpect(), Events: e.rec, Long: e.long, Clock: clk,
		Restart: func(d time.Duration) { e.restarts <- d },
		Pull:    PullConfig{BaseURL: rs.srv.URL + "/ch", Client: rs.srv.Client(), Online: online.Load, Current: "1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	mux := http.NewServeMux()
	for _, r := range svc.Routes() {
		mux.Handle(r.Method+" /api/v1"+r.Path, r.Handler)
	}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() { e.srv.Close(); svc.Close() })
	return e
}

func TestPullChannel(t *testing.T) {
	rs := newReleases(t)
	var online atomic.Bool
	online.Store(true)
	e := pullEnv(t, rs, &online, nil)
	r := e.post("/ota/pull", `{"channel":"latest"}`)
	s := r.session(t)
	if r.status != 202 || s.State != StateDownloading || s.Source != SourcePull || s.URL == nil || !strings.HasSuffix(*s.URL, "/img/2.0.0.bin") || s.Total != int64(len(rs.img)) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	waitFor(t, func() bool { st := e.svc.Session().State; return st == StateStaged || st == StateFailed })
	s = e.svc.Session()
	if s.State != StateStaged || *s.SHA256 != shaHex(rs.img) || s.App.Version != "2.0.0" {
		t.Fatalf("%+v", s)
	}
	if got := strings.Join(e.rec.seen(), ","); got != "downloading,verifying,staged" {
		t.Errorf("events %s", got)
	}
	if st := e.status(); !st.Pull.Available || !st.Pull.Channels || !st.Pull.Online {
		t.Errorf("pull info %+v", st.Pull)
	}
}

func TestPullRefusals(t *testing.T) {
	rs := newReleases(t)
	var online atomic.Bool
	online.Store(true)
	e := pullEnv(t, rs, &online, nil)
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"neither", `{}`, 400, "bad_request"},
		{"both", `{"channel":"latest","url":"https://x/y"}`, 400, "bad_request"},
		{"plain http url", `{"url":"` + rs.plain.URL + `/img.bin"}`, 400, "bad_request"},
		{"no firmware", `{"channel":"dev"}`, 404, "no_firmware"},
		{"https to http redirect", `{"channel":"downgrade"}`, 503, "unreachable"},
		{"image redirect to http", `{"url":"` + rs.srv.URL + `/img/to-plain.bin"}`, 503, "unreachable"},
		{"sha differs from manifest", `{"channel":"latest","sha256":"` + strings.Repeat("11", 32) + `"}`, 422, "sha256_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/ota/pull", tc.body)
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	// A manifest whose SHA-256 is not the image's: the download fails.
	if r := e.post("/ota/pull", `{"channel":"lying"}`); r.status != 202 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	waitFor(t, func() bool { return e.svc.Session().State == StateFailed })
	if s := e.svc.Session(); !strings.HasPrefix(*s.Error, "sha256_mismatch") {
		t.Fatalf("%+v", *s.Error)
	}
	// A certificate from another CA is refused.
	other := &Service{cfg: Config{Pull: PullConfig{}}}
	if _, err := other.get(t.Context(), rs.srv.URL+"/ch/latest.json", api.ErrNoFirmware); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	online.Store(false)
	if r := e.post("/ota/pull", `{"channel":"latest"}`); r.status != 503 || r.code() != "offline" {
		t.Fatalf("offline: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/ota/check", nil, 0); r.status != 503 || r.code() != "offline" {
		t.Fatalf("check offline: %d %s", r.status, r.body)
	}
}

func TestPullActivate(t *testing.T) {
	rs := newReleases(t)
	var online atomic.Bool
	online.Store(true)
	e := pullEnv(t, rs, &online, nil)
	e.post("/ota/pull", fmt.Sprintf(`{"url":%q,"activate":true,"reboot":true}`, rs.srv.URL+"/ch/latest.json"))
	if d := <-e.restarts; d != UpdateRestartDelay {
		t.Fatalf("restart %v", d)
	}
	if s := e.svc.Session(); s.State != StateActive || !s.BootsNext {
		t.Fatalf("%+v", s)
	}
}

func TestCheckCache(t *testing.T) {
	rs := newReleases(t)
	var online atomic.Bool
	online.Store(true)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := pullEnv(t, rs, &online, clk)
	get := func(q string) CheckResult {
		r := e.do("GET", "/ota/check"+q, nil, 0)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var c CheckResult
		_ = json.Unmarshal(r.body, &c)
		return c
	}
	c := get("")
	if c.Channel != "latest" || c.Version != "2.0.0" || c.Current != "1.0.0" || c.Newer == nil || !*c.Newer ||
		!strings.HasSuffix(c.ImageURL, "/img/2.0.0.bin") || c.SHA256 != shaHex(rs.img) || c.CheckedSAgo != 0 {
		t.Fatalf("%+v", c)
	}
	clk.Advance(4 * time.Minute)
	if c := get("?channel=latest"); c.CheckedSAgo != 240 || rs.fetches.Load() != 1 {
		t.Fatalf("cached: %+v fetches %d", c, rs.fetches.Load())
	}
	if c := get("?refresh=1"); c.CheckedSAgo != 0 || rs.fetches.Load() != 2 {
		t.Fatalf("refresh: %+v fetches %d", c, rs.fetches.Load())
	}
	clk.Advance(5 * time.Minute)
	if c := get(""); c.CheckedSAgo != 0 || rs.fetches.Load() != 3 {
		t.Fatalf("expired: %+v fetches %d", c, rs.fetches.Load())
	}
	if r := e.do("GET", "/ota/check?channel=dev", nil, 0); r.status != 404 || r.code() != "no_firmware" {
		t.Fatalf("dev: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/ota/check?refresh=maybe", nil, 0); r.status != 400 {
		t.Fatalf("bad refresh: %d", r.status)
	}
}

func TestNewer(t *testing.T) {
	b := func(v bool) *bool { return &v }
	for _, tc := range []struct {
		avail, cur string
		want       *bool
	}{
		{"2.0.0", "1.9.9", b(true)}, {"v1.2.3", "1.2.3", b(false)}, {"1.2.3", "1.10.0", b(false)},
		{"1.2.3", "0.0.0-dev", nil}, {"latest", "1.0.0", nil}, {"1.02.3", "1.0.0", nil},
	} {
		got := newer(tc.avail, tc.cur)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("newer(%s, %s) = %v", tc.avail, tc.cur, got)
		}
	}
}
