package auth

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/holofleet/holofleet/store"
)

func openTokens(t *testing.T, path string) (*Tokens, *store.DB) {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	return toks, db
}

func TestTokensLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	toks, db := openTokens(t, path)
	sec, tok, err := toks.Create("ops", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sec, SecretPrefix) || len(sec) != len(SecretPrefix)+43 {
		t.Errorf("secret %q", sec)
	}
	if tok.SHA256 != Hash(sec) || tok.Role != RoleOperator || tok.Name != "ops" {
		t.Errorf("token %+v", tok)
	}
	if _, _, err := toks.Create("ops", RoleViewer); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate name: %v", err)
	}
	for _, bad := range []string{"", "a b", strings.Repeat("x", 65), "é"} {
		if _, _, err := toks.Create(bad, RoleViewer); !errors.Is(err, ErrBadName) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	if _, _, err := toks.Create("x", RoleNone); !errors.Is(err, ErrBadRole) {
		t.Errorf("role none: %v", err)
	}
	// The secret itself is never stored.
	var raw map[string]any
	if _, err := db.Bucket(Bucket).Get("ops", &raw); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(raw["role"], "operator"); diff != "" || raw["sha256"] != tok.SHA256 {
		t.Errorf("stored %v", raw)
	}
	for _, v := range raw {
		if s, ok := v.(string); ok && strings.Contains(s, sec) {
			t.Errorf("secret stored in clear: %v", raw)
		}
	}
	db.Close()

	toks, db = openTokens(t, path)
	defer db.Close()
	got, err := toks.Lookup(sec)
	if err != nil || got.Name != "ops" || got.Role != RoleOperator || !got.Created.Equal(tok.Created) {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	if _, err := toks.Lookup(sec + "x"); !errors.Is(err, ErrBadToken) {
		t.Errorf("wrong secret: %v", err)
	}
	if _, err := toks.Lookup(""); !errors.Is(err, ErrNoToken) {
		t.Errorf("empty secret: %v", err)
	}
	if _, _, err := toks.Create("adm", RoleAdmin); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tk := range toks.List() {
		names = append(names, tk.Name+":"+tk.Role.String())
	}
	if diff := cmp.Diff(names, []string{"adm:admin", "ops:operator"}); diff != "" {
		t.Errorf("List (-got +want):\n%s", diff)
	}
	if err := toks.Revoke("ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := toks.Lookup(sec); !errors.Is(err, ErrBadToken) {
		t.Errorf("revoked: %v", err)
	}
	if err := toks.Revoke("ops"); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("revoke twice: %v", err)
	}
	if toks.Len() != 1 {
		t.Errorf("Len %d", toks.Len())
	}
}

func TestParseRole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Role
		err  error
	}{
		{"viewer", RoleViewer, nil}, {"operator", RoleOperator, nil}, {"admin", RoleAdmin, nil},
		{"none", RoleNone, ErrBadRole}, {"Admin", RoleNone, ErrBadRole}, {"", RoleNone, ErrBadRole},
	} {
		got, err := ParseRole(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseRole(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if !RoleAdmin.Allows(RoleOperator) || RoleViewer.Allows(RoleOperator) || !RoleOperator.Allows(RoleOperator) {
		t.Error("Allows order")
	}
}

type addr struct{ network, s string }

func (a addr) Network() string { return a.network }
func (a addr) String() string  { return a.s }

func TestGuardIdentify(t *testing.T) {
	toks, db := openTokens(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	viewer, _, _ := toks.Create("v", RoleViewer)
	admin, _, _ := toks.Create("a", RoleAdmin)
	tcp := func(s string) net.Addr { return addr{"tcp", s} }
	for _, tc := range []struct {
		name     string
		g        Guard
		authz    []string
		from     net.Addr
		md       map[string][]string
		want     error
		wantName string
		wantRole Role
		surface  Surface
	}{
		{"viewer", Guard{}, []string{"Bearer " + viewer}, tcp("10.0.0.2:5"), nil, nil, "v", RoleViewer, SurfaceGRPC},
		{"admin lower-case scheme", Guard{}, []string{"bearer " + admin}, tcp("10.0.0.2:5"), nil, nil, "a", RoleAdmin, SurfaceGRPC},
		{"two authorizations", Guard{}, []string{"Bearer " + viewer, "Bearer " + admin}, tcp("10.0.0.2:5"), nil, ErrBadToken, "", 0, SurfaceGRPC},
		{"no token", Guard{}, nil, tcp("127.0.0.1:5"), nil, ErrNoToken, "", 0, SurfaceGRPC},
		{"basic auth", Guard{}, []string{"Basic eDp5"}, tcp("10.0.0.2:5"), nil, ErrBadToken, "", 0, SurfaceGRPC},
		{"bad token", Guard{}, []string{"Bearer holo_nope"}, tcp("10.0.0.2:5"), nil, ErrBadToken, "", 0, SurfaceGRPC},
		{"insecure lab", Guard{Insecure: true}, nil, tcp("10.0.0.2:5"), nil, nil, InsecureName, RoleAdmin, SurfaceGRPC},
		{"demo loopback", Guard{LoopbackFree: true}, nil, tcp("127.0.0.1:5"), nil, nil, LoopbackName, RoleAdmin, SurfaceGRPC},
		{"demo loopback v6", Guard{LoopbackFree: true}, nil, tcp("[::1]:5"), nil, nil, LoopbackName, RoleAdmin, SurfaceGRPC},
		{"demo remote", Guard{LoopbackFree: true}, nil, tcp("10.0.0.2:5"), nil, ErrNoToken, "", 0, SurfaceGRPC},
		{"demo loopback through a proxy", Guard{LoopbackFree: true}, nil, tcp("127.0.0.1:5"), map[string][]string{"x-forwarded-for": {"203.0.113.9"}}, ErrNoToken, "", 0, SurfaceGRPC},
		{"demo loopback forwarded", Guard{LoopbackFree: true}, nil, tcp("127.0.0.1:5"), map[string][]string{"forwarded": {"for=203.0.113.9"}}, ErrNoToken, "", 0, SurfaceGRPC},
		{"demo pipe loopback", Guard{LoopbackFree: true}, nil, addr{PipeNetwork, "pipe"}, map[string][]string{RemoteAddrKey: {"127.0.0.1:9"}}, nil, LoopbackName, RoleAdmin, SurfaceREST},
		{"demo pipe remote", Guard{LoopbackFree: true}, nil, addr{PipeNetwork, "pipe"}, map[string][]string{RemoteAddrKey: {"10.0.0.3:9"}}, ErrNoToken, "", 0, SurfaceREST},
		{"demo pipe proxied", Guard{LoopbackFree: true}, nil, addr{PipeNetwork, "pipe"}, map[string][]string{RemoteAddrKey: {"127.0.0.1:9"}, ForwardedKey: {"1"}}, ErrNoToken, "", 0, SurfaceREST},
		{"demo pipe forged twice", Guard{LoopbackFree: true}, nil, addr{PipeNetwork, "pipe"}, map[string][]string{RemoteAddrKey: {"127.0.0.1:1", "10.0.0.3:9"}}, ErrNoToken, "", 0, SurfaceREST},
		{"demo pipe without address", Guard{LoopbackFree: true}, nil, addr{PipeNetwork, "pipe"}, nil, ErrNoToken, "", 0, SurfaceREST},
		{"demo tcp ignores remote key", Guard{LoopbackFree: true}, nil, tcp("10.0.0.2:5"), map[string][]string{RemoteAddrKey: {"127.0.0.1:1"}}, ErrNoToken, "", 0, SurfaceGRPC},
		{"demo with token still checked", Guard{LoopbackFree: true}, []string{"Bearer " + viewer}, tcp("127.0.0.1:5"), nil, nil, "v", RoleViewer, SurfaceGRPC},
		{"demo with bad token refused", Guard{LoopbackFree: true}, []string{"Bearer holo_x"}, tcp("127.0.0.1:5"), nil, ErrBadToken, "", 0, SurfaceGRPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			g.Tokens = toks
			md := metadata.MD{}
			if tc.authz != nil {
				md.Set("authorization", tc.authz...)
			}
			for k, v := range tc.md {
				md.Set(k, v...)
			}
			ctx := metadata.NewIncomingContext(context.Background(), md)
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: tc.from})
			c := CallerOf(ctx)
			if c.Surface != tc.surface {
				t.Errorf("surface %v, want %v", c.Surface, tc.surface)
			}
			id, err := g.Identify(c)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Identify: %v, want %v", err, tc.want)
			}
			if id.Name != tc.wantName || id.Role != tc.wantRole {
				t.Errorf("identity %+v, want %s %v", id, tc.wantName, tc.wantRole)
			}
		})
	}
}

func TestCallerOfHTTP(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/actions", nil)
	r.RemoteAddr = "127.0.0.1:4000"
	if c := CallerOfHTTP(r); !c.Loopback() || c.Surface != SurfaceREST {
		t.Errorf("plain loopback: %+v", c)
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip", "X-Forwarded-Host"} {
		r := httptest.NewRequest("POST", "/v1/actions", nil)
		r.RemoteAddr = "127.0.0.1:4000"
		r.Header.Set(h, "127.0.0.1")
		if c := CallerOfHTTP(r); c.Loopback() {
			t.Errorf("%s makes a request loopback: %+v", h, c)
		}
	}
	r.Header.Add("Authorization", "Bearer a")
	r.Header.Add("Authorization", "Bearer b")
	if _, err := (&Guard{}).Identify(CallerOfHTTP(r)); !errors.Is(err, ErrBadToken) {
		t.Errorf("two Authorization headers: %v", err)
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8480": true, "LOCALHOST:1": true, "localhost.": true,
		"127.0.0.1": true, "127.0.0.1:8480": true, "[::1]": true, "[::1]:8480": true,
		"127.0.0.2": false, "evil.example": false, "localhost.evil.example": false, "": false,
		"10.0.0.1:8480": false, "127.0.0.1.nip.io": false, "[::2]:1": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v", host, got)
		}
	}
}

// recorder is an Auditor keeping the records in memory.
type recorder struct {
	mu   sync.Mutex
	recs []Record
}

func (r *recorder) Audit(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

func TestGuardCheckRecords(t *testing.T) {
	rec := &recorder{}
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	g := &Guard{Audit: rec, Now: func() time.Time { return t0 }}
	op := Identity{Name: "ops", Role: RoleOperator, Token: true}

	// A read let in is not recorded.
	p, err := g.Check(Attributes{Who: op, Verb: VerbRead, Resource: ResBoards})
	if err != nil {
		t.Fatal(err)
	}
	p.Done(CodeOK)
	// A change let in is recorded once, with its outcome.
	p, err = g.Check(Attributes{Who: op, Verb: VerbAct, Resource: ResActions, Kind: "leds", Selector: "groups=1", Operation: "DoAction"})
	if err != nil {
		t.Fatal(err)
	}
	p.Done("Unavailable")
	p.Done(CodeOK)
	// A denial is recorded at once, reads included.
	if _, err := g.Check(Attributes{Who: op, Verb: VerbCall, Resource: ResBoardAPI, Method: "POST", Path: "/ota/pull", Boards: []string{"b1"}}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("operator OTA: %v", err)
	}
	if _, err := g.Check(Attributes{Who: op, Verb: VerbRead, Resource: ResTokens}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("operator reads tokens: %v", err)
	}
	g.Refuse(Attributes{Verb: VerbAct, Resource: ResActions, Client: "10.0.0.9:1"}, ErrNoToken)
	g.Refuse(Attributes{Who: op, Verb: VerbAct, Resource: ResActions}, &LimitError{What: "x", RetryAfter: time.Second})

	type short struct {
		Who     string
		Allowed bool
		Code    string
		Path    string
	}
	var got []short
	for _, r := range rec.recs {
		if !r.Time.Equal(t0) || r.Reason == "" {
			t.Errorf("record %+v", r)
		}
		got = append(got, short{r.Who.Name, r.Allowed, r.Code, r.Path})
	}
	want := []short{
		{"ops", true, "Unavailable", ""},
		{"ops", false, CodePermissionDenied, "/ota/pull"},
		{"ops", false, CodePermissionDenied, ""},
		{"", false, CodeUnauthenticated, ""},
		{"ops", false, CodeResourceExhausted, ""},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("records (-got +want):\n%s", diff)
	}
	// A Guard without an Auditor records nothing and does not fail.
	p, _ = (&Guard{}).Check(Attributes{Who: op, Verb: VerbAct, Resource: ResActions})
	p.Done(CodeOK)
}

func TestBindEndsOnRevoke(t *testing.T) {
	toks, db := openTokens(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	sec, _, _ := toks.Create("v", RoleViewer)
	_, _, _ = toks.Create("w", RoleViewer)
	id, err := toks.Identify(sec)
	if err != nil || !id.Token {
		t.Fatalf("Identify: %+v %v", id, err)
	}
	g := &Guard{Tokens: toks}
	ctx1, cancel1 := g.Bind(context.Background(), id)
	defer cancel1()
	ctx2, cancel2 := g.Bind(context.Background(), id)
	ctxW, cancelW := toks.Bind(context.Background(), "w")
	defer cancelW()
	cancel2() // a request that ended is forgotten
	if ctx2.Err() == nil {
		t.Error("cancel did not end the context")
	}
	if err := toks.Revoke("v"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx1.Done():
	case <-time.After(time.Second):
		t.Fatal("revoking did not end the bound context")
	}
	if cause := context.Cause(ctx1); !errors.Is(cause, ErrBadToken) {
		t.Errorf("cause %v", cause)
	}
	if ctxW.Err() != nil {
		t.Error("another token's context ended")
	}
	// Binding a revoked token ends at once.
	ctx3, cancel3 := toks.Bind(context.Background(), "v")
	defer cancel3()
	if !errors.Is(context.Cause(ctx3), ErrBadToken) {
		t.Errorf("bind after revoke: %v", context.Cause(ctx3))
	}
	// Identities without a token are not bound.
	ctx4, cancel4 := g.Bind(context.Background(), Identity{Name: LoopbackName, Role: RoleAdmin})
	defer cancel4()
	if ctx4.Err() != nil {
		t.Error("loopback identity ended")
	}
	toks.mu.Lock()
	left := len(toks.bound)
	toks.mu.Unlock()
	if left != 1 { // only "w"
		t.Errorf("%d names still bound", left)
	}
}

func TestCodeOf(t *testing.T) {
	for err, want := range map[error]string{
		nil: CodeOK, ErrNoToken: CodeUnauthenticated, ErrBadToken: CodeUnauthenticated,
		ErrForbidden: CodePermissionDenied, &LimitError{}: CodeResourceExhausted, errors.New("x"): "Unknown",
	} {
		if got := CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %s, want %s", err, got, want)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	db, err := store.Open(filepath.Join(b.TempDir(), "gw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	toks, _ := Open(db)
	sec, _, _ := toks.Create("bench", RoleViewer)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toks.Lookup(sec); err != nil {
			b.Fatal(err)
		}
	}
}
