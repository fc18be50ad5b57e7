package api

// The gate every FleetService call passes, gRPC and REST alike (REST
// reaches the gRPC server over the in-process pipe):
//
//	1. the request id (the caller's or a new one), sent back at once;
//	2. who is calling (auth.Guard.Identify): 401 without a good token;
//	3. what the call asks, as auth.Attributes, from the method table
//	   below and the request (CallBoard's board, method and path,
//	   DoAction's kind and targets ...): 400 when malformed;
//	4. the decision (auth.Guard.Check, which asks auth.Authorize): 403;
//	5. the limits: changing calls per token and second, watch streams
//	   per token and in total: 429 with a RetryInfo (REST: Retry-After);
//	6. the call, in a context that ends when the caller's token is
//	   revoked (the call then ends Unauthenticated);
//	7. the record: the audit log gets every refusal and every change let
//	   in with its outcome; the request log gets every call, with who
//	   made it.
//
// A method missing from the table is refused to everyone.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/auth"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// rule is what one FleetService method asks of the policy.
type rule struct {
	verb auth.Verb
	res  auth.Resource
	// watch marks the long streams the stream limits count.
	watch bool
	// public marks what anyone may call without a token: gRPC's health
	// (probes). A token, when sent, is still checked. Their streams
	// (Watch) count in a pool of their own, per source address.
	public bool
	// reflection marks gRPC server reflection: public in demo mode and
	// a lab (as health), else it needs a viewer token (grpcurl -H
	// 'authorization: Bearer ...'). Its streams count like health's
	// when public and like watch streams when a token made them.
	reflection bool
	// attrs adds what the request names (targets, kind, board call); an
	// error (ErrBadRequest) refuses a malformed request before it is
	// decided. Streams have no request at the gate (attrs is not called),
	// except those with a header.
	attrs func(a *auth.Attributes, req any) error
	// header makes the message a client stream's header is received
	// into: the gate receives it once the caller is identified, gives it
	// to attrs, and hands it to the service as the stream's first message.
	header func() any
}

// streamMethods are the gRPC methods that stream (their deadlines are
// lifted once admitted).
var streamMethods = func() map[string]bool {
	m := map[string]bool{healthWatch: true, reflectionV1: true, reflectionV1Alpha: true}
	for _, desc := range []grpc.ServiceDesc{fleetv1.FleetService_ServiceDesc, fleetv1.CueService_ServiceDesc, fleetv1.InstallationService_ServiceDesc} {
		for _, sd := range desc.Streams {
			m["/"+desc.ServiceName+"/"+sd.StreamName] = true
		}
	}
	return m
}()

// rules maps every FleetService method to its verb and resource. The
// roles they need are auth.Authorize's business, nowhere else.
var rules = map[string]rule{
	fleetv1.FleetService_ListBoards_FullMethodName:  {verb: auth.VerbRead, res: auth.ResBoards},
	fleetv1.FleetService_GetBoard_FullMethodName:    {verb: auth.VerbRead, res: auth.ResBoards},
	fleetv1.FleetService_WatchEvents_FullMethodName: {verb: auth.VerbWatch, res: auth.ResEvents, watch: true},
	fleetv1.FleetService_SetLabels_FullMethodName: {verb: auth.VerbUpdate, res: auth.ResBoards, attrs: func(a *auth.Attributes, req any) error {
		a.Boards = nonEmpty(req.(*fleetv1.SetLabelsRequest).GetId())
		return nil
	}},
	fleetv1.FleetService_CallBoard_FullMethodName: {verb: auth.VerbCall, res: auth.ResBoardAPI, attrs: callAttrs},
	fleetv1.FleetService_DoAction_FullMethodName:  {verb: auth.VerbAct, res: auth.ResActions, attrs: actionAttrs},
	fleetv1.FleetService_CreateToken_FullMethodName: {verb: auth.VerbCreate, res: auth.ResTokens, attrs: func(a *auth.Attributes, req any) error {
		r := req.(*fleetv1.CreateTokenRequest)
		a.Name, a.Kind = r.GetName(), r.GetRole()
		return nil
	}},
	fleetv1.FleetService_ListTokens_FullMethodName:  {verb: auth.VerbRead, res: auth.ResTokens},
	fleetv1.FleetService_WhoAmI_FullMethodName:      {verb: auth.VerbRead, res: auth.ResSelf},
	fleetv1.FleetService_RevokeToken_FullMethodName: {verb: auth.VerbDelete, res: auth.ResTokens, attrs: named((*fleetv1.RevokeTokenRequest).GetName)},

	fleetv1.FleetService_UploadArtifact_FullMethodName: {verb: auth.VerbCreate, res: auth.ResArtifacts},
	fleetv1.FleetService_ListArtifacts_FullMethodName:  {verb: auth.VerbRead, res: auth.ResArtifacts},
	fleetv1.FleetService_GetArtifact_FullMethodName:    {verb: auth.VerbRead, res: auth.ResArtifacts},
	fleetv1.FleetService_DeleteArtifact_FullMethodName: {verb: auth.VerbDelete, res: auth.ResArtifacts, attrs: named((*fleetv1.DeleteArtifactRequest).GetSha256)},
	fleetv1.FleetService_SetChannel_FullMethodName: {verb: auth.VerbUpdate, res: auth.ResChannels, attrs: func(a *auth.Attributes, req any) error {
		r := req.(*fleetv1.SetChannelRequest)
		a.Name, a.Selector = r.GetName(), "sha256="+r.GetSha256()
		return nil
	}},
	fleetv1.FleetService_ListChannels_FullMethodName:  {verb: auth.VerbRead, res: auth.ResChannels},
	fleetv1.FleetService_DeleteChannel_FullMethodName: {verb: auth.VerbDelete, res: auth.ResChannels, attrs: named((*fleetv1.DeleteChannelRequest).GetName)},

	fleetv1.FleetService_DryRunRollout_FullMethodName: {verb: auth.VerbRead, res: auth.ResRollouts},
	fleetv1.FleetService_CreateRollout_FullMethodName: {verb: auth.VerbCreate, res: auth.ResRollouts, attrs: func(a *auth.Attributes, req any) error {
		p := req.(*fleetv1.CreateRolloutRequest).GetPlan()
		t := p.GetTarget()
		a.Name, a.Boards = p.GetName(), t.GetBoards()
		a.Selector = selectorText(t.GetGroups(), t.GetLabels(), t.GetAll())
		if fw := t.GetFirmware(); fw != "" {
			a.Selector = strings.TrimSpace(a.Selector + " firmware=" + fw)
		}
		a.Kind = "artifact=" + p.GetArtifact()
		return nil
	}},
	fleetv1.FleetService_ListRollouts_FullMethodName:      {verb: auth.VerbRead, res: auth.ResRollouts},
	fleetv1.FleetService_GetRollout_FullMethodName:        {verb: auth.VerbRead, res: auth.ResRollouts},
	fleetv1.FleetService_ListRolloutBoards_FullMethodName: {verb: auth.VerbRead, res: auth.ResRollouts},
	// The brakes (pause, abort) halt; resuming and reverting change what
	// boards run.
	fleetv1.FleetService_PauseRollout_FullMethodName:  {verb: auth.VerbHalt, res: auth.ResRollouts, attrs: rolloutID},
	fleetv1.FleetService_AbortRollout_FullMethodName:  {verb: auth.VerbHalt, res: auth.ResRollouts, attrs: rolloutID},
	fleetv1.FleetService_ResumeRollout_FullMethodName: {verb: auth.VerbUpdate, res: auth.ResRollouts, attrs: rolloutID},
	fleetv1.FleetService_RevertRollout_FullMethodName: {verb: auth.VerbUpdate, res: auth.ResRollouts, attrs: rolloutID},
	fleetv1.FleetService_WatchRollout_FullMethodName:  {verb: auth.VerbWatch, res: auth.ResRollouts, watch: true},

	fleetv1.FleetService_ListAudit_FullMethodName: {verb: auth.VerbRead, res: auth.ResAudit},

	fleetv1.FleetService_GetCluster_FullMethodName:    {verb: auth.VerbRead, res: auth.ResCluster},
	fleetv1.FleetService_RemoveGateway_FullMethodName: {verb: auth.VerbDelete, res: auth.ResCluster, attrs: named((*fleetv1.RemoveGatewayRequest).GetName)},

	// The cue lists (gateway/cue): viewers read and watch, operators run
	// them, admins save and delete them.
	fleetv1.CueService_ListCueLists_FullMethodName:  {verb: auth.VerbRead, res: auth.ResCues},
	fleetv1.CueService_WatchCues_FullMethodName:     {verb: auth.VerbWatch, res: auth.ResCues, watch: true},
	fleetv1.CueService_GetCueList_FullMethodName:    cueRule(auth.VerbRead),
	fleetv1.CueService_GetCueState_FullMethodName:   cueRule(auth.VerbRead),
	fleetv1.CueService_PutCueList_FullMethodName:    cueRule(auth.VerbUpdate),
	fleetv1.CueService_DeleteCueList_FullMethodName: cueRule(auth.VerbDelete),
	fleetv1.CueService_GoCue_FullMethodName:         cueRule(auth.VerbAct),
	fleetv1.CueService_StopCues_FullMethodName:      cueRule(auth.VerbAct),
	fleetv1.CueService_BackCue_FullMethodName:       cueRule(auth.VerbAct),
	fleetv1.CueService_SetCueStandby_FullMethodName: cueRule(auth.VerbAct),
	fleetv1.CueService_StartCue_FullMethodName:      cueRule(auth.VerbAct),

	// The installation (gateway/installation): reads for viewers, the
	// brakes for operators, applies, rollbacks and resumes for admins.
	fleetv1.InstallationService_PlanInstallation_FullMethodName:          {verb: auth.VerbRead, res: auth.ResInstallation},
	fleetv1.InstallationService_GetInstallationStatus_FullMethodName:     {verb: auth.VerbRead, res: auth.ResInstallation},
	fleetv1.InstallationService_ListInstallationRevisions_FullMethodName: {verb: auth.VerbRead, res: auth.ResInstallation},
	fleetv1.InstallationService_GetInstallationRevision_FullMethodName:   {verb: auth.VerbRead, res: auth.ResInstallation},
	fleetv1.InstallationService_GetInstallationRun_FullMethodName:        {verb: auth.VerbRead, res: auth.ResInstallation},
	fleetv1.InstallationService_ApplyInstallation_FullMethodName: {verb: auth.VerbCreate, res: auth.ResInstallation, attrs: func(a *auth.Attributes, _ any) error {
		a.Name = "apply"
		return nil
	}},
	fleetv1.InstallationService_RollbackInstallation_FullMethodName: {verb: auth.VerbUpdate, res: auth.ResInstallation, attrs: func(a *auth.Attributes, req any) error {
		a.Name = fmt.Sprintf("rollback to revision %d", req.(*fleetv1.RollbackInstallationRequest).GetRevision())
		return nil
	}},
	fleetv1.InstallationService_ControlInstallationRun_FullMethodName: {verb: auth.VerbUpdate, res: auth.ResInstallation, attrs: installationControl},
	// A content upload is decided and audited as REST's POST
	// /v1/installation/content: "content <sha256>", from its header.
	fleetv1.InstallationService_UploadInstallationContent_FullMethodName: {verb: auth.VerbCreate, res: auth.ResInstallation,
		header: func() any { return new(fleetv1.UploadInstallationContentRequest) },
		attrs: func(a *auth.Attributes, req any) error {
			a.Name = "content " + req.(*fleetv1.UploadInstallationContentRequest).GetHeader().GetSha256()
			return nil
		}},

	// Standard services the gateway may serve beside FleetService.
	healthCheck:       {verb: auth.VerbRead, public: true},
	healthList:        {verb: auth.VerbRead, public: true},
	healthWatch:       {verb: auth.VerbWatch, public: true, watch: true},
	reflectionV1:      {verb: auth.VerbRead, res: auth.ResSchema, reflection: true, watch: true},
	reflectionV1Alpha: {verb: auth.VerbRead, res: auth.ResSchema, reflection: true, watch: true},
}

// Full method names of gRPC's standard health and reflection services.
const (
	healthCheck       = "/grpc.health.v1.Health/Check"
	healthList        = "/grpc.health.v1.Health/List"
	healthWatch       = "/grpc.health.v1.Health/Watch"
	reflectionV1      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	reflectionV1Alpha = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// callAttrs names CallBoard's board and board API request. A path that is
// not absolute is malformed (the service refuses it too); one that is
// not canonical (auth.CanonicalBoardPath: %77eb, //web, /a/../web ...) is
// refused before it is decided, and recorded, so that the path decided
// is exactly the path the service sends.
func callAttrs(a *auth.Attributes, req any) error {
	r := req.(*fleetv1.CallBoardRequest)
	a.Boards = nonEmpty(r.GetId())
	a.Method, a.Path = strings.ToUpper(r.GetMethod()), r.GetPath()
	if !strings.HasPrefix(r.GetPath(), "/") {
		return fmt.Errorf("%w: path %q must start with /", ErrBadRequest, r.GetPath())
	}
	send, _, err := auth.CanonicalBoardPath(r.GetPath())
	if err != nil {
		return err
	}
	a.Path = send
	return nil
}

// actionAttrs names DoAction's kind and targets.
func actionAttrs(a *auth.Attributes, req any) error {
	r := req.(*fleetv1.DoActionRequest)
	sel := r.GetSelector()
	a.Kind, a.Boards = r.GetKind(), sel.GetBoards()
	a.Selector = selectorText(sel.GetGroups(), sel.GetLabels(), sel.GetAll())
	return nil
}

// cueRule is a CueService call about one list: resource cues, the list's
// name in the audit record.
func cueRule(verb auth.Verb) rule {
	return rule{verb: verb, res: auth.ResCues, attrs: func(a *auth.Attributes, req any) error {
		if r, ok := req.(interface{ GetName() string }); ok {
			a.Name = r.GetName()
		}
		return nil
	}}
}

// installationControl decides an installation run's pause and abort as
// the brakes (operators) and its resume as a change (admins).
func installationControl(a *auth.Attributes, req any) error {
	r := req.(*fleetv1.ControlInstallationRunRequest)
	a.Name = fmt.Sprintf("%s run %d", r.GetAction(), r.GetId())
	switch r.GetAction() {
	case "pause", "abort":
		a.Verb = auth.VerbHalt
	case "resume":
		a.Verb = auth.VerbUpdate
	default:
		return fmt.Errorf("%w: action %q: want pause, resume or abort", ErrBadRequest, r.GetAction())
	}
	return nil
}

// named attributes a call the name its request carries: the token,
// artifact, channel or gateway it acts on.
func named[R any](name func(R) string) func(*auth.Attributes, any) error {
	return func(a *auth.Attributes, req any) error {
		a.Name = name(req.(R))
		return nil
	}
}

func rolloutID(a *auth.Attributes, req any) error {
	if r, ok := req.(interface{ GetId() string }); ok {
		a.Name = r.GetId()
	}
	return nil
}

// selectorText describes targets chosen by group, label or all:
// "all groups=1,2 labels=room=hall".
func selectorText(groups []int32, labels map[string]string, all bool) string {
	var parts []string
	if all {
		parts = append(parts, "all")
	}
	if len(groups) > 0 {
		gs := make([]string, len(groups))
		for i, g := range groups {
			gs[i] = fmt.Sprint(g)
		}
		parts = append(parts, "groups="+strings.Join(gs, ","))
	}
	if len(labels) > 0 {
		ls := make([]string, 0, len(labels))
		for k, v := range labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		parts = append(parts, "labels="+strings.Join(ls, ","))
	}
	return strings.Join(parts, " ")
}

// gate is the interceptors' state: the guard, the limits and the logger.
type gate struct {
	guard   *auth.Guard
	rate    *auth.RateLimiter
	streams *auth.StreamLimiter
	// public counts the streams of public methods (health Watch, and
	// reflection where it is public) per source address and in all,
	// apart from streams, which it can never starve.
	public *auth.StreamLimiter
	// openReflection makes reflection public (demo mode, a lab).
	openReflection bool
	// idle ends a health Watch or reflection stream quiet for this long
	// (0: never), timed by clk.
	idle time.Duration
	clk  clock.Clock
	log  *slog.Logger
}

// isPublic reports whether r is open to callers without a token here.
func (g *gate) isPublic(r rule) bool {
	return r.public || (r.reflection && g.openReflection)
}

// sourceKey is the public-stream limit key of a caller: its host.
func sourceKey(c auth.Caller) string {
	host := c.Addr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return "source:" + host
}

// call is one request passing the gate.
type call struct {
	method string // full gRPC method name
	start  time.Time
	caller auth.Caller
	attrs  auth.Attributes
}

func (g *gate) begin(ctx context.Context, method string) *call {
	c := &call{method: method, start: time.Now(), caller: auth.CallerOf(ctx)}
	c.attrs = auth.Attributes{Surface: c.caller.Surface, Client: c.caller.Addr, Agent: c.caller.Agent,
		Operation: path.Base(method), RequestID: incomingRequestID(ctx)}
	return c
}

// admit runs steps 2 to 5 and prepares 6: it returns the call's context
// (carrying the identity, ending on revocation), the pending audit record
// and the function that releases what the call holds. req gives the
// request attrs reads (nil: none); it is asked only once the caller is
// identified, so a stream's header is not read from an unknown caller.
func (g *gate) admit(ctx context.Context, c *call, method string, req func() (any, error)) (context.Context, *auth.Pending, func(), error) {
	r, ok := rules[method]
	if !ok {
		err := fmt.Errorf("%w: %s is not open to any role", auth.ErrForbidden, method)
		return g.refuse(ctx, c, codes.PermissionDenied, err)
	}
	c.attrs.Verb, c.attrs.Resource = r.verb, r.res
	id, err := g.guard.Identify(c.caller)
	if g.isPublic(r) && (err == nil || errors.Is(err, auth.ErrNoToken)) {
		// Anyone may; every stream counts in the public pool, per source
		// address, whoever makes it: a crowd of sources fills that pool,
		// never the authenticated streams'.
		release := func() {}
		if streamMethods[method] {
			if release, err = g.public.Acquire(sourceKey(c.caller)); err != nil {
				return g.refuse(ctx, c, codes.ResourceExhausted, err)
			}
		}
		c.attrs.Who = id
		return auth.WithRequestID(auth.WithIdentity(ctx, id), c.attrs.RequestID), &auth.Pending{}, release, nil
	}
	if err != nil {
		return g.refuse(ctx, c, codes.Unauthenticated, err)
	}
	c.attrs.Who = id
	if r.attrs != nil && req != nil {
		m, err := req()
		if err != nil {
			return g.refuse(ctx, c, status.Code(err), err)
		}
		if m != nil {
			if err := r.attrs(&c.attrs, m); err != nil {
				return g.refuse(ctx, c, codes.InvalidArgument, err)
			}
		}
	}
	p, err := g.guard.Check(c.attrs) // records a denial itself
	if err != nil {
		return ctx, p, func() {}, Err(err)
	}
	key := auth.Key(id, c.caller)
	if c.attrs.Changing() {
		if err := g.rate.Allow(key); err != nil {
			return g.refuse(ctx, c, codes.ResourceExhausted, err)
		}
	}
	release := func() {}
	if r.watch {
		if release, err = g.streams.Acquire(key); err != nil {
			return g.refuse(ctx, c, codes.ResourceExhausted, err)
		}
	}
	ctx, cancel := g.guard.Bind(ctx, id)
	ctx = auth.WithRequestID(auth.WithIdentity(ctx, id), c.attrs.RequestID)
	return ctx, p, func() { cancel(); release() }, nil
}

// refuse records a refusal the policy did not make and returns its
// status error.
func (g *gate) refuse(ctx context.Context, c *call, code codes.Code, err error) (context.Context, *auth.Pending, func(), error) {
	g.guard.Record(c.attrs, false, code.String(), err.Error())
	return ctx, &auth.Pending{}, func() {}, Err(err)
}

// revoked turns the error of a call cut short by its token's revocation
// into that revocation (Unauthenticated).
func revoked(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, auth.ErrBadToken) {
		return Err(cause)
	}
	return err
}

func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	c := g.begin(ctx, info.FullMethod)
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDKey, c.attrs.RequestID))
	cctx, p, release, err := g.admit(ctx, c, info.FullMethod, func() (any, error) { return req, nil })
	if err != nil {
		g.logDone(ctx, c, err)
		return nil, err
	}
	resp, err := h(cctx, req)
	err = revoked(cctx, err)
	release()
	p.Done(status.Code(err).String())
	g.logDone(ctx, c, err)
	return resp, err
}

func (g *gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx := ss.Context()
	c := g.begin(ctx, info.FullMethod)
	_ = ss.SetHeader(metadata.Pairs(RequestIDKey, c.attrs.RequestID))
	hs := &headerStream{ServerStream: ss}
	var header func() (any, error)
	if r := rules[info.FullMethod]; r.header != nil {
		header = func() (any, error) { return hs.receive(r.header()) }
	}
	cctx, p, release, err := g.admit(ctx, c, info.FullMethod, header)
	if err != nil {
		g.logDone(ctx, c, err)
		return err
	}
	ss = hs
	if r := rules[info.FullMethod]; (r.public || r.reflection) && g.idle > 0 {
		err = g.idleStream(cctx, ss, func(s grpc.ServerStream) error { return h(srv, s) })
	} else {
		err = h(srv, &ctxStream{ServerStream: ss, ctx: cctx})
	}
	err = revoked(cctx, err)
	release()
	p.Done(status.Code(err).String())
	g.logDone(ctx, c, err)
	return err
}

// errIdle ends a public stream that stayed quiet too long.
var errIdle = errors.New("stream idle")

// idleStream runs a health Watch or reflection stream that ends with
// DeadlineExceeded once it has neither sent nor received a message for
// g.idle: its context is cancelled (Watch waits on it) and a pending
// receive returns (reflection waits in one).
func (g *gate) idleStream(ctx context.Context, ss grpc.ServerStream, h func(grpc.ServerStream) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := g.clk.AfterFunc(g.idle, func() { cancel(errIdle) })
	defer t.Stop()
	is := &quietStream{ServerStream: ss, ctx: ctx, touch: func() { t.Reset(g.idle) }}
	err := h(is)
	if errors.Is(context.Cause(ctx), errIdle) {
		return status.Errorf(codes.DeadlineExceeded, "stream idle for %v, the gateway's limit (--public-stream-idle)", g.idle)
	}
	return err
}

// quietStream is a stream whose messages keep it alive (touch) and
// whose receives end with its context.
type quietStream struct {
	grpc.ServerStream
	ctx   context.Context
	touch func()
}

func (q *quietStream) Context() context.Context { return q.ctx }

func (q *quietStream) SendMsg(m any) error {
	q.touch()
	return q.ServerStream.SendMsg(m)
}

func (q *quietStream) RecvMsg(m any) error {
	done := make(chan error, 1)
	go func() { done <- q.ServerStream.RecvMsg(m) }()
	select {
	case err := <-done:
		if err == nil {
			q.touch()
		}
		return err
	case <-q.ctx.Done():
		// The receive goroutine ends with the stream, which ends when
		// the handler returns.
		return status.FromContextError(q.ctx.Err()).Err()
	}
}

// headerStream is a client stream whose first message the gate may
// receive (receive) before the service; the service's first RecvMsg
// then gets it.
type headerStream struct {
	grpc.ServerStream
	first any
}

// receive takes the stream's first message into m. A stream that ends
// first is malformed (InvalidArgument).
func (h *headerStream) receive(m any) (any, error) {
	err := h.ServerStream.RecvMsg(m)
	if errors.Is(err, io.EOF) {
		return nil, status.Error(codes.InvalidArgument, "the stream ended before its header")
	}
	if err != nil {
		return nil, err
	}
	h.first = m
	return m, nil
}

func (h *headerStream) RecvMsg(m any) error {
	if h.first == nil {
		return h.ServerStream.RecvMsg(m)
	}
	first := h.first
	h.first = nil
	dst, ok := m.(proto.Message)
	src, ok2 := first.(proto.Message)
	if !ok || !ok2 {
		return status.Errorf(codes.Internal, "stream header of type %T", first)
	}
	proto.Reset(dst)
	proto.Merge(dst, src)
	return nil
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *ctxStream) Context() context.Context { return c.ctx }

// logDone writes the request log's record of a call, at Info: method,
// gRPC code, duration, request id, who (token and role), surface and
// client; a failed or refused call also carries the error. Health checks
// and reflection (probes, every few seconds) log at Debug.
func (g *gate) logDone(ctx context.Context, c *call, err error) {
	who := c.attrs.Who
	role := ""
	if who.Role != auth.RoleNone {
		role = who.Role.String()
	}
	attrs := []slog.Attr{slog.String("method", c.method), slog.String("code", status.Code(err).String()),
		slog.Duration("duration", time.Since(c.start)), slog.String("request_id", c.attrs.RequestID),
		slog.String("token", who.Name), slog.String("role", role), slog.String("surface", string(c.attrs.Surface)),
		slog.String("client", c.attrs.Client)}
	if err != nil {
		attrs = append(attrs, slog.String("err", status.Convert(err).Message()))
	}
	level := slog.LevelInfo
	if r := rules[c.method]; r.public || r.reflection {
		level = slog.LevelDebug
	}
	g.log.LogAttrs(ctx, level, "api: request", attrs...)
}
