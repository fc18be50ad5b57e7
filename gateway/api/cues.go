package api

// The cue lists (gateway/cue) as holo.fleet.v1.CueService, served over
// gRPC and, through grpc-gateway, as REST (fleet_gateway.yaml):
//
//	GET    /v1/cuelists                          the lists (viewer)
//	GET    /v1/cuelists/{name}                   a list and its state (viewer)
//	PUT    /v1/cuelists/{name}                   save a list (admin; audited)
//	DELETE /v1/cuelists/{name}                   delete it (admin; audited)
//	GET    /v1/cuelists/{name}/state             its live state (viewer)
//	POST   /v1/cuelists/{name}/go[?asap=true]    GO the standby cue (operator; audited)
//	POST   /v1/cuelists/{name}/stop              STOP its waits and follows (operator)
//	POST   /v1/cuelists/{name}/back              standby one cue back (operator)
//	POST   /v1/cuelists/{name}/standby           {"cue": "2"}: set the standby (operator)
//	POST   /v1/cuelists/{name}/cues/{n}/start    jump: fire cue n (operator)
//	GET    /v1/cuelists/events                   every list's events, Server-Sent Events (viewer)
//
// The name "-" is the current list (the one last run). Every call passes
// the gate of every FleetService call (guard.go): identity,
// auth.Authorize with resource auth.ResCues, the rate limit of changing
// calls, and an audit record of every change and refusal. The events are
// gRPC's WatchCues; REST has them as Server-Sent Events (serveCueEvents,
// beside grpc-gateway), each event's data the JSON of cue.Event.

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// Cues is what the cue service needs of the engine (*cue.Engine).
type Cues interface {
	Lists() []cue.List
	Get(name string) (cue.List, error)
	Put(l cue.List) (cue.List, error)
	Delete(name string) error
	State(name string) (cue.State, error)
	Go(name string, asap bool) (cue.State, error)
	Start(name string, n cue.Number, asap bool) (cue.State, error)
	Stop(name string) (cue.State, error)
	Back(name string) (cue.State, error)
	SetStandby(name string, n cue.Number) (cue.State, error)
	Watch(ctx context.Context) <-chan cue.Event
}

// cueService implements fleetv1.CueServiceServer over Cues. Errors are
// the engine's sentinels; the gate turns them into statuses (Err).
type cueService struct {
	fleetv1.UnimplementedCueServiceServer
	cues Cues
}

// listName is a request's list name; "-" is the current list ("").
func listName(name string) string {
	if name == "-" {
		return ""
	}
	return name
}

func (s *cueService) ListCueLists(context.Context, *fleetv1.ListCueListsRequest) (*fleetv1.ListCueListsResponse, error) {
	out := &fleetv1.ListCueListsResponse{Lists: []*fleetv1.CueList{}}
	for _, l := range s.cues.Lists() {
		pl, err := cueListPB(l)
		if err != nil {
			return nil, Err(err)
		}
		out.Lists = append(out.Lists, pl)
	}
	return out, nil
}

func (s *cueService) GetCueList(_ context.Context, r *fleetv1.CueListRequest) (*fleetv1.CueListWithState, error) {
	l, err := s.cues.Get(listName(r.GetName()))
	if err != nil {
		return nil, Err(err)
	}
	st, err := s.cues.State(l.Name)
	if err != nil {
		return nil, Err(err)
	}
	pl, err := cueListPB(l)
	if err != nil {
		return nil, Err(err)
	}
	return &fleetv1.CueListWithState{Name: pl.Name, Cues: pl.Cues, State: cueStatePB(st)}, nil
}

func (s *cueService) PutCueList(_ context.Context, r *fleetv1.PutCueListRequest) (*fleetv1.CueList, error) {
	l, err := cueListOf(r.GetList())
	if err != nil {
		return nil, Err(err)
	}
	if l.Name == "" {
		l.Name = r.GetName()
	}
	if l.Name != r.GetName() {
		return nil, Err(fmt.Errorf("%w: the body names %q, the path %q", cue.ErrBadList, l.Name, r.GetName()))
	}
	saved, err := s.cues.Put(l)
	if err != nil {
		return nil, Err(err)
	}
	pl, err := cueListPB(saved)
	return pl, Err(err)
}

func (s *cueService) DeleteCueList(_ context.Context, r *fleetv1.CueListRequest) (*fleetv1.DeleteCueListResponse, error) {
	if err := s.cues.Delete(r.GetName()); err != nil {
		return nil, Err(err)
	}
	return &fleetv1.DeleteCueListResponse{Deleted: r.GetName()}, nil
}

// stateReply answers an operation with the list's state after it.
func stateReply(st cue.State, err error) (*fleetv1.CueState, error) {
	if err != nil {
		return nil, Err(err)
	}
	return cueStatePB(st), nil
}

func (s *cueService) GetCueState(_ context.Context, r *fleetv1.CueListRequest) (*fleetv1.CueState, error) {
	return stateReply(s.cues.State(listName(r.GetName())))
}

func (s *cueService) GoCue(_ context.Context, r *fleetv1.GoCueRequest) (*fleetv1.CueState, error) {
	return stateReply(s.cues.Go(listName(r.GetName()), r.GetAsap()))
}

func (s *cueService) StopCues(_ context.Context, r *fleetv1.CueListRequest) (*fleetv1.CueState, error) {
	return stateReply(s.cues.Stop(listName(r.GetName())))
}

func (s *cueService) BackCue(_ context.Context, r *fleetv1.CueListRequest) (*fleetv1.CueState, error) {
	return stateReply(s.cues.Back(listName(r.GetName())))
}

func (s *cueService) SetCueStandby(_ context.Context, r *fleetv1.SetCueStandbyRequest) (*fleetv1.CueState, error) {
	return stateReply(s.cues.SetStandby(listName(r.GetName()), cue.Number(r.GetCue())))
}

func (s *cueService) StartCue(_ context.Context, r *fleetv1.StartCueRequest) (*fleetv1.CueState, error) {
	return stateReply(s.cues.Start(listName(r.GetName()), cue.Number(r.GetNumber()), r.GetAsap()))
}

func (s *cueService) WatchCues(_ *fleetv1.WatchCuesRequest, stream fleetv1.CueService_WatchCuesServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	ch := s.cues.Watch(ctx)
	// The header says the watch is on: what happens after it arrives is
	// streamed (as WatchEvents does).
	if err := stream.SendHeader(metadata.Pairs(WatchHeader, "1")); err != nil {
		return err
	}
	for ev := range ch {
		if err := stream.Send(cueEventPB(ev)); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return Err(fmt.Errorf("%w: cue events", ErrFellBehind))
}

// cueListOf reads a list sent over the API; a bad action body is
// cue.ErrBadList.
func cueListOf(p *fleetv1.CueList) (cue.List, error) {
	l := cue.List{Name: p.GetName(), Cues: make([]cue.Cue, 0, len(p.GetCues()))}
	for _, pc := range p.GetCues() {
		c := cue.Cue{Number: cue.Number(pc.GetNumber()), Name: pc.GetName(), Notes: pc.GetNotes(),
			PreWaitMS: int64(pc.GetPreWaitMs()), Follow: cue.Follow(pc.GetFollow()), FollowMS: int64(pc.GetFollowMs()),
			Timecode: pc.GetTimecode(), Actions: make([]cue.Action, 0, len(pc.GetActions()))}
		for _, pa := range pc.GetActions() {
			a := cue.Action{Kind: pa.GetKind(), Selector: selectorOf(pa.GetSelector())}
			if pa.GetBody() != nil {
				b, err := protojson.Marshal(pa.GetBody())
				if err != nil {
					return cue.List{}, fmt.Errorf("%w: cue %s: %v", cue.ErrBadList, c.Number, err)
				}
				a.Body = b
			}
			c.Actions = append(c.Actions, a)
		}
		l.Cues = append(l.Cues, c)
	}
	return l, nil
}

func selectorOf(p *fleetv1.Selector) fleet.Selector {
	s := fleet.Selector{Boards: p.GetBoards(), Labels: p.GetLabels(), All: p.GetAll()}
	for _, g := range p.GetGroups() {
		s.Groups = append(s.Groups, int(g))
	}
	return s
}

// cueListPB is a saved list as the API gives it.
func cueListPB(l cue.List) (*fleetv1.CueList, error) {
	p := &fleetv1.CueList{Name: l.Name, Cues: make([]*fleetv1.Cue, 0, len(l.Cues))}
	for _, c := range l.Cues {
		pc := &fleetv1.Cue{Number: string(c.Number), Name: c.Name, Notes: c.Notes, PreWaitMs: int32(c.PreWaitMS),
			Follow: string(c.Follow), FollowMs: int32(c.FollowMS), Timecode: c.Timecode}
		for _, a := range c.Actions {
			pa := &fleetv1.CueAction{Kind: a.Kind, Selector: selectorPB(a.Selector)}
			if len(a.Body) > 0 {
				pa.Body = &structpb.Value{}
				if err := protojson.Unmarshal(a.Body, pa.Body); err != nil {
					return nil, fmt.Errorf("cue list %q, cue %s: a stored body: %w", l.Name, c.Number, err)
				}
			}
			pc.Actions = append(pc.Actions, pa)
		}
		p.Cues = append(p.Cues, pc)
	}
	return p, nil
}

func selectorPB(s fleet.Selector) *fleetv1.Selector {
	p := &fleetv1.Selector{Boards: s.Boards, Labels: s.Labels, All: s.All}
	for _, g := range s.Groups {
		p.Groups = append(p.Groups, int32(g))
	}
	return p
}

func cueStatePB(s cue.State) *fleetv1.CueState {
	p := &fleetv1.CueState{List: s.List, Standby: string(s.Standby), StandbyName: s.StandbyName,
		StandbyNotes: s.StandbyNotes, Running: make([]*fleetv1.RunningCue, 0, len(s.Running))}
	for _, r := range s.Running {
		p.Running = append(p.Running, &fleetv1.RunningCue{Cue: string(r.Cue), Name: r.Name, Phase: r.Phase,
			FiresAt: timestamppb.New(r.FiresAt), RemainingMs: int32(min(r.RemainingMS, 1<<31-1))})
	}
	if f := s.Last; f != nil {
		p.Last = &fleetv1.FiredCue{Cue: string(f.Cue), Name: f.Name, Boards: int32(f.Boards), Failed: int32(f.Failed),
			Errors: f.Errors}
		if !f.At.IsZero() {
			p.Last.At = timestamppb.New(f.At)
		}
	}
	if c := s.Timecode; c != nil {
		p.Timecode = &fleetv1.CueChase{Source: c.Source, Rate: c.Rate, Position: c.Position, Status: c.Status}
	}
	return p
}

func cueEventPB(ev cue.Event) *fleetv1.CueEvent {
	return &fleetv1.CueEvent{N: ev.N, List: ev.List, Type: ev.Type, Cue: string(ev.Cue), State: cueStatePB(ev.State),
		Time: timestamppb.New(ev.Time)}
}

// SSEKeepAlive is how often a quiet cue event stream sends a comment, well
// inside the console's 60 s silence limit.
const SSEKeepAlive = 15 * time.Second

// serveCueEvents is GET /v1/cuelists/events: WatchCues over the pipe,
// so the gate decides it as any watch (identity, role, the stream limits,
// the end at the token's revocation), answered as Server-Sent Events
// (pipeSSE) with a comment every SSEKeepAlive while the show is quiet.
func (s *Server) serveCueEvents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := restCallContext(r)
	defer cancel()
	stream, err := fleetv1.NewCueServiceClient(s.conn).WatchCues(ctx, &fleetv1.WatchCuesRequest{})
	pipeSSE(w, r, stream, err, SSEKeepAlive)
}
