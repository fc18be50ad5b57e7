package api

// The firmware side of the API: artifacts (the firmware store), release
// channels and staged rollouts. The server side maps each RPC to one call
// of the store or the engine and converts their types to the proto
// messages; the rules (what a good image or a good plan is) stay in
// gateway/artifact and gateway/rollout, and their errors reach clients
// through Status.
//
// Uploads: gRPC clients stream UploadArtifactRequest chunks. REST clients
// POST the raw image to /v1/artifacts?name=N&sha256=H; serveUpload turns
// the body into the same gRPC stream over the in-process pipe, so the
// auth and metrics interceptors see the upload once, as for every other
// REST call, and the image is never held whole in memory.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/rollout"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// Artifacts is what the API needs of the firmware store (*artifact.Store).
type Artifacts interface {
	Add(ctx context.Context, r io.Reader, name, wantSHA string) (artifact.Artifact, bool, error)
	Get(sha string) (artifact.Artifact, error)
	List() ([]artifact.Artifact, error)
	Delete(sha string) error
	SetChannel(name, sha, releaseURL string) (artifact.Channel, error)
	DeleteChannel(name string) error
	Channels() ([]artifact.Channel, error)
}

// UploadChunk is the chunk size the REST upload streams to the gRPC side;
// gRPC clients may send chunks up to 1 MiB.
const UploadChunk = 64 << 10

func (s *service) artifactStore() (Artifacts, error) {
	if s.arts == nil {
		return nil, fmt.Errorf("%w: this gateway has no firmware store", ErrDisabled)
	}
	return s.arts, nil
}

func (s *service) engine() (rollout.Service, error) {
	if s.rollouts == nil {
		return nil, fmt.Errorf("%w: this gateway runs no rollouts", ErrDisabled)
	}
	return s.rollouts, nil
}

// onPart runs a call on a part the gateway may be built without (the
// firmware store, the rollout engine: s.artifactStore, s.engine): a
// missing part answers ErrDisabled, and the part's errors map to their
// gRPC status here, once.
func onPart[P, T any](part func() (P, error), call func(P) (T, error)) (T, error) {
	var zero T
	p, err := part()
	if err != nil {
		return zero, Err(err)
	}
	v, err := call(p)
	if err != nil {
		return zero, Err(err)
	}
	return v, nil
}

// listOf converts a list of the domain to the API's messages.
func listOf[S, D any](in []S, of func(S) D) []D {
	out := make([]D, 0, len(in))
	for _, v := range in {
		out = append(out, of(v))
	}
	return out
}

// uploadReader reads the chunks of an upload stream.
type uploadReader struct {
	stream fleetv1.FleetService_UploadArtifactServer
	buf    []byte
}

func (u *uploadReader) Read(p []byte) (int, error) {
	for len(u.buf) == 0 {
		m, err := u.stream.Recv()
		if err != nil {
			return 0, err // io.EOF at the end of the stream
		}
		u.buf = m.GetChunk()
	}
	n := copy(p, u.buf)
	u.buf = u.buf[n:]
	return n, nil
}

func (s *service) UploadArtifact(stream fleetv1.FleetService_UploadArtifactServer) error {
	store, err := s.artifactStore()
	if err != nil {
		return Err(err)
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return Err(fmt.Errorf("%w: empty upload", artifact.ErrInvalid))
	}
	if err != nil {
		return err
	}
	a, existed, err := store.Add(stream.Context(), &uploadReader{stream: stream, buf: first.GetChunk()}, first.GetName(), first.GetSha256())
	if err != nil {
		return Err(err)
	}
	return stream.SendAndClose(&fleetv1.UploadArtifactResponse{Artifact: artifactOf(a), Existed: existed})
}

func (s *service) ListArtifacts(context.Context, *fleetv1.ListArtifactsRequest) (*fleetv1.ListArtifactsResponse, error) {
	return onPart(s.artifactStore, func(store Artifacts) (*fleetv1.ListArtifactsResponse, error) {
		list, err := store.List()
		return &fleetv1.ListArtifactsResponse{Artifacts: listOf(list, artifactOf)}, err
	})
}

func (s *service) GetArtifact(_ context.Context, r *fleetv1.GetArtifactRequest) (*fleetv1.Artifact, error) {
	return onPart(s.artifactStore, func(store Artifacts) (*fleetv1.Artifact, error) {
		a, err := store.Get(r.GetSha256())
		return artifactOf(a), err
	})
}

func (s *service) DeleteArtifact(_ context.Context, r *fleetv1.DeleteArtifactRequest) (*fleetv1.DeleteArtifactResponse, error) {
	return onPart(s.artifactStore, func(store Artifacts) (*fleetv1.DeleteArtifactResponse, error) {
		return &fleetv1.DeleteArtifactResponse{}, store.Delete(r.GetSha256())
	})
}

func (s *service) SetChannel(_ context.Context, r *fleetv1.SetChannelRequest) (*fleetv1.Channel, error) {
	return onPart(s.artifactStore, func(store Artifacts) (*fleetv1.Channel, error) {
		c, err := store.SetChannel(r.GetName(), r.GetSha256(), r.GetReleaseUrl())
		return channelOf(c), err
	})
}

func (s *service) ListChannels(context.Context, *fleetv1.ListChannelsRequest) (*fleetv1.ListChannelsResponse, error) {
	return onPart(s.artifactStore, func(store Artifacts) (*fleetv1.ListChannelsResponse, error) {
		list, err := store.Channels()
		return &fleetv1.ListChannelsResponse{Channels: listOf(list, channelOf)}, err
	})
}

func (s *service) DeleteChannel(_ context.Context, r *fleetv1.DeleteChannelRequest) (*fleetv1.DeleteChannelResponse, error) {
	return onPart(s.artifactStore, func(store Artifacts) (*fleetv1.DeleteChannelResponse, error) {
		return &fleetv1.DeleteChannelResponse{}, store.DeleteChannel(r.GetName())
	})
}

func (s *service) DryRunRollout(ctx context.Context, r *fleetv1.DryRunRolloutRequest) (*fleetv1.RolloutSelection, error) {
	return onPart(s.engine, func(eng rollout.Service) (*fleetv1.RolloutSelection, error) {
		p, err := PlanFrom(r.GetPlan())
		if err != nil {
			return nil, err
		}
		sel, err := eng.DryRun(ctx, p)
		if err != nil {
			return nil, err
		}
		return &fleetv1.RolloutSelection{Waves: wavesOf(sel.Waves), Refused: refusalsOf(sel.Refused), Boards: int32(sel.Boards()),
			Waiting: refusalsOf(sel.Waiting), Skipped: refusalsOf(sel.Skipped)}, nil
	})
}

func (s *service) CreateRollout(ctx context.Context, r *fleetv1.CreateRolloutRequest) (*fleetv1.Rollout, error) {
	return s.onRollout(func(eng rollout.Service) (rollout.Status, error) {
		p, err := PlanFrom(r.GetPlan())
		if err != nil {
			return rollout.Status{}, err
		}
		return eng.Create(ctx, p)
	})
}

func (s *service) ListRollouts(context.Context, *fleetv1.ListRolloutsRequest) (*fleetv1.ListRolloutsResponse, error) {
	return onPart(s.engine, func(eng rollout.Service) (*fleetv1.ListRolloutsResponse, error) {
		return &fleetv1.ListRolloutsResponse{Rollouts: listOf(eng.List(), rolloutOf)}, nil
	})
}

func (s *service) GetRollout(_ context.Context, r *fleetv1.GetRolloutRequest) (*fleetv1.Rollout, error) {
	return s.onRollout(func(eng rollout.Service) (rollout.Status, error) { return eng.Get(r.GetId()) })
}

func (s *service) ListRolloutBoards(_ context.Context, r *fleetv1.ListRolloutBoardsRequest) (*fleetv1.ListRolloutBoardsResponse, error) {
	return onPart(s.engine, func(eng rollout.Service) (*fleetv1.ListRolloutBoardsResponse, error) {
		bs, err := eng.Boards(r.GetId())
		return &fleetv1.ListRolloutBoardsResponse{Boards: listOf(bs, rolloutBoardOf)}, err
	})
}

func (s *service) PauseRollout(ctx context.Context, r *fleetv1.PauseRolloutRequest) (*fleetv1.Rollout, error) {
	return s.onRollout(func(eng rollout.Service) (rollout.Status, error) { return eng.Pause(ctx, r.GetId(), r.GetReason()) })
}

func (s *service) ResumeRollout(ctx context.Context, r *fleetv1.ResumeRolloutRequest) (*fleetv1.Rollout, error) {
	return s.onRollout(func(eng rollout.Service) (rollout.Status, error) { return eng.Resume(ctx, r.GetId()) })
}

func (s *service) AbortRollout(ctx context.Context, r *fleetv1.AbortRolloutRequest) (*fleetv1.Rollout, error) {
	return s.onRollout(func(eng rollout.Service) (rollout.Status, error) { return eng.Abort(ctx, r.GetId(), r.GetReason()) })
}

func (s *service) RevertRollout(ctx context.Context, r *fleetv1.RevertRolloutRequest) (*fleetv1.Rollout, error) {
	return s.onRollout(func(eng rollout.Service) (rollout.Status, error) { return eng.Revert(ctx, r.GetId(), r.GetReason()) })
}

func (s *service) WatchRollout(r *fleetv1.WatchRolloutRequest, stream fleetv1.FleetService_WatchRolloutServer) error {
	eng, err := s.engine()
	if err != nil {
		return Err(err)
	}
	id := r.GetId()
	if id != "" {
		if _, err := eng.Get(id); err != nil {
			return Err(err)
		}
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	ch := eng.Watch(ctx, id, r.GetAfter())
	// As WatchEvents: headers once the watch is in place.
	if err := stream.SendHeader(metadata.Pairs(WatchHeader, "1")); err != nil {
		return err
	}
	finished := func() bool {
		if !r.GetUntilFinished() || id == "" {
			return false
		}
		st, err := eng.Get(id)
		return err == nil && st.Finished
	}
	if finished() {
		// Finished before the watch: send what is kept, then end.
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					return nil
				}
				if err := stream.Send(rolloutEventOf(ev)); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	for ev := range ch {
		if err := stream.Send(rolloutEventOf(ev)); err != nil {
			return err
		}
		// The rollout's own events carry its state changes; the stream
		// ends with the event that shows a final state (not merely when
		// the engine is finished, which can be ahead of the events sent).
		if ev.Board == "" && finalState(ev.State) && finished() {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return Err(err)
	}
	return Err(fmt.Errorf("%w: more than %d rollout events queued; resume with after set to the last n received", ErrFellBehind, rollout.WatchQueue))
}

// finalState reports whether a rollout state can end a watch.
func finalState(s string) bool {
	return s == rollout.StateDone || s == rollout.StateReverted || s == rollout.StateAborted
}

// serveUpload is POST /v1/artifacts: the raw image as the body, name and
// sha256 in the query; the reply is an UploadArtifactResponse (200) or a
// REST error.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	// The body is not bounded by MaxBody: decide before reading any of it.
	if _, err := s.preflight(r, fleetv1.FleetService_UploadArtifact_FullMethodName); err != nil {
		w.Header().Set("Connection", "close") // the body stays unread
		writeError(w, status.Convert(err))
		return
	}
	liftDeadlines(w, true) // an admin's image may take its time
	md := restCallMetadata(r)
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(r.Context(), md))
	defer cancel()
	stream, err := s.client.UploadArtifact(ctx)
	if err != nil {
		writeError(w, status.Convert(err))
		return
	}
	q := r.URL.Query()
	m := &fleetv1.UploadArtifactRequest{Name: q.Get("name"), Sha256: q.Get("sha256")}
	buf := make([]byte, UploadChunk)
	for {
		n, rerr := io.ReadFull(r.Body, buf)
		if n > 0 || m.Name != "" || m.Sha256 != "" {
			m.Chunk = buf[:n]
			// Send encodes m before it returns, so buf may be reused. An
			// error means the server ended the call: its status comes
			// with CloseAndRecv.
			if err := stream.Send(m); err != nil {
				break
			}
			m = &fleetv1.UploadArtifactRequest{}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			cancel()
			writeError(w, status.New(codes.InvalidArgument, "reading the upload: "+rerr.Error()))
			return
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		writeError(w, status.Convert(err))
		return
	}
	b, err := jsonPb.Marshal(resp)
	if err != nil {
		writeError(w, status.New(codes.Internal, err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// PlanFrom turns a plan message into the engine's plan. Durations are Go
// duration text; a malformed one is a bad plan (rollout.ErrPlan).
func PlanFrom(m *fleetv1.RolloutPlan) (rollout.Plan, error) {
	if m == nil {
		return rollout.Plan{}, fmt.Errorf("%w: no plan", rollout.ErrPlan)
	}
	t := m.GetTarget()
	p := rollout.Plan{
		Name: m.GetName(), Artifact: m.GetArtifact(), Canaries: m.GetCanaries(), Growth: m.GetGrowth(),
		MaxInFlight: int(m.GetMaxInFlight()), MaxRestarting: int(m.GetMaxRestarting()), Retries: int(m.GetRetries()), Bandwidth: m.GetBandwidth(), Method: m.GetMethod(),
		Target: rollout.Target{Boards: t.GetBoards(), Labels: t.GetLabels(), All: t.GetAll(), Firmware: t.GetFirmware(), OnlineOnly: t.GetOnlineOnly()},
	}
	for _, g := range t.GetGroups() {
		p.Target.Groups = append(p.Target.Groups, int(g))
	}
	for _, w := range m.GetWaves() {
		p.Waves = append(p.Waves, rollout.Wave{Count: int(w.GetCount()), Percent: w.GetPercent()})
	}
	th := m.GetThresholds()
	p.Thresholds = rollout.Thresholds{Success: th.GetSuccess(), WaveFailure: th.GetWaveFailure(), TotalFailure: th.GetTotalFailure(),
		MinSample: int(th.GetMinSample()), Action: th.GetAction()}
	if w := m.GetWindow(); w != nil {
		p.Window = &rollout.Window{Start: w.GetStart(), End: w.GetEnd(), Days: w.GetDays(), TimeZone: w.GetTimeZone(), Strict: w.GetStrict()}
		for _, iv := range w.GetIntervals() {
			p.Window.Intervals = append(p.Window.Intervals, rollout.Interval{From: iv.GetFrom().AsTime(), To: iv.GetTo().AsTime()})
		}
	}
	p.IgnoreShow, p.FullImages = m.GetIgnoreShow(), m.GetFullImages()
	if h := m.GetHealth(); h != nil {
		p.Health = &rollout.Health{MaxLinkErrors: h.GetMaxLinkErrors(), MinHeapFree: h.GetMinHeapFree(), ClockSynced: h.GetClockSynced(), Skip: h.GetSkip()}
	}
	var errs []error
	for _, d := range []struct {
		name, text string
		v          *rollout.Duration
	}{
		{"soak", m.GetSoak(), &p.Soak}, {"backoff", m.GetBackoff(), &p.Backoff},
		{"timeouts.transfer", m.GetTimeouts().GetTransfer(), &p.Timeouts.Transfer},
		{"timeouts.restart", m.GetTimeouts().GetRestart(), &p.Timeouts.Restart},
		{"timeouts.confirm", m.GetTimeouts().GetConfirm(), &p.Timeouts.Confirm},
		{"health.min_uptime", m.GetHealth().GetMinUptime(), healthUptime(&p)},
	} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q is not a duration (90s, 2m30s)", d.name, d.text))
			continue
		}
		*d.v = rollout.Duration(v)
	}
	if len(errs) > 0 {
		return p, fmt.Errorf("%w: %w", rollout.ErrPlan, errors.Join(errs...))
	}
	return p, nil
}

// healthUptime is where health.min_uptime goes (a sink when the plan has
// no health conditions).
func healthUptime(p *rollout.Plan) *rollout.Duration {
	if p.Health == nil {
		return new(rollout.Duration)
	}
	return &p.Health.MinUptime
}

// PlanOf is the message of an engine's plan (PlanFrom's inverse).
func PlanOf(p rollout.Plan) *fleetv1.RolloutPlan {
	m := &fleetv1.RolloutPlan{
		Name: p.Name, Artifact: p.Artifact, Canaries: p.Canaries, Growth: p.Growth, MaxInFlight: int32(p.MaxInFlight),
		MaxRestarting: int32(p.MaxRestarting), Soak: durText(p.Soak), Retries: int32(p.Retries), Backoff: durText(p.Backoff), Bandwidth: p.Bandwidth, Method: p.Method,
		Target: &fleetv1.RolloutTarget{Boards: p.Target.Boards, Labels: p.Target.Labels, All: p.Target.All,
			Firmware: p.Target.Firmware, OnlineOnly: p.Target.OnlineOnly},
		Timeouts: &fleetv1.RolloutTimeouts{Transfer: durText(p.Timeouts.Transfer), Restart: durText(p.Timeouts.Restart),
			Confirm: durText(p.Timeouts.Confirm)},
		Thresholds: &fleetv1.RolloutThresholds{Success: p.Thresholds.Success, WaveFailure: p.Thresholds.WaveFailure,
			TotalFailure: p.Thresholds.TotalFailure, MinSample: int32(p.Thresholds.MinSample), Action: p.Thresholds.Action},
	}
	for _, g := range p.Target.Groups {
		m.Target.Groups = append(m.Target.Groups, int32(g))
	}
	for _, w := range p.Waves {
		m.Waves = append(m.Waves, &fleetv1.RolloutWave{Count: int32(w.Count), Percent: w.Percent})
	}
	if w := p.Window; w != nil {
		m.Window = &fleetv1.RolloutWindow{Start: w.Start, End: w.End, Days: w.Days, TimeZone: w.TimeZone, Strict: w.Strict}
		for _, iv := range w.Intervals {
			m.Window.Intervals = append(m.Window.Intervals, &fleetv1.RolloutInterval{From: ts(iv.From), To: ts(iv.To)})
		}
	}
	m.IgnoreShow, m.FullImages = p.IgnoreShow, p.FullImages
	if h := p.Health; h != nil {
		m.Health = &fleetv1.RolloutHealth{MinUptime: durText(h.MinUptime), MaxLinkErrors: h.MaxLinkErrors, MinHeapFree: h.MinHeapFree,
			ClockSynced: h.ClockSynced, Skip: h.Skip}
	}
	return m
}

func durText(d rollout.Duration) string {
	if d == 0 {
		return ""
	}
	return d.D().String()
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func appOf(a boardapi.App) *fleetv1.App {
	return &fleetv1.App{Project: a.Project, Version: a.Version, Date: a.Date, Time: a.Time, Idf: a.IDF, ElfSha256: a.ELFSHA256}
}

func artifactOf(a artifact.Artifact) *fleetv1.Artifact {
	out := &fleetv1.Artifact{Sha256: a.SHA256, Size: a.Size, Chip: uint32(a.Chip), App: appOf(a.App), Name: a.Name, Added: ts(a.Added),
		Trust: a.Trust}
	for _, sg := range a.Signers {
		out.Signers = append(out.Signers, &fleetv1.Signer{KeyDigest: sg.KeyDigest, Valid: sg.Valid, Trusted: sg.Trusted, Error: sg.Error})
	}
	if out.Trust == "" {
		out.Trust = artifact.TrustUnsigned
	}
	return out
}

func channelOf(c artifact.Channel) *fleetv1.Channel {
	return &fleetv1.Channel{Name: c.Name, Sha256: c.SHA256, Version: c.Version, ReleaseUrl: c.ReleaseURL, Updated: ts(c.Updated)}
}

func wavesOf(ws [][]string) []*fleetv1.WaveBoards {
	out := make([]*fleetv1.WaveBoards, 0, len(ws))
	for _, w := range ws {
		out = append(out, &fleetv1.WaveBoards{Boards: w})
	}
	return out
}

func refusalsOf(rs []rollout.Refusal) []*fleetv1.Refusal {
	out := make([]*fleetv1.Refusal, 0, len(rs))
	for _, r := range rs {
		out = append(out, &fleetv1.Refusal{Board: r.Board, Reason: r.Reason})
	}
	return out
}

// onRollout runs a call on the rollout engine that answers one rollout.
func (s *service) onRollout(call func(rollout.Service) (rollout.Status, error)) (*fleetv1.Rollout, error) {
	return onPart(s.engine, func(eng rollout.Service) (*fleetv1.Rollout, error) {
		st, err := call(eng)
		if err != nil {
			return nil, err
		}
		return rolloutOf(st), nil
	})
}

func rolloutOf(st rollout.Status) *fleetv1.Rollout {
	pr := &fleetv1.RolloutProgress{Boards: int32(st.Progress.Boards), Phases: map[string]int32{},
		Done: int32(st.Progress.Done), Failed: int32(st.Progress.Failed), Percent: st.Progress.Percent, Waiting: int32(st.Progress.Waiting)}
	for k, v := range st.Progress.Phases {
		pr.Phases[k] = int32(v)
	}
	out := &fleetv1.Rollout{
		Id: st.ID, Plan: PlanOf(st.Plan), State: st.State, Reason: st.Reason,
		Image:   &fleetv1.RolloutImage{Sha256: st.Image.SHA256, Size: st.Image.Size, App: appOf(st.Image.App)},
		Waves:   wavesOf(st.Waves),
		Refused: refusalsOf(st.Refused), Wave: int32(st.Wave), SoakUntil: ts(st.SoakUntil), Finished: st.Finished,
		Created: ts(st.Created), Updated: ts(st.Updated), Progress: pr, WindowOpen: st.WindowOpen,
	}
	if st.NextWindow != nil {
		out.NextWindow = ts(*st.NextWindow)
	}
	return out
}

func rolloutBoardOf(b rollout.Board) *fleetv1.RolloutBoard {
	out := &fleetv1.RolloutBoard{Board: b.Board, Wave: int32(b.Wave), Phase: b.Phase, Attempts: int32(b.Attempts),
		NextTry: ts(b.NextTry), FromSlot: b.FromSlot, FromVersion: b.FromVersion, ToSlot: b.ToSlot,
		Deadline: ts(b.Deadline), Error: b.Error, Timeline: make([]*fleetv1.RolloutStep, 0, len(b.Timeline)),
		Transfer: b.Transfer, Sent: b.Sent, NoDelta: b.NoDelta, Waiting: b.Waiting}
	for _, s := range b.Timeline {
		out.Timeline = append(out.Timeline, &fleetv1.RolloutStep{Time: ts(s.Time), Phase: s.Phase, Note: s.Note})
	}
	return out
}

func rolloutEventOf(e rollout.Event) *fleetv1.RolloutEvent {
	return &fleetv1.RolloutEvent{N: e.N, Time: ts(e.Time), Rollout: e.Rollout, Board: e.Board, State: e.State,
		Phase: e.Phase, Wave: int32(e.Wave), Note: e.Note}
}
