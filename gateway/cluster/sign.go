package cluster

// Signatures under the cluster secret.
//
// An engine login lets a client publish to the routing subjects and write
// the buckets; it does not make that client a gateway. What a gateway
// must believe comes signed with the cluster secret, which only gateways
// hold (the credentials file's secret= line; the engine never sees it):
//
//   - routed requests (holo.gw.<name>.rpc, holo.rollouts.rpc) carry an
//     HMAC-SHA256 of their body in the Holo-Sig header. The body names
//     the caller (the token's name and role, or the gateway itself for
//     its own work such as a rollout step), the gateway the request came
//     in on, the gateway it is for, and when it was sent. The owner
//     checks the signature, the addressee and the time (maxSkew), then
//     decides the request again with auth.Authorize, as the API would,
//     and audits it as the API does. An unsigned, badly signed, stale or
//     misaddressed request is refused and audited.
//   - token records (holo_tokens) carry an HMAC of their fields; a
//     record without a good one is not honoured, and audited.
//
// A signed request seen on the wire can be replayed to the same gateway
// within maxSkew by someone able to read it: gateway users may read only
// their own subjects (GatewayPermissions), and TLS keeps it off the wire.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/peer"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// sigHeader is the header of a routed request's signature.
const sigHeader = "Holo-Sig"

// maxSkew is how far a routed request's time may be from the owner's
// clock.
const maxSkew = 2 * time.Minute

// SurfaceCluster names routed requests in the audit log.
const SurfaceCluster auth.Surface = "cluster"

// ErrUnsigned: a routed request or token record that no gateway of the
// cluster signed.
var ErrUnsigned = errors.New("cluster: not signed by a gateway of the cluster")

// Purposes of a signature: a signature made for one is no good for
// another.
const (
	sigRPC      = "holo-rpc"
	sigRollouts = "holo-rollouts"
	sigToken    = "holo-token"
	// A reply is signed with its request's signature, so it answers
	// that request only.
	sigReply = "holo-reply"
)

// mac signs data for purpose under the cluster secret.
func mac(secret []byte, purpose string, data []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write(data)
	return base64.RawStdEncoding.EncodeToString(h.Sum(nil))
}

// goodMAC reports whether sig is data's signature for purpose.
func goodMAC(secret []byte, purpose string, data []byte, sig string) bool {
	if len(secret) == 0 || sig == "" {
		return false
	}
	want := mac(secret, purpose, data)
	return hmac.Equal([]byte(want), []byte(sig))
}

// rpcCaller is who made a routed request, as the gateway it came in on
// established it.
type rpcCaller struct {
	// Name and Role are the identity's (a token's name, or
	// auth.InsecureName, auth.LoopbackName); empty for the gateway's own
	// work (System).
	Name  string `json:"name,omitempty"`
	Role  string `json:"role,omitempty"`
	Token bool   `json:"token,omitempty"`
	// System marks a request of the gateway itself, made for a caller it
	// decided on already (a rollout step, an MQTT command, labels).
	System bool `json:"system,omitempty"`
	// Via is the gateway the request came in on.
	Via string `json:"via"`
	// Client and Surface are where the caller called from, when known.
	Client  string `json:"client,omitempty"`
	Surface string `json:"surface,omitempty"`
	// RequestID is the id the entry gateway gave the caller's request:
	// the owner's audit records of it carry the same.
	RequestID string `json:"request_id,omitempty"`
}

// callerOf is the caller of a request this gateway routes: the identity
// the API attached to ctx, else this gateway itself.
func (c *Cluster) callerOf(ctx context.Context) *rpcCaller {
	id, ok := auth.FromContext(ctx)
	if !ok || id.Name == "" {
		return &rpcCaller{System: true, Via: c.name, RequestID: auth.RequestIDFrom(ctx)}
	}
	rc := &rpcCaller{Name: id.Name, Role: id.Role.String(), Token: id.Token, Via: c.name, RequestID: auth.RequestIDFrom(ctx)}
	if _, ok := peer.FromContext(ctx); ok {
		cl := auth.CallerOf(ctx)
		rc.Client, rc.Surface = cl.Addr, string(cl.Surface)
	}
	return rc
}

// identity is the identity the owner decides a routed request with.
func (rc *rpcCaller) identity() (auth.Identity, error) {
	if rc.System {
		return auth.Identity{Name: "gateway " + rc.Via, Role: auth.RoleAdmin}, nil
	}
	role, err := auth.ParseRole(rc.Role)
	if err != nil || rc.Name == "" {
		return auth.Identity{}, fmt.Errorf("%w: routed request with a bad identity %q/%q", auth.ErrBadToken, rc.Name, rc.Role)
	}
	return auth.Identity{Name: rc.Name, Role: role, Token: rc.Token}, nil
}

// signedMsg is a request to subject with data signed for purpose.
func (c *Cluster) signedMsg(subject, purpose string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(sigHeader, mac(c.eng.Secret(), purpose, data))
	return m
}

// checkSigned refuses a routed message not signed for purpose, sent at a
// time too far from now, or addressed to another gateway (to != "" and
// not this one).
func (c *Cluster) checkSigned(m *nats.Msg, purpose string, to string, at time.Time) error {
	if !goodMAC(c.eng.Secret(), purpose, m.Data, m.Header.Get(sigHeader)) {
		return fmt.Errorf("%w: %w (no or a bad %s)", auth.ErrBadToken, ErrUnsigned, sigHeader)
	}
	if to != "" && to != c.name {
		return fmt.Errorf("%w: %w: routed to %q, this is %q", auth.ErrBadToken, ErrUnsigned, to, c.name)
	}
	if d := c.clk.Now().Sub(at); d > maxSkew || d < -maxSkew {
		return fmt.Errorf("%w: %w: sent at %s, %v from this gateway's clock", auth.ErrBadToken, ErrUnsigned, at.Format(time.RFC3339), d.Round(time.Second))
	}
	return nil
}

// refuseRouted audits a routed request refused before it could be
// decided, and returns the error the caller gets.
func (c *Cluster) refuseRouted(a auth.Attributes, err error) error {
	c.o.Guard.Refuse(a, err)
	c.log.Warn("cluster: routed request refused", "subject", a.Operation, "err", err)
	return err
}

// routedAttrs are the audit attributes of a routed request: who (as the
// entry gateway said), from which gateway, to which.
func (c *Cluster) routedAttrs(rc *rpcCaller, what string) auth.Attributes {
	a := auth.Attributes{Surface: SurfaceCluster, Operation: what}
	if rc == nil {
		a.Operation += " (no caller)"
		return a
	}
	if id, err := rc.identity(); err == nil {
		a.Who = id
	} else {
		a.Who = auth.Identity{Name: rc.Name}
	}
	a.Client, a.RequestID = rc.Client, rc.RequestID
	in := rc.Via
	if in == "" {
		in = "?"
	}
	a.Operation = fmt.Sprintf("%s: came in on gateway %s, owner %s", what, in, c.name)
	if rc.Surface != "" {
		a.Operation += " (" + rc.Surface + ")"
	}
	return a
}

// respondSigned answers request m with data, signed for that request.
func (c *Cluster) respondSigned(m *nats.Msg, data []byte) {
	if m.Reply == "" {
		return
	}
	r := nats.NewMsg(m.Reply)
	r.Data = data
	r.Header.Set(sigHeader, mac(c.eng.Secret(), sigReply, replyData(m.Header.Get(sigHeader), data)))
	_ = m.RespondMsg(r)
}

// checkReply refuses a reply to req that no gateway signed: an engine
// client answering in a gateway's place.
func (c *Cluster) checkReply(req, rep *nats.Msg) error {
	if rep == nil || !goodMAC(c.eng.Secret(), sigReply, replyData(req.Header.Get(sigHeader), rep.Data), rep.Header.Get(sigHeader)) {
		return fmt.Errorf("%w: the reply to %s is %w", fleet.ErrBadReply, req.Subject, ErrUnsigned)
	}
	return nil
}

func replyData(reqSig string, data []byte) []byte {
	return append([]byte(reqSig+"\x00"), data...)
}
