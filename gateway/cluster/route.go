package cluster

// Routing: a request for another gateway's board goes to that gateway by
// request/reply on holo.gw.<name>.rpc, as one JSON document each way.
// Errors cross as a kind (the sentinel they wrap) and their message, so
// the API maps a remote error exactly as a local one.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/registry"
)

// Operations of a routed request.
const (
	opCall   = "call"
	opImage  = "image" // PUT /ota/image with an artifact of the cluster
	opDo     = "do"
	opLabels = "labels"
	// The installation as code (installation_route.go).
	opInstallPlan   = "install_plan"
	opInstallExport = "install_export"
)

// rpcRequest is a routed request.
type rpcRequest struct {
	Op     string            `json:"op"`
	ID     string            `json:"id,omitempty"`
	Method string            `json:"method,omitempty"`
	Path   string            `json:"path,omitempty"`
	Body   []byte            `json:"body,omitempty"`
	Sel    *fleet.Selector   `json:"sel,omitempty"`
	Action *fleet.Action     `json:"action,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// SHA256 names the artifact of an image request.
	SHA256 string `json:"sha256,omitempty"`
	// From and Boot name the asking gateway's run: its requests are
	// cancelled when that run ends (rawcall.go).
	From string `json:"from"`
	Boot string `json:"boot"`
	// TimeoutMS is what is left of the caller's deadline.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// To is the gateway the request is for, At when it was sent, and
	// Caller who made it (sign.go): the owner checks them all.
	To     string     `json:"to"`
	At     time.Time  `json:"at"`
	Caller *rpcCaller `json:"caller,omitempty"`
}

// rpcReply is the answer to a routed request.
type rpcReply struct {
	Reply   fleet.Reply      `json:"reply"`
	Results []fleet.Result   `json:"results,omitempty"`
	View    *fleet.BoardView `json:"view,omitempty"`
	// Install is an installation plan or export (installation_route.go).
	Install json.RawMessage `json:"install,omitempty"`
	Err     *rpcError       `json:"err,omitempty"`
}

// rpcError is an error crossing gateways.
type rpcError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// kinds are the sentinel errors that keep their identity across gateways.
var kinds = []struct {
	name string
	err  error
}{
	{"unknown_board", fleet.ErrUnknownBoard},
	{"unknown_group", fleet.ErrUnknownGroup},
	{"unreachable", fleet.ErrUnreachable},
	{"no_reply", fleet.ErrNoReply},
	{"not_over_link", fleet.ErrNotOverLink},
	{"bad_reply", fleet.ErrBadReply},
	{"too_large", fleet.ErrTooLarge},
	{"bad_action", fleet.ErrBadAction},
	{"bad_selector", fleet.ErrBadSelector},
	{"closed", fleet.ErrClosed},
	{"bad_label", registry.ErrBadLabel},
	{"unauthenticated", auth.ErrBadToken},
	{"forbidden", auth.ErrForbidden},
	{"deadline", context.DeadlineExceeded},
	{"canceled", context.Canceled},
}

func encodeErr(err error) *rpcError {
	if err == nil {
		return nil
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return &rpcError{Kind: k.name, Message: err.Error()}
		}
	}
	return &rpcError{Kind: "other", Message: err.Error()}
}

// remoteError is an error another gateway returned: its message as it
// was, wrapping the sentinel of its kind.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

func decodeErr(e *rpcError) error {
	if e == nil {
		return nil
	}
	for _, k := range kinds {
		if k.name == e.Kind {
			return &remoteError{msg: e.Message, err: k.err}
		}
	}
	return &remoteError{msg: e.Message}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// rpc sends req to gateway gw and waits for its answer (bounded by ctx, or
// CallTimeout when ctx has no deadline). id names the board for errors.
func (c *Cluster) rpc(ctx context.Context, gw, id string, req rpcRequest) (rpcReply, error) {
	what := id
	if what == "" {
		what = "on gateway " + gw
	}
	if reason := c.partitionReason(); reason != "" {
		return rpcReply{}, unreachable(what, fmt.Errorf("%w: %s", ErrPartitioned, reason))
	}
	c.mu.Lock()
	alive := c.aliveLocked(gw)
	c.st.routedOut++
	c.mu.Unlock()
	if !alive {
		return rpcReply{}, unreachable(what, fmt.Errorf("%w: %s", ErrGatewayDown, gw))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.o.CallTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	req.From, req.Boot, req.TimeoutMS = c.name, c.boot, time.Until(dl).Milliseconds()
	req.To, req.At, req.Caller = gw, c.clk.Now(), c.callerOf(ctx)
	data, err := json.Marshal(req)
	if err != nil {
		return rpcReply{}, err
	}
	if int64(len(data)) > c.nc.MaxPayload() {
		return rpcReply{}, fmt.Errorf("%w: %w: %d bytes, the engine carries %d", fleet.ErrTooLarge, ErrTooLarge, len(data), c.nc.MaxPayload())
	}
	sent := c.signedMsg(gwSubject(gw), sigRPC, data)
	m, err := c.nc.RequestMsgWithContext(ctx, sent)
	if err == nil {
		err = c.checkReply(sent, m)
		if err != nil {
			return rpcReply{}, err
		}
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return rpcReply{}, unreachable(what, fmt.Errorf("%w: %s", ErrGatewayDown, gw))
	case err != nil && ctx.Err() != nil:
		return rpcReply{}, fmt.Errorf("board %s via gateway %s: %w", what, gw, ctx.Err())
	case err != nil:
		return rpcReply{}, unreachable(what, fmt.Errorf("gateway %s: %w", gw, err))
	}
	var rep rpcReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return rpcReply{}, fmt.Errorf("%w: gateway %s: %v", fleet.ErrBadReply, gw, err)
	}
	if rep.Err != nil {
		return rep, decodeErr(rep.Err)
	}
	return rep, nil
}

// rpcWorkers bounds the routed requests a gateway serves at once.
const rpcWorkers = 64

// serveRPC answers the requests routed to this gateway, each on its own
// goroutine (at most rpcWorkers at once), until ctx ends.
func (c *Cluster) serveRPC(ctx context.Context) nats.MsgHandler {
	sem := make(chan struct{}, rpcWorkers)
	return func(m *nats.Msg) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		go func() {
			defer func() { <-sem }()
			rep := c.handle(ctx, m)
			data, err := json.Marshal(rep)
			if err == nil && int64(len(data)) > c.nc.MaxPayload() {
				data, _ = json.Marshal(rpcReply{Err: encodeErr(fmt.Errorf("%w: the reply is %d bytes, the engine carries %d",
					fleet.ErrTooLarge, len(data), c.nc.MaxPayload()))})
			}
			c.respondSigned(m, data)
		}()
	}
}

// handle runs one routed request on this gateway's fleet core, once it
// has checked that a gateway of the cluster signed it for this gateway,
// and decided it for its caller as the API would (sign.go). Refusals and
// changes are audited.
func (c *Cluster) handle(ctx context.Context, m *nats.Msg) rpcReply {
	var req rpcRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		err = c.refuseRouted(auth.Attributes{Surface: SurfaceCluster, Operation: "routed request to " + c.name + " (unreadable)"},
			fmt.Errorf("%w: routed request: %v", auth.ErrBadToken, err))
		return rpcReply{Err: encodeErr(err)}
	}
	a := c.routedAttrs(req.Caller, "routed "+req.Op)
	routedAttrsOf(&a, req)
	if err := c.checkSigned(m, sigRPC, req.To, req.At); err != nil {
		return rpcReply{Err: encodeErr(c.refuseRouted(a, err))}
	}
	if req.Caller == nil {
		return rpcReply{Err: encodeErr(c.refuseRouted(a, fmt.Errorf("%w: routed request without a caller", auth.ErrNoToken)))}
	}
	if _, err := req.Caller.identity(); err != nil {
		return rpcReply{Err: encodeErr(c.refuseRouted(a, err))}
	}
	p, err := c.o.Guard.Check(a) // records a denial itself
	if err != nil {
		return rpcReply{Err: encodeErr(err)}
	}
	c.mu.Lock()
	c.st.routedIn++
	c.mu.Unlock()
	timeout := c.o.CallTimeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, done := c.bindCaller(ctx, req.From, req.Boot)
	defer done()
	var rep rpcReply
	switch req.Op {
	case opCall:
		rep.Reply, err = c.o.Local.Call(ctx, req.ID, req.Method, req.Path, req.Body)
	case opImage:
		rep.Reply, err = c.sendImage(ctx, req)
	case opDo:
		if req.Sel == nil || req.Action == nil {
			err = fmt.Errorf("%w: routed action without selector or action", fleet.ErrBadSelector)
			break
		}
		rep.Results, err = c.doLocal(ctx, *req.Sel, *req.Action)
	case opLabels:
		var v fleet.BoardView
		v, err = c.o.Local.SetLabels(req.ID, req.Labels)
		if err == nil {
			v.Gateway = c.name
			rep.View = &v
			c.poke()
		}
	case opInstallPlan, opInstallExport:
		rep.Install, err = c.installRouted(ctx, req)
	default:
		err = fmt.Errorf("%w: unknown routed operation %q", fleet.ErrBadReply, req.Op)
	}
	p.Done(outcomeCode(err))
	rep.Err = encodeErr(err)
	return rep
}

// routedAttrsOf fills in what a routed request asks for, as the API
// describes the same request.
func routedAttrsOf(a *auth.Attributes, req rpcRequest) {
	if req.ID != "" {
		a.Boards = []string{req.ID}
	}
	switch req.Op {
	case opCall, opImage:
		a.Verb, a.Resource, a.Method, a.Path = auth.VerbCall, auth.ResBoardAPI, req.Method, req.Path
	case opDo:
		a.Verb, a.Resource = auth.VerbAct, auth.ResActions
		if req.Action != nil {
			a.Kind = req.Action.Kind
		}
		if s := req.Sel; s != nil {
			a.Boards = s.Boards
			a.Selector = fmt.Sprintf("groups=%v labels=%v all=%v", s.Groups, s.Labels, s.All)
		}
	case opLabels:
		a.Verb, a.Resource = auth.VerbUpdate, auth.ResBoards
	case opInstallPlan:
		a.Verb, a.Resource, a.Name = auth.VerbRead, auth.ResInstallation, "plan"
	case opInstallExport:
		// Reading the boards' files into the content stores, as the
		// API's export: an admin's.
		a.Verb, a.Resource, a.Name = auth.VerbCreate, auth.ResInstallation, "export"
	default:
		// The policy denies what it does not name.
		a.Verb, a.Resource = auth.Verb(req.Op), auth.Resource("routed")
	}
}

// outcomeCode is the audit outcome of a routed request's error.
func outcomeCode(err error) string {
	if err == nil {
		return auth.CodeOK
	}
	if e := encodeErr(err); e != nil {
		return e.Kind
	}
	return "Unknown"
}
