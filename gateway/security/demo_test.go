package security

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/audit"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// tokenlessModes are the two modes that let callers in without a token.
var tokenlessModes = []struct {
	name string
	mut  func(*api.Config)
}{
	{"demo", func(c *api.Config) { c.Demo = true }},
	{"insecure-lab", func(c *api.Config) { c.InsecureLab = true }},
}

// TestTokenlessModesRefuseCrossSite: a web page can make a browser post
// text/plain, forms or bodies without a type to any address without a
// CORS preflight, and DNS rebinding gives it a foreign Host. In demo mode
// and with --insecure-lab, both of which let callers in without a token,
// such requests are refused; JSON from loopback to localhost still works.
// Before the fix every one of them created an admin token.
func TestTokenlessModesRefuseCrossSite(t *testing.T) {
	for _, m := range tokenlessModes {
		t.Run(m.name, func(t *testing.T) {
			g := runAPI(t, nil, m.mut)
			mint := `{"name":"pwned","role":"admin"}`
			for _, tc := range []struct {
				name string
				ct   string
				hdr  []string
				want int
			}{
				{"text/plain", "text/plain", nil, http.StatusUnsupportedMediaType},
				{"form", "application/x-www-form-urlencoded", nil, http.StatusUnsupportedMediaType},
				{"multipart", "multipart/form-data; boundary=x", nil, http.StatusUnsupportedMediaType},
				{"no type", "", nil, http.StatusUnsupportedMediaType},
				{"rebound host", "application/json", []string{"Host", "evil.example:8480"}, http.StatusForbidden},
				{"rebound IP host", "application/json", []string{"Host", "203.0.113.5"}, http.StatusForbidden},
				{"foreign origin", "application/json", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
				{"null origin", "application/json", []string{"Origin", "null"}, http.StatusForbidden},
				{"json to localhost", "application/json", []string{"Host", "localhost:8480", "Origin", "http://localhost:8480"}, http.StatusOK},
				{"json to [::1]", "application/json; charset=utf-8", []string{"Host", "[::1]:8480"}, http.StatusOK},
			} {
				req, _ := http.NewRequest("POST", g.url+"/v1/tokens", strings.NewReader(mint))
				if tc.ct != "" {
					req.Header.Set("Content-Type", tc.ct)
				}
				for i := 0; i+1 < len(tc.hdr); i += 2 {
					if tc.hdr[i] == "Host" {
						req.Host = tc.hdr[i+1]
					} else {
						req.Header.Set(tc.hdr[i], tc.hdr[i+1])
					}
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
				}
				if acao := resp.Header.Get("Access-Control-Allow-Origin"); acao != "" {
					t.Errorf("%s: Access-Control-Allow-Origin %q", tc.name, acao)
				}
				if tc.want == http.StatusOK {
					_, _ = g.tokens.List(), g.tokens.Revoke("pwned")
				}
			}
			if g.tokens.Len() != 3 {
				t.Errorf("%d tokens: a refused request minted one", g.tokens.Len())
			}
			// Reads of the API from a rebound Host are refused too (a page
			// could read the answers once it shares the origin).
			if resp, _ := g.do(t, "", "GET", "/v1/boards", "", "Host", "evil.example"); resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET from a rebound host: %d", resp.StatusCode)
			}
			// gRPC names its host in :authority.
			conn, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("evil.example:8480"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = fleetv1.NewFleetServiceClient(conn).CreateToken(g.ctx(t, ""), &fleetv1.CreateTokenRequest{Name: "pwned", Role: "admin"})
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("gRPC with a foreign authority: %v", err)
			}
			if _, err := g.client.ListBoards(g.ctx(t, ""), &fleetv1.ListBoardsRequest{}); err != nil {
				t.Errorf("gRPC to 127.0.0.1: %v", err)
			}
			// A CORS preflight is never granted.
			resp, _ := g.do(t, "", "OPTIONS", "/v1/tokens", "", "Origin", "http://evil.example",
				"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
			if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Methods") != "" {
				t.Errorf("preflight answered with CORS headers: %v", resp.Header)
			}
			// The refusals are in the audit log.
			if es := g.records(t, audit.Filter{Outcome: audit.OutcomeDenied}); len(es) < 9 {
				t.Errorf("%d refusals recorded, want every one", len(es))
			}
		})
	}
}

// TestTokenlessModesAllowHost: --allow-host names a lab machine's own
// name, which is then accepted besides localhost.
func TestTokenlessModesAllowHost(t *testing.T) {
	g := runAPI(t, nil, func(c *api.Config) { c.InsecureLab, c.AllowHosts = true, []string{"lab-gw.local"} })
	if resp, body := g.do(t, "", "POST", "/v1/actions", `{"kind":"leds","selector":{"all":true}}`, "Host", "lab-gw.local:8480"); resp.StatusCode != 200 {
		t.Errorf("allowed host: %d %s", resp.StatusCode, body)
	}
	if resp, _ := g.do(t, "", "POST", "/v1/actions", `{"kind":"leds","selector":{"all":true}}`, "Host", "other.local"); resp.StatusCode != 403 {
		t.Errorf("other host: %d", resp.StatusCode)
	}
}

// TestDemoTokensStillWork: in demo mode a request with a bearer token is
// judged by its token, whatever its Host (a remote holoctl).
func TestDemoTokensStillWork(t *testing.T) {
	g := runAPI(t, nil, func(c *api.Config) { c.Demo = true })
	if resp, body := g.do(t, "viewer", "GET", "/v1/boards", "", "Host", "gateway.example:8480"); resp.StatusCode != 200 {
		t.Errorf("viewer token to a named host: %d %s", resp.StatusCode, body)
	}
	if resp, _ := g.do(t, "viewer", "POST", "/v1/tokens", `{"name":"x","role":"admin"}`); resp.StatusCode != 403 {
		t.Errorf("viewer mints a token in demo mode: %d", resp.StatusCode)
	}
}

// TestProxyNeverLoopback: behind a reverse proxy on the same machine
// every client arrives from loopback; a request that carries Forwarded,
// X-Forwarded-For or X-Real-Ip is never taken for a loopback one in demo
// mode. Before the fix all of them were admin.
func TestProxyNeverLoopback(t *testing.T) {
	g := runAPI(t, nil, func(c *api.Config) { c.Demo = true })
	for _, h := range [][]string{
		{"X-Forwarded-For", "203.0.113.9"},
		{"X-Forwarded-For", "127.0.0.1"},
		{"Forwarded", "for=203.0.113.9;proto=https"},
		{"X-Real-Ip", "203.0.113.9"},
		{"X-Forwarded-Host", "gateway.example"},
	} {
		resp, body := g.do(t, "", "GET", "/v1/tokens", "", h...)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %s: %d %s, want 401", h[0], h[1], resp.StatusCode, body)
		}
	}
	if resp, _ := g.do(t, "", "GET", "/v1/tokens", ""); resp.StatusCode != 200 {
		t.Errorf("plain loopback: %d", resp.StatusCode)
	}
}

// nonLoopbackIP is an address of this machine other than loopback.
func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

// TestRemoteCannotForgeLoopback: a client on another address cannot pose
// as loopback through headers grpc-gateway might forward as metadata (the
// gateway's own keys holo-remote-addr and holo-forwarded, with and
// without grpc-gateway's Grpc-Metadata- prefix), nor through gRPC
// metadata of the same names.
func TestRemoteCannotForgeLoopback(t *testing.T) {
	ip := nonLoopbackIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skip(err)
	}
	g := runAPI(t, ln, func(c *api.Config) { c.Demo = true })
	for _, h := range [][]string{
		nil,
		{"Holo-Remote-Addr", "127.0.0.1:1"},
		{"Grpc-Metadata-Holo-Remote-Addr", "127.0.0.1:1"},
		{"Grpc-Metadata-X-Forwarded-For", "127.0.0.1"},
		{"X-Forwarded-For", "127.0.0.1"},
	} {
		hdr := append([]string{"Host", "localhost"}, h...)
		resp, body := g.do(t, "", "GET", "/v1/tokens", "", hdr...)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("from %s with %v: %d %s, want 401", ip, h, resp.StatusCode, body)
		}
	}
	conn, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "holo-remote-addr", "127.0.0.1:1", "x-forwarded-for", "127.0.0.1")
	if _, err := fleetv1.NewFleetServiceClient(conn).ListTokens(ctx, &fleetv1.ListTokensRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC from %s with forged metadata: %v", ip, err)
	}
}

// TestREADMEDemoCommands runs the README's curl commands of the main job
// against a demo-mode gateway, from loopback without a token, as a user
// would paste them.
func TestREADMEDemoCommands(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	g := runAPI(t, nil, func(c *api.Config) { c.Demo = true })
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	sc := bufio.NewScanner(f)
	inBlock, cur := false, ""
	comment := regexp.MustCompile(`\s+#.*$`)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			inBlock, cur = !inBlock, ""
			continue
		}
		if !inBlock || (cur == "" && !strings.HasPrefix(l, "curl ")) {
			continue
		}
		l = strings.TrimSpace(comment.ReplaceAllString(l, ""))
		more := strings.HasSuffix(l, "\\")
		cur += strings.TrimSuffix(l, "\\") + " "
		if !more {
			// The fleet API's commands run here; the show's (cue lists)
			// need the cue engine holo-gateway wires in, and the README's
			// GO runs against a real demo in cmd/holo-gateway TestCueDemo.
			if strings.Contains(cur, "127.0.0.1:8480") && !strings.Contains(cur, "/v1/cuelists") {
				cmds = append(cmds, strings.TrimSpace(cur))
			}
			cur = ""
		}
	}
	if len(cmds) < 3 {
		t.Fatalf("found %d curl commands of the demo in the README: %v", len(cmds), cmds)
	}
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "127.0.0.1:8480", g.addr)
		if strings.Contains(c, "-sN") { // the event stream: a moment of it
			c = strings.Replace(c, "curl ", "curl --max-time 1 ", 1)
		}
		c = strings.Replace(c, "curl ", "curl --fail-with-body ", 1)
		out, err := exec.Command("sh", "-c", strings.Replace(c, "curl", curl, 1)).CombinedOutput()
		if err != nil && !strings.Contains(c, "--max-time") {
			t.Errorf("%s: %v\n%s", c, err, out)
		}
		if strings.HasPrefix(strings.TrimSpace(string(out)), `{"error"`) {
			t.Errorf("%s answered an error:\n%s", c, out)
		}
	}
	g.fleet.mu.Lock()
	actions := g.fleet.actions
	g.fleet.mu.Unlock()
	if actions != 1 {
		t.Errorf("%d actions reached the fleet, want the README's one", actions)
	}
}
