package api

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/auth"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// recorder is an auth.Auditor keeping every record, for tests that
// check a refusal was recorded.
type recorder struct {
	mu   sync.Mutex
	recs []auth.Record
}

func (r *recorder) Audit(rec auth.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

// find returns the records ok accepts.
func (r *recorder) find(ok func(auth.Record) bool) []auth.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []auth.Record
	for _, rec := range r.recs {
		if ok(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// startDemoAudited is a demo-mode gateway (loopback needs no token) whose
// door records into the returned recorder.
func startDemoAudited(t testing.TB, opts ...gwOpt) (*testGateway, *recorder) {
	rec := &recorder{}
	var g *testGateway
	opts = append([]gwOpt{func(c *Config) {
		c.Demo = true
		c.Guard = &auth.Guard{Tokens: c.Tokens, LoopbackFree: true, Audit: rec}
	}}, opts...)
	g = startGateway(t, opts...)
	return g, rec
}

// TestEmptyAuthorizationRefused: in demo mode, a request from loopback
// that carries an Authorization header is never the tokenless loopback
// admin: an empty, blank or malformed value is 401 on every path (and
// recorded); without the header, the demo's tokenless calls still work.
func TestEmptyAuthorizationRefused(t *testing.T) {
	g, rec := startDemoAudited(t)
	for _, tc := range []struct {
		name, method, path, authz string
		want                      int
	}{
		{"empty mints no token", "POST", "/v1/tokens", "", 401},
		{"blank", "POST", "/v1/tokens", "   ", 401},
		{"bearer alone", "POST", "/v1/tokens", "Bearer", 401},
		{"bearer and blank", "POST", "/v1/tokens", "Bearer    ", 401},
		{"other scheme", "POST", "/v1/tokens", "Basic YWRtaW46YWRtaW4=", 401},
		{"empty read", "GET", "/v1/tokens", "", 401},
		{"empty on metrics", "GET", "/metrics", "", 401},
		{"empty on health", "GET", "/healthz", "", 401},
		{"unknown token", "GET", "/v1/boards", "Bearer holo_nope", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, g.url+tc.path, strings.NewReader(`{"name":"x-`+strings.ReplaceAll(tc.name, " ", "-")+`","role":"admin"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header["Authorization"] = []string{tc.authz}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s with Authorization %q: %d, want %d", tc.method, tc.path, tc.authz, resp.StatusCode, tc.want)
			}
		})
	}
	// The token list holds only the test's own tokens: nothing was minted.
	toks := g.tokens.List()
	if len(toks) != 3 {
		t.Errorf("tokens after the refusals: %v", toks)
	}
	// The refusals are in the audit log, as Unauthenticated.
	if got := rec.find(func(r auth.Record) bool {
		return !r.Allowed && r.Code == auth.CodeUnauthenticated && r.Operation == "POST /v1/tokens"
	}); len(got) < 5 {
		t.Errorf("audit holds %d refusals of POST /v1/tokens, want 5: %+v", len(got), rec.find(func(auth.Record) bool { return true }))
	}

	// gRPC: an empty authorization value is not the loopback admin either.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range []string{"", " ", "Bearer"} {
		_, err := g.client.CreateToken(metadata.AppendToOutgoingContext(ctx, "authorization", v),
			&fleetv1.CreateTokenRequest{Name: "grpc-x", Role: "admin"})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("gRPC CreateToken with authorization %q: %v", v, err)
		}
	}

	// Without the header the demo's loopback admin still works (README).
	if code, body := g.rest(t, "", "POST", "/v1/tokens", `{"name":"readme","role":"viewer"}`); code != 200 {
		t.Errorf("demo POST /v1/tokens without a token: %d %s", code, body)
	}
	if _, err := g.client.ListBoards(ctx, &fleetv1.ListBoardsRequest{}); err != nil {
		t.Errorf("demo gRPC without a token: %v", err)
	}
}

// TestCredential is the table of Authorization values and what the
// Guard makes of them in demo mode from loopback.
func TestCredentialLoopback(t *testing.T) {
	g := &auth.Guard{LoopbackFree: true}
	for _, tc := range []struct {
		name   string
		values []string
		want   error
	}{
		{"absent", nil, nil},
		{"empty", []string{""}, auth.ErrBadToken},
		{"blank", []string{" \t"}, auth.ErrBadToken},
		{"bearer alone", []string{"Bearer"}, auth.ErrBadToken},
		{"bearer blank", []string{"Bearer   "}, auth.ErrBadToken},
		{"basic", []string{"Basic eA=="}, auth.ErrBadToken},
		{"two", []string{"", ""}, auth.ErrBadToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "http://localhost/v1/boards", nil)
			r.RemoteAddr = "127.0.0.1:5000"
			if tc.values != nil {
				r.Header["Authorization"] = tc.values
			}
			id, err := g.Identify(auth.CallerOfHTTP(r))
			switch {
			case tc.want == nil && (err != nil || id.Name != auth.LoopbackName):
				t.Errorf("Identify = %+v, %v; want the loopback admin", id, err)
			case tc.want != nil && (err == nil || !strings.Contains(err.Error(), tc.want.Error())):
				t.Errorf("Identify = %+v, %v; want %v", id, err, tc.want)
			}
			// The front runs its door checks on all of these: none
			// carries a well-formed credential.
			s := &Server{cfg: Config{Demo: true}}
			if !s.tokenless(r) {
				t.Errorf("tokenless = false")
			}
		})
	}
	r, _ := http.NewRequest("GET", "http://localhost/v1/boards", nil)
	r.Header.Set("Authorization", "Bearer holo_x")
	if (&Server{cfg: Config{Demo: true}}).tokenless(r) {
		t.Errorf("a bearer token counts as tokenless")
	}
}

// chromiumPath finds headless Chromium, or skips (fails in CI).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "headless-shell", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium is required with CI=true")
	}
	t.Skip("no Chromium on this machine")
	return ""
}

// TestBrowserRebindingEmptyAuthorization is the attack as a browser
// makes it: a page at http://evil.test:PORT (a name the attacker
// rebinds to 127.0.0.1; Chromium's host resolver maps it here) calls
// the demo gateway on the same port with fetch, same-origin, sending an
// empty Authorization header. The gateway must not take it for the
// loopback admin: 401, no token minted, the refusal in the audit log. The
// same page without the header meets the Host check (403).
func TestBrowserRebindingEmptyAuthorization(t *testing.T) {
	exe := chromiumPath(t)
	g, rec := startDemoAudited(t)
	port := g.addr[strings.LastIndex(g.addr, ":")+1:]
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	defer tcancel()

	origin := "http://evil.test:" + port
	// A page of the attacker's origin (any path the gateway serves
	// without a token to a GET will do as the page).
	if err := chromedp.Run(ctx, chromedp.Navigate(origin+"/healthz")); err != nil {
		t.Fatalf("open %s: %v", origin, err)
	}
	attack := func(headers string) (result struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}) {
		t.Helper()
		js := `fetch('/v1/tokens', {method: 'POST', headers: ` + headers + `,
			body: JSON.stringify({name: 'pwned-' + Math.random().toString(36).slice(2), role: 'admin'})})
			.then(async r => ({status: r.status, body: await r.text()}))`
		if err := chromedp.Run(ctx, chromedp.Evaluate(js, &result, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
			return p.WithAwaitPromise(true)
		})); err != nil {
			t.Fatalf("fetch from the page: %v", err)
		}
		return result
	}
	if r := attack(`{'Authorization': '', 'Content-Type': 'application/json'}`); r.Status != 401 || strings.Contains(r.Body, "holo_") {
		t.Errorf("rebinding page with an empty Authorization: %d %s (want 401, no token)", r.Status, r.Body)
	}
	if r := attack(`{'Authorization': '', 'Content-Type': 'text/plain'}`); r.Status != 401 || strings.Contains(r.Body, "holo_") {
		t.Errorf("rebinding page with an empty Authorization, text/plain: %d %s", r.Status, r.Body)
	}
	if r := attack(`{'Content-Type': 'application/json'}`); r.Status != 403 || strings.Contains(r.Body, "holo_") {
		t.Errorf("rebinding page without Authorization: %d %s (want 403 for the Host)", r.Status, r.Body)
	}
	toks := g.tokens.List()
	for _, tk := range toks {
		if strings.HasPrefix(tk.Name, "pwned-") {
			t.Errorf("the page minted token %q", tk.Name)
		}
	}
	if got := rec.find(func(r auth.Record) bool {
		return !r.Allowed && r.Code == auth.CodeUnauthenticated && r.Operation == "POST /v1/tokens" && auth.IsLoopback(r.Client)
	}); len(got) != 2 {
		t.Errorf("audit: %d refusals of the page's empty-Authorization calls, want 2: %+v", len(got), rec.find(func(auth.Record) bool { return true }))
	}
}
