package auth

import (
	"context"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// RemoteAddrKey is the gRPC metadata key under which the gateway's own REST
// front passes the HTTP client's address to the in-process gRPC server. A
// Guard believes it only on calls arriving over that in-process pipe; the
// REST front must not forward the header from clients.
const RemoteAddrKey = "holo-remote-addr"

// Identity is who made a call, as the Guard established it.
type Identity struct {
	// Name is the token's name, or "insecure-lab" or "loopback" for calls
	// let in without one.
	Name string
	Role Role
}

type identityKey struct{}

// FromContext returns the identity a Guard attached to ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Guard decides whether a gRPC call may proceed.
type Guard struct {
	Tokens *Tokens
	// Need maps full gRPC method names ("/pkg.Service/Method") to the role
	// they require; methods missing from it are refused.
	Need map[string]Role
	// Insecure lets every call in as admin (a lab without tokens).
	Insecure bool
	// LoopbackFree lets calls from the loopback interface in as admin
	// without a token (demo mode).
	LoopbackFree bool
}

// Check returns ctx with the caller's Identity when the call to method may
// proceed, else ErrNoToken, ErrBadToken or ErrForbidden (wrapped).
func (g *Guard) Check(ctx context.Context, method string) (context.Context, error) {
	need, ok := g.Need[method]
	if !ok {
		return ctx, fmt.Errorf("%w: %s is not open to any role", ErrForbidden, method)
	}
	if g.Insecure {
		return WithIdentity(ctx, Identity{Name: "insecure-lab", Role: RoleAdmin}), nil
	}
	secret, err := bearer(ctx)
	if err != nil {
		return ctx, err
	}
	if secret == "" {
		if g.LoopbackFree && fromLoopback(ctx) {
			return WithIdentity(ctx, Identity{Name: "loopback", Role: RoleAdmin}), nil
		}
		return ctx, ErrNoToken
	}
	if g.Tokens == nil {
		return ctx, ErrBadToken
	}
	tok, err := g.Tokens.Lookup(secret)
	if err != nil {
		return ctx, err
	}
	if !tok.Role.Allows(need) {
		return ctx, fmt.Errorf("%w: %s needs %v, token %q is %v", ErrForbidden, method, need, tok.Name, tok.Role)
	}
	return WithIdentity(ctx, Identity{Name: tok.Name, Role: tok.Role}), nil
}

// bearer returns the token of the call's "authorization" metadata, "" when
// there is none.
func bearer(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return "", nil
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return "", fmt.Errorf("%w: authorization must be \"Bearer <token>\"", ErrBadToken)
	}
	return strings.TrimSpace(tok), nil
}

// fromLoopback reports whether the call came from a loopback address:
// the peer's own address, or, for calls over the REST front's in-process
// pipe, the HTTP client's address it passed along.
func fromLoopback(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return false
	}
	addr := p.Addr.String()
	if p.Addr.Network() == "pipe" {
		md, _ := metadata.FromIncomingContext(ctx)
		vals := md.Get(RemoteAddrKey)
		if len(vals) != 1 {
			return false
		}
		addr = vals[0]
	}
	return IsLoopback(addr)
}

// IsLoopback reports whether addr ("host:port" or a bare IP) is on the
// loopback interface.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
