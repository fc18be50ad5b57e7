package network

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/longop"
)

// memStore is an in-memory Store.
type memStore struct {
	mu   sync.Mutex
	docs map[string][]byte
}

func (s *memStore) Get(key string, v any) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.docs[key]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (s *memStore) Put(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.docs == nil {
		s.docs = map[string][]byte{}
	}
	s.docs[key] = b
	return nil
}

func (s *memStore) raw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.docs[storeKey])
}

// recorder keeps every published state, marshalled.
type recorder struct {
	mu     sync.Mutex
	states []string
}

func (r *recorder) SetState(kind string, state any) {
	b, _ := json.Marshal(state)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, kind+" "+string(b))
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.states, "\n")
}

// fakeAP records opens and closes.
type fakeAP struct {
	mu     sync.Mutex
	events []string
	port   int
}

func (f *fakeAP) Open() (net.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.port++
	f.events = append(f.events, "open")
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9000 + f.port}, nil
}

func (f *fakeAP) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "close")
}

func (f *fakeAP) log() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.events, ",")
}

type fakeAnnouncer struct {
	mu  sync.Mutex
	log []string
}

func (f *fakeAnnouncer) Announce(host string, ip net.IP, port int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("announce %s %s %d", host, ip, port))
	return nil
}

func (f *fakeAnnouncer) Withdraw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "withdraw")
}

func (f *fakeAnnouncer) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, ",")
}

type rig struct {
	t     *testing.T
	n     *Network
	clk   *clock.Fake
	store *memStore
	pub   *recorder
	ap    *fakeAP
	ann   *fakeAnnouncer
	logs  *bytes.Buffer
	mux   map[string]http.Handler
	long  *longop.Lock
	radio string
	host  string
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func labRadio() Radio {
	return Radio{
		Provision: []string{"lab"},
		Networks: []RadioNetwork{
			{SSID: "lab", Security: SecurityWPA2, Passphrase: "lab-secret-1", RSSI: -50, Channel: 6, Internet: true},
			{SSID: "cafe", Security: SecurityOpen, RSSI: -60, Channel: 11, Internet: true},
			{SSID: "attic", Security: SecurityWPA3, Passphrase: "attic-secret-2", RSSI: -80, Channel: 1},
		},
	}
}

func writeRadio(t *testing.T, path string, r Radio) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func newRig(t *testing.T, r *Radio) *rig {
	t.Helper()
	dir := t.TempDir()
	g := &rig{t: t, clk: clock.NewFake(t0), store: &memStore{}, pub: &recorder{}, ap: &fakeAP{},
		ann: &fakeAnnouncer{}, logs: &bytes.Buffer{}, long: &longop.Lock{}, radio: filepath.Join(dir, "radio.json"), host: "holo-abcd"}
	if r != nil {
		writeRadio(t, g.radio, *r)
	}
	g.start()
	return g
}

func (g *rig) start() {
	g.t.Helper()
	n, err := New(Options{Clock: g.clk, Store: g.store, RadioPath: g.radio, Publisher: g.pub,
		Logger:        slog.New(slog.NewTextHandler(&lockedWriter{w: g.logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DefaultAPName: "holo-abcd", DefaultAPPassphrase: "0a1b2c3dabcd", Hostname: func() string { return g.host },
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, Long: g.long, AP: g.ap, Announcer: g.ann})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(n.Close)
	g.n = n
	g.mux = map[string]http.Handler{}
	for _, rt := range n.Routes() {
		g.mux[rt.Method+" "+rt.Path] = rt.Handler
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do serves one request through the route's handler.
func (g *rig) do(method, target, body string) *httptest.ResponseRecorder {
	g.t.Helper()
	path, _, _ := strings.Cut(target, "?")
	h, ok := g.mux[method+" "+path]
	if !ok {
		g.t.Fatalf("no route %s %s", method, path)
	}
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func (g *rig) state() State { return g.n.State() }

// advanceWait moves clk by d and waits until the AfterFunc callbacks
// that fell due (the cut-off, the access point's expiry) have returned,
// so that what they changed, or did not change, can be asserted.
func advanceWait(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.AdvanceWait(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond (AfterFunc callbacks run in their own goroutines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func joinedSSID(st State) string {
	if st.Joined == nil {
		return ""
	}
	return st.Joined.SSID
}

func TestFirstStartWritesDefaultRadioAndJoins(t *testing.T) {
	g := newRig(t, nil)
	b, err := os.ReadFile(g.radio)
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRadio(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, DefaultRadio()); diff != "" {
		t.Errorf("default radio file (-got +want):\n%s", diff)
	}
	st := g.state()
	want := State{STAEnabled: true,
		Joined: &Joined{SSID: "holofleet-lab", Security: "wpa2", RSSI: -48, Channel: 6, IP: "127.0.0.1", Internet: true},
		Known:  []Known{{SSID: "holofleet-lab", InRange: true}},
		AP:     AP{Name: "holo-abcd", Security: "wpa2"}}
	if diff := cmp.Diff(st, want); diff != "" {
		t.Errorf("state (-got +want):\n%s", diff)
	}
	if g.ap.log() != "" {
		t.Errorf("access point opened at a normal start: %s", g.ap.log())
	}
	if got := g.ann.String(); got != "announce holo-abcd 127.0.0.1 8080" {
		t.Errorf("mDNS: %s", got)
	}
}

func TestStartJoinsStrongestKnownWithRightPassphrase(t *testing.T) {
	r := labRadio()
	r.Provision = []string{"attic", "cafe"}
	g := newRig(t, &r)
	if got := joinedSSID(g.state()); got != "cafe" {
		t.Fatalf("joined %q, want cafe (stronger than attic)", got)
	}
	// A saved passphrase that no longer works is skipped.
	g.n.Close()
	r.Networks[1] = RadioNetwork{SSID: "cafe", Security: SecurityWPA2, Passphrase: "changed-pass", RSSI: -60, Channel: 11}
	writeRadio(t, g.radio, r)
	g.start()
	if got := joinedSSID(g.state()); got != "attic" {
		t.Fatalf("joined %q, want attic", got)
	}
}

func TestStartWithoutNetworkTurnsTimedAPOn(t *testing.T) {
	r := labRadio()
	r.Provision = nil
	g := newRig(t, &r)
	st := g.state()
	if st.Joined != nil || !st.AP.On || st.AP.OffInS == nil || *st.AP.OffInS != 300 {
		t.Fatalf("state: %+v", st)
	}
	if st.AP.IP != "127.0.0.1" || st.AP.Port == 0 || g.ap.log() != "open" {
		t.Fatalf("ap %+v, listener %s", st.AP, g.ap.log())
	}
	if info := g.n.AccessPoint(); !info.On || info.Name != "holo-abcd" || info.OffInS == nil || info.IP != "127.0.0.1" {
		t.Errorf("info ap: %+v", info)
	}
	g.clk.Advance(299*time.Second + 500*time.Millisecond)
	if st := g.state(); !st.AP.On || *st.AP.OffInS != 1 {
		t.Fatalf("after 299.5 s: %+v", st.AP)
	}
	g.clk.Advance(500 * time.Millisecond)
	waitFor(t, "the timed access point to go off", func() bool { return !g.state().AP.On })
	if st := g.state(); st.AP.OffInS != nil || st.AP.IP != "" || g.ap.log() != "open,close" {
		t.Fatalf("after 300 s: %+v, listener %s", st.AP, g.ap.log())
	}
	if !strings.Contains(g.pub.all(), `"ap":{"on":false`) {
		t.Errorf("no network event for the access point going off:\n%s", g.pub.all())
	}
}

func TestTimedAPOnTrueCountsDownAgainAndBootButton(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	g.n.PressBoot()
	if st := g.state(); !st.AP.On || *st.AP.OffInS != 300 {
		t.Fatalf("BOOT: %+v", st.AP)
	}
	g.clk.Advance(200 * time.Second)
	if rec := g.do("PATCH", "/network/ap", `{"on":true}`); rec.Code != 200 {
		t.Fatalf("on:true: %d %s", rec.Code, rec.Body)
	}
	if st := g.state(); *st.AP.OffInS != 300 {
		t.Fatalf("{on:true} on a timed access point: off_in_s %d, want 300 again", *st.AP.OffInS)
	}
	g.clk.Advance(200 * time.Second)
	g.n.PressBoot()
	if st := g.state(); *st.AP.OffInS != 300 {
		t.Fatalf("BOOT again: %+v", st.AP)
	}
	// Off, then on from the API: it stays.
	g.do("PATCH", "/network/ap", `{"on":false}`)
	g.clk.Advance(CutoffDelay)
	waitFor(t, "off", func() bool { return !g.state().AP.On })
	g.do("PATCH", "/network/ap", `{"on":true}`)
	if st := g.state(); !st.AP.On || st.AP.OffInS != nil {
		t.Fatalf("PATCH on: %+v", st.AP)
	}
	advanceWait(t, g.clk, time.Hour)
	if !g.state().AP.On {
		t.Fatal("an access point turned on by PATCH went off by itself")
	}
	// BOOT on an access point that stays leaves it staying.
	g.n.PressBoot()
	if st := g.state(); st.AP.OffInS != nil {
		t.Fatalf("BOOT made a staying access point timed: %+v", st.AP)
	}
}

func ptr[T any](v T) *T { return &v }

// TestCutoffRepliesFirst checks that every cutting change answers with the
// state it leads to while the board still is as before, and acts only
// CutoffDelay later.
func TestCutoffRepliesFirst(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(g *rig)
		method string
		target string
		body   string
		check  func(st State) bool
	}{
		{"join another", nil, "POST", "/network/join", `{"ssid":"cafe"}`,
			func(st State) bool { return joinedSSID(st) == "cafe" }},
		{"forget joined", nil, "DELETE", "/network/known?ssid=lab", "",
			func(st State) bool { return st.Joined == nil && len(st.Known) == 0 }},
		{"sta disabled", nil, "PATCH", "/network", `{"sta_enabled":false}`,
			func(st State) bool { return st.Joined == nil && !st.STAEnabled }},
		{"ap off", func(g *rig) { g.do("PATCH", "/network/ap", `{"on":true}`) }, "PATCH", "/network/ap", `{"on":false}`,
			func(st State) bool { return !st.AP.On }},
		{"ap name", func(g *rig) { g.do("PATCH", "/network/ap", `{"on":true}`) }, "PATCH", "/network/ap", `{"name":"stage-ap"}`,
			func(st State) bool { return st.AP.On && st.AP.Name == "stage-ap" }},
		{"ap passphrase", func(g *rig) { g.do("PATCH", "/network/ap", `{"on":true}`) }, "PATCH", "/network/ap", `{"passphrase":"new-ap-secret"}`,
			func(st State) bool { return st.AP.On }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, ptr(labRadio()))
			if tt.setup != nil {
				tt.setup(g)
			}
			before := g.state()
			apBefore := g.ap.log()
			rec := g.do(tt.method, tt.target, tt.body)
			if rec.Code != 200 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			var reply State
			if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
				t.Fatal(err)
			}
			if !tt.check(reply) {
				t.Errorf("reply does not show the coming state: %s", rec.Body)
			}
			if diff := cmp.Diff(g.state(), before); diff != "" {
				t.Fatalf("state changed before the cut-off delay (-got +want):\n%s", diff)
			}
			if g.ap.log() != apBefore {
				t.Fatalf("access point listener touched before the cut-off delay: %s", g.ap.log())
			}
			advanceWait(t, g.clk, CutoffDelay-time.Millisecond)
			if diff := cmp.Diff(g.state(), before); diff != "" {
				t.Fatalf("state changed before the cut-off delay (-got +want):\n%s", diff)
			}
			g.clk.Advance(time.Millisecond)
			waitFor(t, "the change", func() bool { return tt.check(g.state()) })
			switch tt.name {
			case "ap name", "ap passphrase":
				waitFor(t, "restart", func() bool { return g.ap.log() == apBefore+",close,open" })
			case "ap off":
				waitFor(t, "close", func() bool { return g.ap.log() == apBefore+",close" })
			case "sta disabled", "forget joined":
				waitFor(t, "mDNS withdrawn", func() bool { return strings.HasSuffix(g.ann.String(), ",withdraw") })
			}
		})
	}
}

func TestChangesWithoutCutoffAreImmediate(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	g.do("PATCH", "/network", `{"sta_enabled":false}`)
	g.clk.Advance(CutoffDelay)
	waitFor(t, "station off", func() bool { return g.state().Joined == nil })
	// Turning the station on joins at once.
	if rec := g.do("PATCH", "/network", `{"sta_enabled":true}`); rec.Code != 200 || joinedSSID(g.state()) != "lab" {
		t.Fatalf("%d %s; state %+v", rec.Code, rec.Body, g.state())
	}
	// Saving a network, forgetting one not joined and joining the joined
	// one change at once.
	if rec := g.do("PUT", "/network/known?ssid=cafe", ``); rec.Code != 200 || len(g.state().Known) != 2 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec := g.do("DELETE", "/network/known?ssid=cafe", ""); rec.Code != 200 || len(g.state().Known) != 1 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec := g.do("POST", "/network/join", `{"ssid":"lab"}`); rec.Code != 200 || joinedSSID(g.state()) != "lab" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// Joining when not joined at all cuts nobody off.
	g.do("PATCH", "/network", `{"sta_enabled":false}`)
	g.clk.Advance(CutoffDelay)
	waitFor(t, "station off", func() bool { return g.state().Joined == nil })
	if rec := g.do("POST", "/network/join", `{"ssid":"attic","passphrase":"attic-secret-2"}`); rec.Code != 200 || joinedSSID(g.state()) != "attic" || !g.state().STAEnabled {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if got := g.state().Known; got[len(got)-1].SSID != "attic" {
		t.Errorf("a joined network is saved as the newest: %+v", got)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	long := strings.Repeat("x", 33)
	tests := []struct {
		name, method, target, body string
		status                     int
		code                       string
	}{
		{"sta bad json", "PATCH", "/network", `{"sta_enabled":`, 400, "bad_json"},
		{"sta wrong type", "PATCH", "/network", `{"sta_enabled":"yes"}`, 400, "bad_request"},
		{"sta unknown field", "PATCH", "/network", `{"sta":true}`, 400, "bad_request"},
		{"sta no body", "PATCH", "/network", ``, 400, "bad_json"},
		{"known no ssid", "PUT", "/network/known", `{"passphrase":"12345678"}`, 400, "bad_request"},
		{"known empty ssid", "PUT", "/network/known?ssid=", `{"passphrase":"12345678"}`, 400, "bad_request"},
		{"known long ssid", "PUT", "/network/known?ssid=" + long, `{}`, 400, "bad_request"},
		{"known control ssid", "PUT", "/network/known?ssid=a%0Ab", `{}`, 400, "bad_request"},
		{"known short passphrase", "PUT", "/network/known?ssid=x", `{"passphrase":"1234567"}`, 400, "bad_request"},
		{"known long passphrase", "PUT", "/network/known?ssid=x", `{"passphrase":"` + strings.Repeat("p", 64) + `"}`, 400, "bad_request"},
		{"known non-ascii passphrase", "PUT", "/network/known?ssid=x", `{"passphrase":"pässphrase"}`, 400, "bad_request"},
		{"known wrong type", "PUT", "/network/known?ssid=x", `{"passphrase":12345678}`, 400, "bad_request"},
		{"known unknown field", "PUT", "/network/known?ssid=x", `{"pass":"12345678"}`, 400, "bad_request"},
		{"forget unknown", "DELETE", "/network/known?ssid=nope", ``, 404, "not_found"},
		{"forget no ssid", "DELETE", "/network/known", ``, 400, "bad_request"},
		{"join absent", "POST", "/network/join", `{"ssid":"far-away"}`, 404, "not_found"},
		{"join wrong passphrase", "POST", "/network/join", `{"ssid":"attic","passphrase":"not-the-one"}`, 400, "bad_request"},
		{"join no passphrase for wpa", "POST", "/network/join", `{"ssid":"attic"}`, 400, "bad_request"},
		{"join passphrase for open", "POST", "/network/join", `{"ssid":"cafe","passphrase":"12345678"}`, 400, "bad_request"},
		{"join empty ssid", "POST", "/network/join", `{"ssid":""}`, 400, "bad_request"},
		{"join no body", "POST", "/network/join", ``, 400, "bad_json"},
		{"join short passphrase", "POST", "/network/join", `{"ssid":"attic","passphrase":"short"}`, 400, "bad_request"},
		{"ap wrong type", "PATCH", "/network/ap", `{"on":1}`, 400, "bad_request"},
		{"ap name long", "PATCH", "/network/ap", `{"on":true,"name":"` + long + `"}`, 400, "bad_request"},
		{"ap name empty", "PATCH", "/network/ap", `{"name":""}`, 400, "bad_request"},
		{"ap name number", "PATCH", "/network/ap", `{"name":5}`, 400, "bad_request"},
		{"ap short passphrase", "PATCH", "/network/ap", `{"on":true,"passphrase":"short"}`, 400, "bad_request"},
		{"ap empty passphrase", "PATCH", "/network/ap", `{"passphrase":""}`, 400, "bad_request"},
		{"ap unknown field", "PATCH", "/network/ap", `{"ssid":"x"}`, 400, "bad_request"},
		{"ap trailing", "PATCH", "/network/ap", `{"on":true} {}`, 400, "bad_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, ptr(labRadio()))
			before, saved, events, ap := g.state(), g.store.raw(), g.pub.all(), g.ap.log()
			rec := g.do(tt.method, tt.target, tt.body)
			var e struct{ Error, Message string }
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != tt.status || e.Error != tt.code || e.Message == "" {
				t.Fatalf("got %d %s, want %d %s", rec.Code, rec.Body, tt.status, tt.code)
			}
			advanceWait(t, g.clk, time.Second)
			if diff := cmp.Diff(g.state(), before); diff != "" {
				t.Errorf("state changed (-got +want):\n%s", diff)
			}
			if g.store.raw() != saved || g.pub.all() != events || g.ap.log() != ap {
				t.Errorf("saved document, events or listener changed")
			}
		})
	}
}

func TestKnownLimitForgetsOldest(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	// lab is known from provisioning; 16 more push it out.
	for i := range MaxKnown {
		if rec := g.do("PUT", fmt.Sprintf("/network/known?ssid=net-%02d", i), `{"passphrase":"secret-pass-`+fmt.Sprint(i)+`"}`); rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	st := g.state()
	if len(st.Known) != MaxKnown || st.Known[0].SSID != "net-00" || st.Known[MaxKnown-1].SSID != "net-15" {
		t.Fatalf("known: %+v", st.Known)
	}
	// The joined network was forgotten as oldest but stays joined.
	if joinedSSID(st) != "lab" {
		t.Errorf("forgetting the oldest dropped the joined network: %+v", st.Joined)
	}
	// Saving a known one again makes it the newest; one more then forgets
	// net-01, not net-00.
	g.do("PUT", "/network/known?ssid=net-00", `{"passphrase":"secret-pass-0"}`)
	g.do("PUT", "/network/known?ssid=cafe", ``)
	st = g.state()
	var names []string
	for _, k := range st.Known {
		names = append(names, k.SSID)
	}
	want := []string{}
	for i := 2; i < MaxKnown; i++ {
		want = append(want, fmt.Sprintf("net-%02d", i))
	}
	want = append(want, "net-00", "cafe")
	if diff := cmp.Diff(names, want); diff != "" {
		t.Errorf("known (-got +want):\n%s", diff)
	}
	if k := st.Known[len(st.Known)-1]; !k.Open || !k.InRange {
		t.Errorf("cafe: %+v", k)
	}
	// Saved across a restart.
	g.n.Close()
	g.start()
	if diff := cmp.Diff(g.state().Known, st.Known); diff != "" {
		t.Errorf("known after restart (-got +want):\n%s", diff)
	}
}

func TestPassphrasesNeverLeave(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	secrets := []string{"lab-secret-1", "attic-secret-2", "my-saved-pass", "ap-pass-word", "0a1b2c3dabcd", "other-ap-pass"}
	var replies []string
	keep := func(rec *httptest.ResponseRecorder) { replies = append(replies, rec.Body.String()) }
	keep(g.do("PUT", "/network/known?ssid=somewhere", `{"passphrase":"my-saved-pass"}`))
	keep(g.do("POST", "/network/join", `{"ssid":"attic","passphrase":"attic-secret-2"}`))
	keep(g.do("POST", "/network/join", `{"ssid":"attic","passphrase":"wrong-pass-x"}`))
	keep(g.do("PATCH", "/network/ap", `{"on":true,"passphrase":"ap-pass-word"}`))
	keep(g.do("PATCH", "/network/ap", `{"passphrase":"other-ap-pass"}`))
	g.clk.Advance(time.Second)
	keep(g.do("GET", "/network", ""))
	scanned := make(chan *httptest.ResponseRecorder)
	go func() { scanned <- g.do("GET", "/network/scan", "") }()
	if !g.clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("scan did not start")
	}
	g.clk.Advance(ScanTime)
	keep(<-scanned)
	text := strings.Join(replies, "\n") + g.pub.all() + g.logs.String()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("passphrase %q appears in a reply, event or log:\n%s", s, text)
		}
	}
	if !strings.Contains(g.store.raw(), "my-saved-pass") {
		t.Error("passphrase not saved")
	}
}

func TestRadioFileChangesWhileRunning(t *testing.T) {
	r := labRadio()
	r.Provision = []string{"lab", "cafe"}
	g := newRig(t, &r)
	ctx, cancel := contextWithCancel()
	done := make(chan struct{})
	go func() { _ = g.n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if !g.clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("poll ticker not armed")
	}
	// lab grows weaker: followed.
	r.Networks[0].RSSI = -70
	writeRadio(t, g.radio, r)
	bump(t, g.radio, 1)
	g.clk.Advance(RadioPoll)
	waitFor(t, "rssi update", func() bool { st := g.state(); return st.Joined != nil && st.Joined.RSSI == -70 })
	// lab vanishes: the station joins cafe.
	r.Networks = r.Networks[1:]
	writeRadio(t, g.radio, r)
	bump(t, g.radio, 2)
	g.clk.Advance(RadioPoll)
	waitFor(t, "join cafe", func() bool { return joinedSSID(g.state()) == "cafe" })
	if st := g.state(); st.Known[0].InRange {
		t.Errorf("lab still in range: %+v", st.Known)
	}
	// A broken file keeps the last environment.
	if err := os.WriteFile(g.radio, []byte(`{"networks":[{"ssid":""}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bump(t, g.radio, 3)
	if g.n.CheckRadio() {
		t.Fatal("a broken radio file was taken")
	}
	if joinedSSID(g.state()) != "cafe" {
		t.Fatal("a broken radio file changed the state")
	}
	// Nothing known in range: not joined, and no access point (only a
	// start turns it on by itself).
	writeRadio(t, g.radio, Radio{Networks: []RadioNetwork{{SSID: "x", Security: SecurityOpen, RSSI: -30, Channel: 3}}})
	bump(t, g.radio, 4)
	if !g.n.CheckRadio() {
		t.Fatal("not taken")
	}
	if st := g.state(); st.Joined != nil || st.AP.On {
		t.Fatalf("state: %+v", st)
	}
}

// bump gives the file a distinct modification time (file systems with a
// coarse clock would otherwise hide a quick rewrite of the same size).
func bump(t *testing.T, path string, n int) {
	t.Helper()
	mt := t0.Add(time.Duration(n) * time.Hour)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

func TestScan(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	release, err := g.long.TryAcquire("an upload")
	if err != nil {
		t.Fatal(err)
	}
	if rec := g.do("GET", "/network/scan", ""); rec.Code != 409 || !strings.Contains(rec.Body.String(), `"busy"`) {
		t.Fatalf("scan during a long operation: %d %s", rec.Code, rec.Body)
	}
	release()
	got := make(chan *httptest.ResponseRecorder)
	go func() { got <- g.do("GET", "/network/scan", "") }()
	if !g.clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("scan did not start")
	}
	if g.long.Holder() == "" {
		t.Fatal("a scan does not hold the long-operation lock")
	}
	g.clk.Advance(ScanTime)
	rec := <-got
	var res ScanResult
	if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	want := ScanResult{Networks: []Scanned{
		{SSID: "lab", RSSI: -50, Channel: 6, Security: "wpa2", Known: true},
		{SSID: "cafe", RSSI: -60, Channel: 11, Security: "open"},
		{SSID: "attic", RSSI: -80, Channel: 1, Security: "wpa3"},
	}}
	if diff := cmp.Diff(res, want); diff != "" {
		t.Errorf("scan (-got +want):\n%s", diff)
	}
	if g.long.Holder() != "" {
		t.Error("lock kept after the scan")
	}
}

func TestHostnameChangeReannounces(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	g.host = "stage-left"
	g.n.HostnameChanged("stage-left")
	if got := g.ann.String(); got != "announce holo-abcd 127.0.0.1 8080,announce stage-left 127.0.0.1 8080" {
		t.Errorf("mDNS: %s", got)
	}
}

func TestAPNameAndPassphraseSavedAndNullRestores(t *testing.T) {
	g := newRig(t, ptr(labRadio()))
	g.do("PATCH", "/network/ap", `{"name":"stage-ap","passphrase":"stage-secret"}`)
	if st := g.state(); st.AP.Name != "stage-ap" || st.AP.On {
		t.Fatalf("ap: %+v", st.AP)
	}
	g.n.Close()
	g.start()
	if st := g.state(); st.AP.Name != "stage-ap" {
		t.Fatalf("after restart: %+v", st.AP)
	}
	g.do("PATCH", "/network/ap", `{"name":null,"passphrase":null}`)
	if st := g.state(); st.AP.Name != "holo-abcd" || strings.Contains(g.store.raw(), "stage-secret") {
		t.Fatalf("null: %+v %s", st.AP, g.store.raw())
	}
}

func TestAPListenerMarksRequests(t *testing.T) {
	var opened []net.Addr
	l := &APListener{Addr: "127.0.0.1:0", OnOpen: func(a net.Addr) { opened = append(opened, a) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, ViaAP(r)) })}
	addr, err := l.Open()
	if err != nil {
		t.Fatal(err)
	}
	get := func() (string, error) {
		resp, err := http.Get("http://" + addr.String() + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		return b.String(), err
	}
	if got, err := get(); err != nil || got != "true" {
		t.Fatalf("via ap: %q %v", got, err)
	}
	l.Close()
	http.DefaultClient.CloseIdleConnections()
	if _, err := get(); err == nil {
		t.Fatal("closed listener still serves")
	}
	again, err := l.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if again.String() != addr.String() || len(opened) != 2 {
		t.Errorf("reopened on %s, first %s; told %v", again, addr, opened)
	}
	if ViaAP(httptest.NewRequest("GET", "/", nil)) {
		t.Error("a plain request is via ap")
	}
}

func FuzzDecodeRadio(f *testing.F) {
	b, _ := json.Marshal(DefaultRadio())
	f.Add(b)
	b, _ = json.Marshal(labRadio())
	f.Add(b)
	f.Add([]byte(`{"networks":[{"ssid":"","security":"wep"}]}`))
	f.Add([]byte(`{"networks":null} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRadio(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeRadio(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if diff := cmp.Diff(r2, r, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-got +want):\n%s", diff)
		}
	})
}

func BenchmarkGetNetwork(b *testing.B) {
	dir := b.TempDir()
	n, err := New(Options{Store: &memStore{}, RadioPath: filepath.Join(dir, "radio.json"),
		DefaultAPName: "holo-abcd", DefaultAPPassphrase: "0a1b2c3dabcd"})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	var h http.Handler
	for _, rt := range n.Routes() {
		if rt.Method == "GET" && rt.Path == "/network" {
			h = rt.Handler
		}
	}
	req := httptest.NewRequest("GET", "/network", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
	}
}

func BenchmarkSaveKnown(b *testing.B) {
	dir := b.TempDir()
	n, err := New(Options{Store: &memStore{}, RadioPath: filepath.Join(dir, "radio.json"),
		DefaultAPName: "holo-abcd", DefaultAPPassphrase: "0a1b2c3dabcd"})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := n.SaveKnown(fmt.Sprintf("net-%d", i%40), "bench-passphrase"); err != nil {
			b.Fatal(err)
		}
	}
}
