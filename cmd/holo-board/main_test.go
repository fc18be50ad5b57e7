package main

import (
	"bufio"
	"encoding/base64"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testlevel"
	"github.com/holofleet/holofleet/firmware/boardtest"
)

// parallel is how many tests of this package run at once unless -parallel
// says otherwise: they spend their time waiting on holo-board processes
// (starting, restarting, serving), not computing, so go test's default of
// GOMAXPROCS would leave a two-core machine mostly idle.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	if err := testlevel.Parallel(parallel); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func TestInfo(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	r := b.Do("GET", "/info", nil)
	if r.Status != 200 {
		t.Fatalf("GET /info: %d %s", r.Status, r.Body)
	}
	info := r.Map(t)
	if info["api"] != float64(1) || info["chip"] != "holo-sim" || info["via"] != "sta" || info["auth"] != false {
		t.Errorf("info: %s", r.Body)
	}
	host, _ := info["hostname"].(string)
	if !strings.HasPrefix(host, "holo-") || len(host) != 9 {
		t.Errorf("default hostname %q is not holo-xxxx", host)
	}
	fw := info["firmware"].(map[string]any)
	for _, k := range []string{"project", "version", "date", "time", "idf", "elf_sha256"} {
		if s, _ := fw[k].(string); s == "" {
			t.Errorf("firmware.%s empty", k)
		}
	}
}

func TestHostnameKeptAndOverridden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := boardtest.Start(t, dir)
	first := b.Do("GET", "/info", nil).Map(t)["hostname"]
	b.Stop()
	b = boardtest.Start(t, dir)
	if again := b.Do("GET", "/info", nil).Map(t)["hostname"]; again != first {
		t.Fatalf("hostname changed across restarts: %v then %v", first, again)
	}
	b.Stop()
	b = boardtest.Start(t, dir, "--hostname", "stage-left")
	if h := b.Do("GET", "/info", nil).Map(t)["hostname"]; h != "stage-left" {
		t.Fatalf("--hostname: got %v", h)
	}
}

func TestHTTPRules(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	hostname := b.Do("GET", "/info", nil).Map(t)["hostname"].(string)
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		opts   []boardtest.Option
		status int
		code   string
	}{
		{"unknown endpoint", "GET", "/nope", nil, nil, 404, "not_found"},
		{"unknown method", "DELETE", "/info", nil, nil, 404, "not_found"},
		{"bad host", "PATCH", "/settings", `{}`, []boardtest.Option{boardtest.Host("evil.example")}, 403, "forbidden_host"},
		{"hostname host", "PATCH", "/settings", `{}`, []boardtest.Option{func(r *http.Request) { r.Host = hostname }}, 200, ""},
		{"hostname.local host", "PATCH", "/settings", `{}`, []boardtest.Option{func(r *http.Request) { r.Host = hostname + ".local:80" }}, 200, ""},
		{"no content type", "PATCH", "/settings", `{}`, []boardtest.Option{boardtest.NoContentType()}, 415, "content_type"},
		{"text content type", "POST", "/restart", `{}`, []boardtest.Option{boardtest.Header("Content-Type", "text/plain")}, 415, "content_type"},
		{"bad json", "PATCH", "/settings", `{"screen":`, nil, 400, "bad_json"},
		{"not an object", "PATCH", "/settings", `[1]`, nil, 400, "bad_request"},
		{"unknown field", "PATCH", "/settings", `{"volume":3}`, nil, 400, "bad_request"},
		{"wrong type", "PATCH", "/settings", `{"screen":{"backlight":"high"}}`, nil, 400, "bad_request"},
		{"out of range", "PATCH", "/settings", `{"screen":{"backlight":101}}`, nil, 400, "bad_request"},
		{"fraction for integer", "PATCH", "/settings", `{"leds":{"count":2.5}}`, nil, 400, "bad_request"},
		{"huge body", "PATCH", "/settings", `{"boot_scene":"` + strings.Repeat("x", 40000) + `"}`, nil, 413, "too_large"},
		{"restart too soon", "POST", "/restart", `{"delay_ms":199}`, nil, 400, "bad_request"},
		{"restart too late", "POST", "/restart", `{"delay_ms":60001}`, nil, 400, "bad_request"},
		{"restart not integer", "POST", "/restart", `{"delay_ms":"soon"}`, nil, 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.Do("GET", "/settings", nil).Body
			r := b.Do(tt.method, tt.path, tt.body, tt.opts...)
			if r.Status != tt.status || r.ErrorCode() != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tt.status, tt.code)
			}
			if r.Status >= 400 {
				if r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("error Content-Type %q", r.Header.Get("Content-Type"))
				}
				if m := r.Map(t); m["message"] == "" {
					t.Errorf("error without message: %s", r.Body)
				}
				if after := b.Do("GET", "/settings", nil).Body; string(after) != string(before) {
					t.Errorf("state changed by a refused request:\n%s\n%s", before, after)
				}
			}
		})
	}
}

func TestPassword(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	if r := b.Do("PATCH", "/web", `{"password":"s3cret"}`); r.Status != 200 || r.Map(t)["password_set"] != true {
		t.Fatalf("set password: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(b.Do("GET", "/web", nil, boardtest.Header("Authorization", "Bearer s3cret")).Body), "s3cret") {
		t.Fatal("password returned")
	}
	bearer := boardtest.Header("Authorization", "Bearer s3cret")
	basic := boardtest.Header("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("anyone:s3cret")))
	wrong := boardtest.Header("Authorization", "Bearer nope")
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		opt    []boardtest.Option
		status int
	}{
		{"open GET", "GET", "/settings", nil, nil, 200},
		{"info reports auth", "GET", "/info", nil, nil, 200},
		{"web needs password", "GET", "/web", nil, nil, 401},
		{"web with bearer", "GET", "/web", nil, []boardtest.Option{bearer}, 200},
		{"change without", "PATCH", "/settings", `{}`, nil, 401},
		{"change wrong", "PATCH", "/settings", `{}`, []boardtest.Option{wrong}, 401},
		{"change bearer", "PATCH", "/settings", `{}`, []boardtest.Option{bearer}, 200},
		{"change basic", "PATCH", "/settings", `{}`, []boardtest.Option{basic}, 200},
		{"host checked before password", "PATCH", "/settings", `{}`, []boardtest.Option{boardtest.Host("evil.example")}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.Do(tc.method, tc.path, tc.body, tc.opt...)
			if r.Status != tc.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Body, tc.status)
			}
			if r.Status == 401 && (r.ErrorCode() != "auth_required" || r.Header.Get("WWW-Authenticate") != "Bearer") {
				t.Fatalf("401 without auth_required / WWW-Authenticate: %v %s", r.Header, r.Body)
			}
		})
	}
	if b.Do("GET", "/info", nil).Map(t)["auth"] != true {
		t.Fatal("info.auth false with a password set")
	}
	// Kept across a restart, cleared with null.
	b.Stop()
	b = boardtest.Start(t, b.DataDir)
	if r := b.Do("PATCH", "/web", `{"password":null}`, bearer); r.Status != 200 || r.Map(t)["password_set"] != false {
		t.Fatalf("clear password: %d %s", r.Status, r.Body)
	}
	if r := b.Do("PATCH", "/settings", `{}`); r.Status != 200 {
		t.Fatalf("after clearing: %d", r.Status)
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	if r := b.Do("PATCH", "/web", `{"trusted_sites":["https://*.example.com","http://show.local:8080"]}`); r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", b.URL+"/api/v1/settings", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "PATCH")
		req.Header.Set("Access-Control-Request-Headers", "content-type,authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"https://app.example.com", true},
		{"https://a.b.example.com", true},
		{"https://example.com", false},
		{"http://app.example.com", false},
		{"http://show.local:8080", true},
		{"http://show.local", false},
		{"https://evil.com", false},
	} {
		resp := preflight(tc.origin)
		got := resp.Header.Get("Access-Control-Allow-Origin") == tc.origin
		if got != tc.ok || resp.StatusCode != 204 {
			t.Errorf("preflight from %s: status %d allow-origin %q, want allowed=%v", tc.origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), tc.ok)
		}
		if tc.ok && !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "PATCH") {
			t.Errorf("preflight methods: %q", resp.Header.Get("Access-Control-Allow-Methods"))
		}
	}
	r := b.Do("GET", "/info", nil, boardtest.Header("Origin", "https://app.example.com"))
	if r.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("simple GET from trusted origin lacks allow-origin")
	}
	if r := b.Do("PATCH", "/web", `{"trusted_sites":["ftp://x"]}`); r.Status != 400 {
		t.Errorf("bad origin accepted: %d", r.Status)
	}
	if r := b.Do("PATCH", "/web", `{"trusted_sites":null}`); r.Status != 200 || !strings.Contains(string(r.Body), "holofleet.dev") {
		t.Errorf("null did not restore defaults: %s", r.Body)
	}
}

func TestSettingsPersistAndRestart(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	r := b.Do("PATCH", "/settings", `{"screen":{"backlight":55},"leds":{"count":40}}`)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	m := r.Map(t)
	if m["restart_required"] != true {
		t.Fatalf("restart_required missing after leds.count change: %s", r.Body)
	}
	if r := b.Do("POST", "/restart", `{"delay_ms":200}`); r.Status != 202 || r.Map(t)["restart_in_ms"] != float64(200) {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	// While it restarts the board may answer 503 restarting or drop the
	// connection: a client tries again.
	boardtest.WaitFor(t, 60*time.Second, "restart", func() bool {
		m, ok := get(b, "/settings")
		_, pending := m["restart_required"]
		return ok && !pending
	})
	m = b.Do("GET", "/settings", nil).Map(t)
	if m["screen"].(map[string]any)["backlight"] != float64(55) || m["leds"].(map[string]any)["count"] != float64(40) {
		t.Fatalf("settings lost across restart: %v", m)
	}
	if r := b.Do("POST", "/restart", nil, boardtest.Header("Content-Type", "application/json")); r.Status != 202 || r.Map(t)["restart_in_ms"] != float64(500) {
		t.Fatalf("default restart delay: %d %s", r.Status, r.Body)
	}
	r = b.Do("DELETE", "/settings", nil)
	if r.Status != 200 || r.Map(t)["screen"].(map[string]any)["backlight"] != float64(80) {
		t.Fatalf("DELETE /settings: %d %s", r.Status, r.Body)
	}
}

// TestKillMidWrite kills the board with SIGKILL while a client keeps
// changing settings, then checks the board starts and its saved settings
// are one of the values written, not torn or lost. Each round kills after
// a random number of acknowledged writes, with the next one in flight.
func TestKillMidWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	rounds := testlevel.Pick(2, 10)
	b := boardtest.Start(t, dir)
	for round := range rounds {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		acked := make(chan int, 10000)
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 60 * time.Second}
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"screen":{"backlight":%d},"leds":{"brightness":%d}}`, i%100+1, i%100+1)
				req, _ := http.NewRequest("PATCH", b.URL+"/api/v1/settings", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					acked <- i%100 + 1
				}
			}
		}()
		// Kill once k writes are acknowledged: the writer is then busy
		// with the next one (the channel is only read after the kill, so
		// its length is what was acknowledged).
		k := 1 + rng.IntN(40)
		boardtest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d acknowledged writes", k), func() bool { return len(acked) >= k })
		b.Kill()
		close(stop)
		wg.Wait()
		close(acked)
		last := -1
		for v := range acked {
			last = v
		}
		b = boardtest.Start(t, dir)
		m := b.Do("GET", "/settings", nil).Map(t)
		bl := m["screen"].(map[string]any)["backlight"]
		br := m["leds"].(map[string]any)["brightness"]
		if bl != br {
			t.Fatalf("round %d: torn settings backlight=%v brightness=%v", round, bl, br)
		}
		if bl != float64(last) && bl != float64(last%100+1) {
			t.Fatalf("round %d (killed after %d writes): saved %v, last acknowledged %d", round, k, bl, last)
		}
	}
}

func TestEventsSSE(t *testing.T) {
	t.Parallel()
	b := boardtest.Start(t, "")
	req, _ := http.NewRequest("GET", b.URL+"/api/v1/events?kinds=settings", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(resp.Body)
	first, _ := rd.ReadString('\n')
	if first != "retry: 3000\n" {
		t.Fatalf("first line %q", first)
	}
	b.Do("PATCH", "/settings", `{"screen":{"backlight":42}}`)
	deadline := time.Now().Add(30 * time.Second)
	var lines []string
	for time.Now().Before(deadline) {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
		if strings.HasPrefix(line, "data:") && strings.Contains(line, `"backlight":42`) {
			if !strings.Contains(strings.Join(lines, ""), "event: settings\n") {
				t.Fatalf("no event line: %q", lines)
			}
			return
		}
	}
	t.Fatalf("no settings event: %q", lines)
}
