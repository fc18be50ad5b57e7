package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// WatchHeader is the header metadata key WatchEvents sends once the watch
// is in place.
const WatchHeader = "holo-watching"

// service implements FleetService over a fleet.Service and the tokens.
type service struct {
	fleetv1.UnimplementedFleetServiceServer
	fleet    fleet.Service
	tokens   *auth.Tokens
	arts     Artifacts       // nil: no firmware store
	rollouts rollout.Service // nil: no rollouts
	audit    AuditLog        // nil: no audit log
	cluster  Cluster         // nil: the gateway runs alone
}

func (s *service) ListBoards(_ context.Context, r *fleetv1.ListBoardsRequest) (*fleetv1.ListBoardsResponse, error) {
	f, err := filterOf(r.GetGroup(), r.GetSelector(), r.GetFirmware(), r.Online, r.GetIds())
	if err != nil {
		return nil, Err(err)
	}
	views := s.fleet.Boards(f)
	out := &fleetv1.ListBoardsResponse{Boards: make([]*fleetv1.Board, 0, len(views))}
	for _, v := range views {
		out.Boards = append(out.Boards, boardOf(v))
	}
	return out, nil
}

func (s *service) GetBoard(_ context.Context, r *fleetv1.GetBoardRequest) (*fleetv1.Board, error) {
	if r.GetId() == "" {
		return nil, Err(fmt.Errorf("%w: id is required", ErrBadRequest))
	}
	v, err := s.fleet.Board(r.GetId())
	if err != nil {
		return nil, Err(err)
	}
	return boardOf(v), nil
}

func (s *service) SetLabels(_ context.Context, r *fleetv1.SetLabelsRequest) (*fleetv1.Board, error) {
	if r.GetId() == "" {
		return nil, Err(fmt.Errorf("%w: id is required", ErrBadRequest))
	}
	for k := range r.GetLabels() {
		if !validLabelKey(k) {
			return nil, Err(fmt.Errorf("%w: label key %q (letters, digits, '-', '_', '.', '/'; at most 63)", ErrBadRequest, k))
		}
	}
	labels := r.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	v, err := s.fleet.SetLabels(r.GetId(), labels)
	if err != nil {
		return nil, Err(err)
	}
	return boardOf(v), nil
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

func (s *service) CallBoard(ctx context.Context, r *fleetv1.CallBoardRequest) (*fleetv1.CallBoardResponse, error) {
	method := strings.ToUpper(r.GetMethod())
	switch {
	case r.GetId() == "":
		return nil, Err(fmt.Errorf("%w: id is required", ErrBadRequest))
	case !methods[method]:
		return nil, Err(fmt.Errorf("%w: method %q (GET, POST, PUT, PATCH or DELETE)", ErrBadRequest, r.GetMethod()))
	case !strings.HasPrefix(r.GetPath(), "/"):
		return nil, Err(fmt.Errorf("%w: path %q must start with /", ErrBadRequest, r.GetPath()))
	}
	// Exactly the path the gate decided on (callAttrs): canonical, or
	// refused.
	path, _, err := auth.CanonicalBoardPath(r.GetPath())
	if err != nil {
		return nil, Err(err)
	}
	body, err := jsonOf(r.GetBody())
	if err != nil {
		return nil, Err(err)
	}
	reply, err := s.fleet.Call(ctx, r.GetId(), method, path, body)
	if err != nil {
		return nil, Err(err)
	}
	if err := reply.Err(); err != nil {
		return nil, Err(err)
	}
	return &fleetv1.CallBoardResponse{Status: int32(reply.Status), Body: string(reply.Body)}, nil
}

func (s *service) DoAction(ctx context.Context, r *fleetv1.DoActionRequest) (*fleetv1.DoActionResponse, error) {
	body, err := jsonOf(r.GetBody())
	if err != nil {
		return nil, Err(err)
	}
	ps := r.GetSelector()
	sel := fleet.Selector{Boards: ps.GetBoards(), Labels: ps.GetLabels(), All: ps.GetAll()}
	for _, g := range ps.GetGroups() {
		sel.Groups = append(sel.Groups, int(g))
	}
	act := fleet.Action{Kind: r.GetKind(), Body: body}
	if err := fireTimeOf(r, &act); err != nil {
		// A wrong body or selector is said first.
		if _, perr := fleet.Prepare(sel, fleet.Action{Kind: act.Kind, Body: act.Body}, time.Time{}); perr != nil {
			return nil, Err(perr)
		}
		return nil, Err(err)
	}
	// The action is prepared here, before any board is reached: boards on
	// a line do not answer group frames, so a refused body would go
	// unseen. The fleet checks the moment on its own clock.
	if _, err := fleet.Prepare(sel, act, time.Time{}); err != nil {
		return nil, Err(err)
	}
	results, err := s.fleet.Do(ctx, sel, act)
	if err != nil {
		return nil, Err(err)
	}
	out := &fleetv1.DoActionResponse{Results: make([]*fleetv1.Result, 0, len(results))}
	for _, res := range results {
		pr := &fleetv1.Result{Board: res.Board, Via: res.Via, Status: int32(res.Reply.Status),
			Body: string(res.Reply.Body), Error: res.Error, Message: res.Message, Fire: res.Fire}
		if !res.FiredAt.IsZero() {
			pr.FiredAt = timestamppb.New(res.FiredAt)
		}
		var be *boardapi.Error
		if res.Error == "" && errors.As(res.Reply.Err(), &be) {
			pr.Error, pr.Message = be.Code, be.Message
		}
		out.Results = append(out.Results, pr)
	}
	return out, nil
}

// fireTimeOf sets a's moment from a request's fire_at or lead_ms.
func fireTimeOf(r *fleetv1.DoActionRequest, a *fleet.Action) error {
	switch {
	case r.GetFireAt() != nil && r.GetLeadMs() != 0:
		return fmt.Errorf("%w: give fire_at or lead_ms, not both", ErrBadRequest)
	case r.GetFireAt() != nil:
		if err := r.GetFireAt().CheckValid(); err != nil {
			return fmt.Errorf("%w: fire_at: %v", ErrBadRequest, err)
		}
		a.At = r.GetFireAt().AsTime()
	case r.GetLeadMs() < 0 || r.GetLeadMs() > fleet.MaxFireLead.Milliseconds():
		return fmt.Errorf("%w: lead_ms %d (0-%d)", ErrBadRequest, r.GetLeadMs(), fleet.MaxFireLead.Milliseconds())
	default:
		a.Lead = time.Duration(r.GetLeadMs()) * time.Millisecond
	}
	return nil
}

func (s *service) WatchEvents(r *fleetv1.WatchEventsRequest, stream fleetv1.FleetService_WatchEventsServer) error {
	f, err := filterOf(r.GetGroup(), r.GetSelector(), r.GetFirmware(), r.Online, r.GetIds())
	if err != nil {
		return Err(err)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	after := fleet.Live // no after: from now on
	if r.After != nil {
		after = r.GetAfter() // 0 replays from the first event kept
	}
	w := s.fleet.Watch(ctx, f, after)
	// Headers go out once the watch is in place, so a client knows from
	// then on that no event is missed (and a refused watch, which has no
	// headers, is told apart by the missing WatchHeader).
	if err := stream.SendHeader(metadata.Pairs(WatchHeader, "1")); err != nil {
		return err
	}
	for ev := range w.C {
		if err := stream.Send(eventOf(ev)); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return Err(err)
	}
	if w.Dropped != nil {
		if n := w.Dropped(); n > 0 {
			return Err(fmt.Errorf("%w: %d events dropped; resume with after set to the last n received", ErrFellBehind, n))
		}
	}
	return nil
}

func (s *service) CreateToken(_ context.Context, r *fleetv1.CreateTokenRequest) (*fleetv1.CreateTokenResponse, error) {
	if s.tokens == nil {
		return nil, Err(fmt.Errorf("%w: the gateway has no token store", ErrBadRequest))
	}
	role, err := auth.ParseRole(r.GetRole())
	if err != nil {
		return nil, Err(err)
	}
	secret, tok, err := s.tokens.Create(r.GetName(), role)
	if err != nil {
		return nil, Err(err)
	}
	return &fleetv1.CreateTokenResponse{Token: tokenOf(tok), Secret: secret}, nil
}

func (s *service) WhoAmI(ctx context.Context, _ *fleetv1.WhoAmIRequest) (*fleetv1.Identity, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return nil, Err(auth.ErrNoToken)
	}
	return &fleetv1.Identity{Name: id.Name, Role: id.Role.String()}, nil
}

func (s *service) ListTokens(context.Context, *fleetv1.ListTokensRequest) (*fleetv1.ListTokensResponse, error) {
	out := &fleetv1.ListTokensResponse{Tokens: []*fleetv1.Token{}}
	if s.tokens == nil {
		return out, nil
	}
	for _, t := range s.tokens.List() {
		out.Tokens = append(out.Tokens, tokenOf(t))
	}
	return out, nil
}

func (s *service) RevokeToken(_ context.Context, r *fleetv1.RevokeTokenRequest) (*fleetv1.RevokeTokenResponse, error) {
	if s.tokens == nil {
		return nil, Err(fmt.Errorf("%w: %q", auth.ErrUnknownToken, r.GetName()))
	}
	if err := s.tokens.Revoke(r.GetName()); err != nil {
		return nil, Err(err)
	}
	return &fleetv1.RevokeTokenResponse{}, nil
}

// filterOf builds a fleet filter from request fields.
func filterOf(group int32, selector, firmware string, online *bool, ids []string) (fleet.Filter, error) {
	if group < 0 || group > 31 {
		return fleet.Filter{}, fmt.Errorf("%w: group %d (1-31, or 0 for any)", ErrBadRequest, group)
	}
	labels, err := ParseSelector(selector)
	if err != nil {
		return fleet.Filter{}, err
	}
	return fleet.Filter{Group: int(group), Labels: labels, Firmware: firmware, Online: online, IDs: ids}, nil
}

// ParseSelector parses a label selector "k=v,k2=v2" (spaces around items
// ignored; empty for none).
func ParseSelector(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !validLabelKey(k) {
			return nil, fmt.Errorf("%w: label selector item %q (want key=value)", ErrBadRequest, item)
		}
		out[k] = v
	}
	return out, nil
}

func validLabelKey(k string) bool {
	if k == "" || len(k) > 63 {
		return false
	}
	for _, c := range k {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

// jsonOf returns the JSON text of a request body, nil when unset.
func jsonOf(v *structpb.Value) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrBadRequest, err)
	}
	return b, nil
}

func boardOf(v fleet.BoardView) *fleetv1.Board {
	b := &fleetv1.Board{
		Id: v.ID, Hostname: v.Hostname, Address: int32(v.Address), Line: v.Line, Url: v.URL,
		Labels: v.Labels, Online: v.Online, OfflineReason: v.OfflineReason, Firmware: v.Firmware,
		Transports: v.Transports, Gateway: v.Gateway,
	}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	for _, g := range v.Groups {
		b.Groups = append(b.Groups, int32(g))
	}
	if !v.LastSeen.IsZero() {
		b.LastSeen = timestamppb.New(v.LastSeen)
	}
	if c := v.Clock; c != nil {
		b.ClockOffsetUs, b.ClockUncertaintyUs = c.OffsetUS, c.UncertaintyUS
		b.ClockSyncedAt = timestamppb.New(c.SyncedAt)
	}
	return b
}

func eventOf(e fleet.Event) *fleetv1.Event {
	ev := &fleetv1.Event{N: e.N, Board: e.Board, Type: e.Type, Kind: e.Kind, Seq: uint32(e.Seq),
		Data: string(e.Data), Reason: e.Reason}
	if !e.Time.IsZero() {
		ev.Time = timestamppb.New(e.Time)
	}
	return ev
}

func tokenOf(t auth.Token) *fleetv1.Token {
	return &fleetv1.Token{Name: t.Name, Role: t.Role.String(), Created: timestamppb.New(t.Created)}
}
