package auth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/rest"
)

// RemoteAddrKey is the gRPC metadata key under which the gateway's own REST
// front passes the HTTP client's address to the in-process gRPC server.
// CallerOf believes it only on calls arriving over that in-process pipe;
// the REST front never forwards client headers as metadata.
const RemoteAddrKey = "holo-remote-addr"

// ForwardedKey is the gRPC metadata key under which the REST front says
// that an HTTP request came through a proxy (it carried Forwarded,
// X-Forwarded-For, X-Forwarded-Host or X-Real-Ip). Believed only over the
// in-process pipe, like RemoteAddrKey.
const ForwardedKey = "holo-forwarded"

// PipeNetwork is the network name of the in-process pipe's addresses: a
// call whose peer has it came through the REST front.
const PipeNetwork = "pipe"

// Names of the identities let in without a token.
const (
	InsecureName = "insecure-lab"
	LoopbackName = "loopback"
)

// Identity is who made a call, as the Guard established it.
type Identity struct {
	// Name is the token's name, or InsecureName or LoopbackName for calls
	// let in without one ("" when nobody was established).
	Name string
	Role Role
	// Token reports that a bearer token established the identity (the
	// identity ends when the token is revoked; see Tokens.Bind).
	Token bool
}

type identityKey struct{}

// FromContext returns the identity a surface attached to ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id a surface gave the
// request (its audit records' and its log's RequestID), so that work the
// request sets off elsewhere (a request routed to another gateway of a
// cluster, a revision it stores) is recorded under the same id.
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id a surface attached to ctx ("" when
// none).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Caller is what a surface knows of a request before any check: the
// credentials it carried and where it came from.
type Caller struct {
	// Authorization is the request's Authorization value ("Bearer
	// <secret>"), "" when it has none.
	Authorization string
	// Ambiguous is set when the request carried more than one
	// Authorization value; such a request is refused.
	Ambiguous bool
	// Presented is set when the request carried an Authorization header
	// at all, even an empty one. Only a request without one may be the
	// demo's loopback identity: a present but empty, blank or malformed
	// value is a bad credential (401), never "no token".
	Presented bool
	// Addr is the client's address (host:port).
	Addr string
	// Forwarded reports that a proxy forwarded the request: the address
	// is the proxy's, not the client's, so it never counts as loopback.
	Forwarded bool
	Surface   Surface
	// Agent is the client program (User-Agent), for the record.
	Agent string
}

// Loopback reports whether the caller is on this machine: a loopback
// address that no proxy stands in for.
func (c Caller) Loopback() bool { return !c.Forwarded && IsLoopback(c.Addr) }

// CallerOf reads the caller of a gRPC call from its context: the peer's
// address, or, for calls over the REST front's in-process pipe, the HTTP
// client's address and proxy flag the front passed along (nothing a
// client sent can pose as those: the front forwards no client header as
// metadata).
func CallerOf(ctx context.Context) Caller {
	md, _ := metadata.FromIncomingContext(ctx)
	c := Caller{Surface: SurfaceGRPC}
	authz := md.Get("authorization")
	if len(authz) > 0 {
		c.Authorization = authz[0]
		c.Ambiguous = len(authz) > 1
		c.Presented = true
	}
	if ua := md.Get("user-agent"); len(ua) > 0 {
		c.Agent = ua[0]
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		c.Forwarded = true // unknown origin: never loopback
		return c
	}
	if p.Addr.Network() == PipeNetwork {
		c.Surface = SurfaceREST
		addrs := md.Get(RemoteAddrKey)
		if len(addrs) == 1 {
			c.Addr = addrs[0]
		}
		c.Forwarded = len(addrs) != 1 || len(md.Get(ForwardedKey)) > 0
		if ua := md.Get("holo-user-agent"); len(ua) == 1 {
			c.Agent = ua[0]
		}
		return c
	}
	c.Addr = p.Addr.String()
	for _, k := range []string{"forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip"} {
		if len(md.Get(k)) > 0 {
			c.Forwarded = true
		}
	}
	return c
}

// forwardHeaders are the headers proxies add to say whom they forward.
var forwardHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"}

// Forwarded reports whether h carries a header a proxy adds when it
// forwards a request (Forwarded, X-Forwarded-For, X-Forwarded-Host,
// X-Real-Ip).
func Forwarded(h http.Header) bool {
	for _, k := range forwardHeaders {
		if len(h.Values(k)) > 0 {
			return true
		}
	}
	return false
}

// CallerOfHTTP reads the caller of an HTTP request served by the gateway
// itself (outside grpc-gateway): the connection's address, never a
// forwarding header's.
func CallerOfHTTP(r *http.Request) Caller {
	c := Caller{Addr: r.RemoteAddr, Forwarded: Forwarded(r.Header), Surface: SurfaceREST, Agent: r.UserAgent()}
	authz := r.Header.Values("Authorization")
	if len(authz) > 0 {
		c.Authorization = authz[0]
		c.Ambiguous = len(authz) > 1
		c.Presented = true
	}
	return c
}

// Outcome codes of audit records. They are gRPC's code names, the common
// vocabulary of every surface (the MQTT bridge and OSC use them too).
const (
	CodeOK                = "OK"
	CodeUnauthenticated   = "Unauthenticated"
	CodePermissionDenied  = "PermissionDenied"
	CodeResourceExhausted = "ResourceExhausted"
)

// CodeOf is the outcome code of an error: OK for nil, else the gRPC code
// name of its class (package fault: Unauthenticated for ErrNoToken and
// ErrBadToken, PermissionDenied for ErrForbidden, ResourceExhausted for
// ErrLimited, ...); "Unknown" for an error of no class.
func CodeOf(err error) string {
	if err == nil {
		return CodeOK
	}
	c := fault.Of(err)
	if c == fault.Internal {
		return "Unknown"
	}
	return c.GRPC().String()
}

// Record is what the audit log keeps of one request: its attributes,
// whether it was let in and why, and how it ended.
type Record struct {
	Time time.Time
	Attributes
	Allowed bool
	// Reason is the decision's reason, or why the request was refused
	// before the policy was asked (no token, a limit).
	Reason string
	// Code is the outcome: CodeOK or the failure's gRPC code name.
	Code string
}

// Auditor keeps records. Audit must not block for long: surfaces call it
// on the request's path.
type Auditor interface {
	Audit(Record)
}

// Guard is the gateway's one door, shared by every surface: who is
// calling (Identify), may they (Check, which asks Authorize), and the
// audit record of what was refused and of every change let in.
//
// A surface's request goes:
//
//	id, err := g.Identify(caller)          // err: Refuse(attrs, err), answer
//	attrs.Who = id
//	p, err := g.Check(attrs)               // a denial is recorded by Check
//	... do the request ...
//	p.Done(outcome code)                   // records an allowed change
type Guard struct {
	Tokens *Tokens
	// Insecure lets every call in as admin (a lab without tokens).
	Insecure bool
	// LoopbackFree lets calls from the loopback interface in as admin
	// without a token (demo mode).
	LoopbackFree bool
	// Audit receives the records; nil keeps none.
	Audit Auditor
	// Now is the records' clock; nil is time.Now.
	Now func() time.Time
}

// Identify establishes who c is: with Insecure, the lab's admin; with a
// bearer token, the token's name and role; without any Authorization
// header, with LoopbackFree and from loopback, the demo's admin. Else
// ErrNoToken or ErrBadToken (wrapped). The loopback identity comes from
// the parsed credential being absent, not from a header's value being
// empty: a present but empty, blank or malformed Authorization is
// ErrBadToken.
func (g *Guard) Identify(c Caller) (Identity, error) {
	if g.Insecure {
		return Identity{Name: InsecureName, Role: RoleAdmin}, nil
	}
	secret, err := Credential(c)
	if err != nil {
		return Identity{}, err
	}
	if secret == "" {
		if g.LoopbackFree && c.Loopback() {
			return Identity{Name: LoopbackName, Role: RoleAdmin}, nil
		}
		return Identity{}, ErrNoToken
	}
	if g.Tokens == nil {
		return Identity{}, ErrBadToken
	}
	return g.Tokens.Identify(secret)
}

// Bind returns ctx ending when id's token is revoked (see Tokens.Bind);
// identities without a token get ctx unchanged.
func (g *Guard) Bind(ctx context.Context, id Identity) (context.Context, context.CancelFunc) {
	if !id.Token || g.Tokens == nil {
		return context.WithCancel(ctx)
	}
	return g.Tokens.Bind(ctx, id.Name)
}

// Check decides a (a.Who established by Identify) with Authorize. A
// denial is recorded at once and returned as ErrForbidden (wrapped). The
// Pending of an allowed request records it when Done is called, if the
// request is a change; reads are not recorded.
func (g *Guard) Check(a Attributes) (*Pending, error) {
	d := Authorize(a)
	if !d.Allowed {
		err := d.Err()
		g.record(a, false, d.Reason, CodePermissionDenied)
		return &Pending{}, err
	}
	return &Pending{g: g, a: a, reason: d.Reason, active: a.Changing()}, nil
}

// Admit takes a request through the door: Identify c (a failure is
// recorded with Refuse and returned), then Check a with a.Who set to the
// identity (a denial is recorded by Check and returned). The Pending of
// an allowed request records it when Done.
func (g *Guard) Admit(c Caller, a Attributes) (Identity, *Pending, error) {
	id, err := g.Identify(c)
	if err != nil {
		g.Refuse(a, err)
		return id, nil, err
	}
	a.Who = id
	p, err := g.Check(a)
	return id, p, err
}

// AdmitHTTP is Admit for a REST route of the API's listener served
// beside its own (the installation, the DMX patch): the caller is r's
// and a's surface, client, agent and request id are taken from it; a
// refusal is answered here in the REST error form (401 unauthenticated,
// with the bearer challenge, or 403 permission_denied) and false
// returned. The request returned carries the caller's identity in its
// context (WithIdentity), so what it asks of other parts (a cluster's
// other gateways) goes as the caller's.
func (g *Guard) AdmitHTTP(w http.ResponseWriter, r *http.Request, a Attributes) (*http.Request, *Pending, bool) {
	c := CallerOfHTTP(r)
	a.Surface, a.Client, a.Agent = SurfaceREST, c.Addr, c.Agent
	if a.RequestID == "" {
		a.RequestID = RequestIDFrom(r.Context())
	}
	id, p, err := g.Admit(c, a)
	switch {
	case err == nil:
		return r.WithContext(WithIdentity(r.Context(), id)), p, true
	case fault.Of(err) == fault.Unauthenticated:
		rest.Error(w, http.StatusUnauthorized, "unauthenticated", err.Error())
	default:
		rest.Error(w, http.StatusForbidden, "permission_denied", err.Error())
	}
	return r, nil, false
}

// Refuse records a request refused before or beside the policy: no or a
// bad token (Identify's error), a rate or stream limit. a.Who is whatever
// was established ("" for nobody).
func (g *Guard) Refuse(a Attributes, err error) {
	g.record(a, false, err.Error(), CodeOf(err))
}

// Record writes a record as given, for what Check, Refuse and Done do not
// say: a request refused for being malformed before it could be decided
// (code InvalidArgument), a cross-site request turned away at the door.
func (g *Guard) Record(a Attributes, allowed bool, code, reason string) {
	g.record(a, allowed, reason, code)
}

func (g *Guard) record(a Attributes, allowed bool, reason, code string) {
	if g == nil || g.Audit == nil {
		return
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	g.Audit.Audit(Record{Time: now(), Attributes: a, Allowed: allowed, Reason: reason, Code: code})
}

// Pending is an allowed request waiting for its outcome.
type Pending struct {
	g      *Guard
	a      Attributes
	reason string
	active bool
}

// Done records the allowed request's outcome (CodeOK or the failure's
// gRPC code name) when it is a change; it does nothing for reads, denied
// requests and a second call.
func (p *Pending) Done(code string) {
	if p == nil || !p.active {
		return
	}
	p.active = false
	p.g.record(p.a, true, p.reason, code)
}

// Credential returns the bearer secret c presented, "" when c carried no
// Authorization header at all, and ErrBadToken (wrapped) for more than
// one value or a present value that is empty, blank or not "Bearer
// <secret>".
func Credential(c Caller) (string, error) {
	if c.Ambiguous {
		return "", fmt.Errorf("%w: more than one Authorization value", ErrBadToken)
	}
	secret, err := ParseBearer(c.Authorization)
	if err != nil {
		return "", err
	}
	if secret == "" && c.Presented {
		return "", fmt.Errorf("%w: empty Authorization header (send \"Bearer <token>\" or no header at all)", ErrBadToken)
	}
	return secret, nil
}

// ParseBearer returns the secret of an Authorization value ("Bearer
// <secret>", the scheme in any case), "" for an empty value, and
// ErrBadToken for any other form.
func ParseBearer(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return "", fmt.Errorf("%w: authorization must be \"Bearer <token>\"", ErrBadToken)
	}
	return strings.TrimSpace(tok), nil
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

// LoopbackHost reports whether a request's Host (or gRPC :authority)
// names this machine: localhost, 127.0.0.1 or [::1], with any port or
// none. Any other name could be a DNS-rebinding attacker's; see the
// gateway API's demo checks.
func LoopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}
