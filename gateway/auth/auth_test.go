package auth

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

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

func TestGuardCheck(t *testing.T) {
	toks, db := openTokens(t, filepath.Join(t.TempDir(), "gw.db"))
	defer db.Close()
	viewer, _, _ := toks.Create("v", RoleViewer)
	admin, _, _ := toks.Create("a", RoleAdmin)
	need := map[string]Role{"/s/Read": RoleViewer, "/s/Write": RoleOperator}
	tcp := func(s string) net.Addr { return addr{"tcp", s} }
	for _, tc := range []struct {
		name     string
		g        Guard
		method   string
		authz    string
		from     net.Addr
		remote   []string
		want     error
		wantName string
	}{
		{"viewer reads", Guard{}, "/s/Read", "Bearer " + viewer, tcp("10.0.0.2:5"), nil, nil, "v"},
		{"viewer writes", Guard{}, "/s/Write", "Bearer " + viewer, tcp("10.0.0.2:5"), nil, ErrForbidden, ""},
		{"admin writes", Guard{}, "/s/Write", "bearer " + admin, tcp("10.0.0.2:5"), nil, nil, "a"},
		{"unknown method", Guard{}, "/s/Other", "Bearer " + admin, tcp("10.0.0.2:5"), nil, ErrForbidden, ""},
		{"no token", Guard{}, "/s/Read", "", tcp("127.0.0.1:5"), nil, ErrNoToken, ""},
		{"basic auth", Guard{}, "/s/Read", "Basic eDp5", tcp("10.0.0.2:5"), nil, ErrBadToken, ""},
		{"bad token", Guard{}, "/s/Read", "Bearer holo_nope", tcp("10.0.0.2:5"), nil, ErrBadToken, ""},
		{"insecure lab", Guard{Insecure: true}, "/s/Write", "", tcp("10.0.0.2:5"), nil, nil, "insecure-lab"},
		{"demo loopback", Guard{LoopbackFree: true}, "/s/Write", "", tcp("127.0.0.1:5"), nil, nil, "loopback"},
		{"demo loopback v6", Guard{LoopbackFree: true}, "/s/Write", "", tcp("[::1]:5"), nil, nil, "loopback"},
		{"demo remote", Guard{LoopbackFree: true}, "/s/Read", "", tcp("10.0.0.2:5"), nil, ErrNoToken, ""},
		{"demo pipe loopback", Guard{LoopbackFree: true}, "/s/Read", "", addr{"pipe", "pipe"}, []string{"127.0.0.1:9"}, nil, "loopback"},
		{"demo pipe remote", Guard{LoopbackFree: true}, "/s/Read", "", addr{"pipe", "pipe"}, []string{"10.0.0.3:9"}, ErrNoToken, ""},
		{"demo pipe forged twice", Guard{LoopbackFree: true}, "/s/Read", "", addr{"pipe", "pipe"}, []string{"127.0.0.1:1", "10.0.0.3:9"}, ErrNoToken, ""},
		{"demo tcp ignores remote key", Guard{LoopbackFree: true}, "/s/Read", "", tcp("10.0.0.2:5"), []string{"127.0.0.1:1"}, ErrNoToken, ""},
		{"demo with token still checked", Guard{LoopbackFree: true}, "/s/Write", "Bearer " + viewer, tcp("127.0.0.1:5"), nil, ErrForbidden, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			g.Tokens, g.Need = toks, need
			md := metadata.MD{}
			if tc.authz != "" {
				md.Set("authorization", tc.authz)
			}
			if tc.remote != nil {
				md.Set(RemoteAddrKey, tc.remote...)
			}
			ctx := metadata.NewIncomingContext(context.Background(), md)
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: tc.from})
			ctx, err := g.Check(ctx, tc.method)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check: %v, want %v", err, tc.want)
			}
			if err == nil {
				id, _ := FromContext(ctx)
				if id.Name != tc.wantName {
					t.Errorf("identity %+v, want %s", id, tc.wantName)
				}
			}
		})
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
