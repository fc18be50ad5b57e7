package events

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/clock"
)

func newServer(t testing.TB, opts Options) (*Hub, *clock.Fake, *httptest.Server) {
	t.Helper()
	h, clk := newHub(t, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close) // runs first: ends the streams so srv.Close does not wait
	return h, clk, srv
}

type stream struct {
	resp *http.Response
	r    *bufio.Reader
	stop context.CancelFunc
}

// openStream opens GET /events<query> as an SSE stream with extra headers.
func openStream(t testing.TB, srv *httptest.Server, query string, hdr ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{resp: resp, r: bufio.NewReader(resp.Body), stop: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *stream) close() { s.stop(); s.resp.Body.Close() }

// frame reads up to and including the next blank line. A 5 s real-time
// guard closes the body so a missing frame fails instead of hanging.
func (s *stream) frame(t testing.TB) string {
	t.Helper()
	guard := time.AfterFunc(5*time.Second, func() { s.resp.Body.Close() })
	defer guard.Stop()
	var b strings.Builder
	for {
		line, err := s.r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("reading frame after %q: %v", b.String(), err)
		}
		if line == "\n" {
			return b.String()
		}
	}
}

func TestSSEFraming(t *testing.T) {
	h, clk, srv := newServer(t, Options{})
	s := openStream(t, srv, "")
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", s.resp.StatusCode)
	}
	gotHdr := map[string]string{
		"Content-Type":  s.resp.Header.Get("Content-Type"),
		"Cache-Control": s.resp.Header.Get("Cache-Control"),
	}
	if diff := cmp.Diff(gotHdr, map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}); diff != "" {
		t.Errorf("headers (-got +want)\n%s", diff)
	}
	if got := s.frame(t); got != "retry: 3000\n\n" {
		t.Fatalf("first frame %q", got)
	}
	h.SetState("leds", map[string]int{"brightness": 30})
	if diff := cmp.Diff(s.frame(t), "event: leds\ndata: {\"event\":\"leds\",\"state\":{\"brightness\":30}}\n\n"); diff != "" {
		t.Errorf("state frame (-got +want)\n%s", diff)
	}
	clk.Advance(2 * time.Second)
	h.Emit("touch", map[string]any{"action": "down", "x": 10, "y": 20})
	want := "event: touch\ndata: {\"event\":\"touch\",\"seq\":1,\"t_ms\":2000,\"action\":\"down\",\"x\":10,\"y\":20}\nid: 1\n\n"
	if diff := cmp.Diff(s.frame(t), want); diff != "" {
		t.Errorf("happening frame (-got +want)\n%s", diff)
	}
	if !clk.WaitForWaiters(1, 30*time.Second) {
		t.Fatal("heartbeat ticker not armed")
	}
	clk.Advance(DefaultHeartbeat)
	if got := s.frame(t); got != ": keep-alive\n\n" {
		t.Errorf("heartbeat %q", got)
	}
	h.Close()
	if _, err := s.r.ReadString('\n'); err != io.EOF {
		t.Errorf("after Close: %v; want EOF", err)
	}
}

func TestSSEKinds(t *testing.T) {
	h, _, srv := newServer(t, Options{})
	s := openStream(t, srv, "?kinds=touch,leds")
	s.frame(t)
	h.SetState("screen", 1)
	h.Emit("clip_ended", nil)
	h.Emit("touch", nil)
	h.SetState("leds", 2)
	var kinds []string
	for range 2 {
		f := s.frame(t)
		kinds = append(kinds, strings.TrimPrefix(strings.SplitN(f, "\n", 2)[0], "event: "))
	}
	if diff := cmp.Diff(kinds, []string{"touch", "leds"}); diff != "" {
		t.Errorf("(-got +want)\n%s", diff)
	}
}

func errorBody(t testing.TB, resp *http.Response) (int, string, string) {
	t.Helper()
	defer resp.Body.Close()
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("error body: %v", err)
	}
	if e.Message == "" {
		t.Errorf("no message")
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), e.Error
}

func TestSSEBusy(t *testing.T) {
	h, _, srv := newServer(t, Options{})
	var open []*stream
	for range DefaultMaxStreams {
		s := openStream(t, srv, "")
		s.frame(t)
		open = append(open, s)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	type reply struct {
		Status      int
		ContentType string
		Code        string
	}
	var got reply
	got.Status, got.ContentType, got.Code = errorBody(t, resp)
	if diff := cmp.Diff(got, reply{503, "application/json", "busy"}); diff != "" {
		t.Errorf("4th stream (-got +want)\n%s", diff)
	}
	// The JSON form is not a stream and is still served.
	if r := getJSON(t, srv, ""); r.Seq != 0 {
		t.Errorf("JSON form seq %d", r.Seq)
	}
	// One stream ends: its slot is free again.
	open[0].close()
	deadline := time.Now().Add(30 * time.Second)
	for h.Streams() != DefaultMaxStreams-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams after a client left", h.Streams())
		}
		time.Sleep(time.Millisecond)
	}
	s := openStream(t, srv, "")
	if got := s.frame(t); got != "retry: 3000\n\n" {
		t.Errorf("stream after a slot freed: %q", got)
	}
}

// TestSSEReservedSlot: with a Trusted function (the board has a
// password), clients that are not trusted together get at most
// MaxStreams-1 streams; the last slot is kept for a trusted client (the
// gateway, which sends the password), and a trusted client may take any
// free slot.
func TestSSEReservedSlot(t *testing.T) {
	h, _, srv := newServer(t, Options{Trusted: func(r *http.Request) bool { return r.Header.Get("X-Test-Trusted") == "yes" }})
	status := func(hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		st, _, code := errorBody(t, resp)
		return st, code
	}
	var strangers []*stream
	for range DefaultMaxStreams - 1 {
		s := openStream(t, srv, "")
		s.frame(t)
		strangers = append(strangers, s)
	}
	if st, code := status(); st != 503 || code != "busy" {
		t.Fatalf("a third stranger's stream: %d %s, want 503 busy", st, code)
	}
	gw := openStream(t, srv, "", "X-Test-Trusted", "yes")
	if got := gw.frame(t); got != "retry: 3000\n\n" {
		t.Fatalf("trusted stream: %q", got)
	}
	if st, code := status("X-Test-Trusted", "yes"); st != 503 || code != "busy" {
		t.Errorf("a fourth stream: %d %s, want 503 busy", st, code)
	}
	// The gateway leaves: a stranger still cannot take its slot, but once
	// a stranger leaves, another stranger can.
	gw.close()
	waitStreams(t, h, DefaultMaxStreams-1)
	if st, code := status(); st != 503 || code != "busy" {
		t.Errorf("a stranger in the kept slot: %d %s, want 503 busy", st, code)
	}
	strangers[0].close()
	waitStreams(t, h, DefaultMaxStreams-2)
	openStream(t, srv, "").frame(t)
	// Trusted clients may fill every slot.
	for _, s := range strangers[1:] {
		s.close()
	}
	waitStreams(t, h, 1)
	for range DefaultMaxStreams - 1 {
		openStream(t, srv, "", "X-Test-Trusted", "yes").frame(t)
	}
}

// TestSSENoReserveWithoutTrusted: without a Trusted function (no
// password set) every slot is open to anyone.
func TestSSENoReserveWithoutTrusted(t *testing.T) {
	_, _, srv := newServer(t, Options{})
	for range DefaultMaxStreams {
		openStream(t, srv, "").frame(t)
	}
}

func waitStreams(t *testing.T, h *Hub, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.Streams() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams, want %d", h.Streams(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func getJSON(t testing.TB, srv *httptest.Server, query string, hdr ...string) Reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events"+query, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s: status %d, %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var r Reply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestJSONForm(t *testing.T) {
	h, _, srv := newServer(t, Options{})
	if diff := cmp.Diff(getJSON(t, srv, ""), Reply{Seq: 0, Lost: 0, Events: []json.RawMessage{}}); diff != "" {
		t.Errorf("empty (-got +want)\n%s", diff)
	}
	for n := 1; n <= 40; n++ {
		if n%2 == 0 {
			h.Emit("clip_ended", map[string]any{"path": "/a.gif", "finished": true})
		} else {
			h.Emit("touch", map[string]any{"action": "up", "x": n, "y": 0})
		}
	}
	data := func(n int) string {
		if n%2 == 0 {
			return fmt.Sprintf(`{"event":"clip_ended","seq":%d,"t_ms":0,"finished":true,"path":"/a.gif"}`, n)
		}
		return fmt.Sprintf(`{"event":"touch","seq":%d,"t_ms":0,"action":"up","x":%d,"y":0}`, n, n)
	}
	type page struct {
		Seq    uint16
		Lost   int
		Events []string
	}
	want := func(lost int, ns ...int) page {
		p := page{Seq: 40, Lost: lost, Events: []string{}}
		for _, n := range ns {
			p.Events = append(p.Events, data(n))
		}
		return p
	}
	rng := func(from, to, step int) []int {
		var out []int
		for n := from; n <= to; n += step {
			out = append(out, n)
		}
		return out
	}
	tests := []struct {
		name  string
		query string
		hdr   []string
		want  page
	}{
		{"no after: every kept one", "", nil, want(0, rng(9, 40, 1)...)},
		{"after 0", "?after=0", nil, want(8, rng(9, 40, 1)...)},
		{"after 5", "?after=5", nil, want(3, rng(9, 40, 1)...)},
		{"after 37", "?after=37", nil, want(0, 38, 39, 40)},
		{"up to date", "?after=40", nil, want(0)},
		{"kinds", "?after=30&kinds=clip_ended", nil, want(0, 32, 34, 36, 38, 40)},
		{"kinds twice", "?after=34&kinds=touch&kinds=clip_ended", nil, want(0, 35, 36, 37, 38, 39, 40)},
		{"Accept json", "?after=38", []string{"Accept", "application/json"}, want(0, 39, 40)},
		{"Accept any", "?after=38", []string{"Accept", "*/*"}, want(0, 39, 40)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := getJSON(t, srv, tt.query, tt.hdr...)
			got := page{Seq: r.Seq, Lost: r.Lost, Events: []string{}}
			for _, e := range r.Events {
				got.Events = append(got.Events, string(e))
			}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

func TestBadQuery(t *testing.T) {
	_, _, srv := newServer(t, Options{})
	tests := []struct {
		name, query string
		hdr         []string
	}{
		{"after not a number", "?after=x", nil},
		{"after empty", "?after=", nil},
		{"after negative", "?after=-1", nil},
		{"after too big", "?after=65536", nil},
		{"kinds capital", "?kinds=Touch", nil},
		{"kinds empty name", "?kinds=touch,,leds", nil},
		{"Last-Event-ID bad", "", []string{"Last-Event-ID", "abc"}},
		{"stream with bad kinds", "?kinds=a%3Bb", []string{"Accept", "text/event-stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events"+tt.query, nil)
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				req.Header.Set(tt.hdr[i], tt.hdr[i+1])
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			status, _, code := errorBody(t, resp)
			if status != 400 || code != "bad_request" {
				t.Errorf("got %d %s; want 400 bad_request", status, code)
			}
		})
	}
}

func TestSSEReplay(t *testing.T) {
	h, _, srv := newServer(t, Options{MaxStreams: 4})
	for range 5 {
		h.Emit("touch", nil)
	}
	ids := func(s *stream, n int) []string {
		t.Helper()
		if got := s.frame(t); got != "retry: 3000\n\n" {
			t.Fatalf("first frame %q", got)
		}
		var out []string
		for range n {
			lines := strings.Split(s.frame(t), "\n")
			out = append(out, lines[2])
		}
		return out
	}
	tests := []struct {
		name  string
		query string
		hdr   []string
		want  []string
	}{
		{"Last-Event-ID", "", []string{"Last-Event-ID", "3"}, []string{"id: 4", "id: 5", "id: 6"}},
		{"after", "?after=2", nil, []string{"id: 3", "id: 4", "id: 5", "id: 6"}},
		{"Last-Event-ID wins over after", "?after=1", []string{"Last-Event-ID", "4"}, []string{"id: 5", "id: 6"}},
		{"no replay without either", "", nil, []string{"id: 6"}},
	}
	var streams []*stream
	for _, tt := range tests {
		streams = append(streams, openStream(t, srv, tt.query, tt.hdr...))
	}
	// Do returns once the headers came, and the handler subscribes before
	// it writes them: every stream will see the next happening.
	h.Emit("touch", nil)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(ids(streams[i], len(tt.want)), tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
		streams[i].close()
	}
}

// A client that stops reading neither blocks Emit nor the other clients,
// and loses its slot once its writes time out.
func TestSlowClientDoesNotBlock(t *testing.T) {
	h, _, srv := newServer(t, Options{WriteTimeout: 2 * time.Second})

	stuck, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprintf(stuck, "GET /events HTTP/1.1\r\nHost: board\r\nAccept: text/event-stream\r\n\r\n")

	good := openStream(t, srv, "")
	good.frame(t)
	deadline := time.Now().Add(30 * time.Second)
	for h.Streams() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("streams not open")
		}
		time.Sleep(time.Millisecond)
	}
	// The good client reads on its own goroutine, as a browser would.
	ids := make(chan string, 1024)
	go func() {
		defer close(ids)
		for {
			line, err := good.r.ReadString('\n')
			if err != nil {
				return
			}
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids <- strings.TrimSpace(id)
			}
		}
	}()

	pad := strings.Repeat("x", 4096)
	var emitting time.Duration
	const batches, per = 50, 100
	for range batches {
		start := time.Now()
		var last Happening
		for range per {
			last = h.Emit("clip_ended", map[string]string{"path": pad})
		}
		emitting += time.Since(start)
		// Let the good client catch up so only the stuck one falls behind.
		want := strconv.Itoa(int(last.Seq))
		for id := range ids {
			if id == want {
				break
			}
		}
		if t.Failed() {
			return
		}
	}
	select {
	case _, ok := <-ids:
		if !ok {
			t.Fatal("the good client's stream ended")
		}
	default:
	}
	t.Logf("%d Emits of 4 KiB took %v in all", batches*per, emitting)
	// A hub that waited for the stuck client would need a write timeout per
	// batch written (about 1250 x 2 s); 10 s is far below that.
	if emitting > 10*time.Second {
		t.Errorf("Emit took %v for %d happenings; blocked by a client?", emitting, batches*per)
	}
	deadline = time.Now().Add(30 * time.Second)
	for h.Streams() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams; the stuck client still holds its slot", h.Streams())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAcceptsStream(t *testing.T) {
	tests := []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"text/event-stream"}, true},
		{[]string{"Text/Event-Stream"}, true},
		{[]string{"application/json, text/event-stream;q=0.5"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"*/*"}, false},
		{[]string{"text/*"}, false},
		{[]string{"text/event-streamx"}, false},
		{[]string{";;;"}, false},
	}
	for _, tt := range tests {
		if got := acceptsStream(tt.accept); got != tt.want {
			t.Errorf("acceptsStream(%q) = %v; want %v", tt.accept, got, tt.want)
		}
	}
}

func TestRoute(t *testing.T) {
	h, _ := newHub(t, Options{})
	r := h.Route()
	if r.Method != http.MethodGet || r.Path != "/events" || r.Handler == nil || !r.Link {
		t.Errorf("Route = %+v", r)
	}
}
