package installation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/gateway/auth"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// GRPC is the installation's gRPC service (holo.fleet.v1.InstallationService),
// served by the gateway's API beside FleetService. The API's door
// identifies and authorises every call (gateway/api guard.go), audits the
// changes, and puts the caller in the context.
func (in *Installer) GRPC() fleetv1.InstallationServiceServer { return &grpcService{in: in} }

type grpcService struct {
	fleetv1.UnimplementedInstallationServiceServer
	in *Installer
}

// grpcErr maps the package's errors to gRPC codes.
func grpcErr(err error) error {
	var pe *ParseError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe), errors.Is(err, ErrInvalid), errors.Is(err, ErrContent):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrState), errors.Is(err, ErrSection):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrRevisionTaken):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

func callerName(ctx context.Context) string {
	if id, ok := auth.FromContext(ctx); ok {
		return id.Name
	}
	return ""
}

func boardPB(b BoardPlan) *fleetv1.InstallationBoard {
	out := &fleetv1.InstallationBoard{Board: b.Board, Profile: b.Profile, State: b.State, Summary: b.Summary, Error: b.Error, Gateway: b.Gateway}
	if d := b.Diff; d != nil {
		out.FilesNeedLan, out.Requests = d.FilesNeedLAN, int32(d.Requests)
		for _, f := range d.Files {
			out.Changes = append(out.Changes, &fleetv1.InstallationChange{Kind: "file", Op: f.Op, Name: f.Path, Why: f.Why})
		}
		for _, s := range d.Scenes {
			out.Changes = append(out.Changes, &fleetv1.InstallationChange{Kind: "scene", Op: s.Op, Name: s.Name, Why: s.Why})
		}
		for _, s := range d.Settings {
			out.Changes = append(out.Changes, &fleetv1.InstallationChange{Kind: "setting", Op: OpSet, Name: s.Field, FromJson: string(s.From), ToJson: string(s.To)})
		}
	}
	return out
}

func sectionsPB(sps []SectionPlan) []*fleetv1.InstallationSection {
	var out []*fleetv1.InstallationSection
	for _, sp := range sps {
		s := &fleetv1.InstallationSection{Section: sp.Section, State: sp.State, Summary: sp.Summary, Error: sp.Error}
		for _, c := range sp.Changes {
			s.Changes = append(s.Changes, &fleetv1.InstallationSectionChange{Op: c.Op, Item: c.Item, Why: c.Why})
		}
		out = append(out, s)
	}
	return out
}

func revisionPB(r Revision) *fleetv1.InstallationRevision {
	return &fleetv1.InstallationRevision{N: int32(r.N), Who: r.Who, When: timestamppb.New(r.When), Message: r.Message,
		RollbackOf: int32(r.RollbackOf), Run: int32(r.Run), DescriptionJson: string(r.Description)}
}

func runPB(r RunStatus) *fleetv1.InstallationRun {
	ph := map[string]int32{}
	for k, v := range maps.All(r.Phases) {
		ph[k] = int32(v)
	}
	return &fleetv1.InstallationRun{Id: int32(r.ID), Revision: int32(r.Revision), Who: r.Who, State: r.State, Reason: r.Reason,
		Wave: int32(r.Wave), Waves: int32(len(r.Waves)), Finished: r.Finished, Boards: int32(r.Boards), Done: int32(r.Done), Phases: ph}
}

func (g *grpcService) PlanInstallation(ctx context.Context, req *fleetv1.PlanInstallationRequest) (*fleetv1.InstallationPlan, error) {
	d, err := g.in.readDescription(req.GetFile(), []byte(req.GetDescription()), false)
	if err != nil {
		return nil, grpcErr(err)
	}
	boards, err := g.in.PlanInstallation(ctx, d)
	if err != nil {
		return nil, grpcErr(err)
	}
	out := &fleetv1.InstallationPlan{Sections: sectionsPB(g.in.PlanSections(d))}
	for _, b := range boards {
		out.Boards = append(out.Boards, boardPB(b))
	}
	return out, nil
}

func (g *grpcService) applied(rev Revision, st RunStatus, err error) (*fleetv1.InstallationApplied, error) {
	if err != nil {
		return nil, grpcErr(err)
	}
	rev.Description = nil
	return &fleetv1.InstallationApplied{Revision: revisionPB(rev), Run: runPB(st)}, nil
}

func (g *grpcService) ApplyInstallation(ctx context.Context, req *fleetv1.ApplyInstallationRequest) (*fleetv1.InstallationApplied, error) {
	d, err := g.in.readDescription(req.GetFile(), []byte(req.GetDescription()), true)
	if err != nil {
		return nil, grpcErr(err)
	}
	return g.applied(g.in.Apply(ctx, d, callerName(ctx), req.GetMessage()))
}

func (g *grpcService) RollbackInstallation(ctx context.Context, req *fleetv1.RollbackInstallationRequest) (*fleetv1.InstallationApplied, error) {
	if req.GetRevision() < 1 {
		return nil, status.Error(codes.InvalidArgument, "revision: want a revision number")
	}
	return g.applied(g.in.Rollback(ctx, int(req.GetRevision()), callerName(ctx), req.GetMessage()))
}

func (g *grpcService) GetInstallationStatus(ctx context.Context, _ *fleetv1.GetInstallationStatusRequest) (*fleetv1.InstallationStatus, error) {
	st, err := g.in.Status(ctx)
	if err != nil {
		return nil, grpcErr(err)
	}
	out := &fleetv1.InstallationStatus{Revision: revisionPB(st.Revision), Counts: map[string]int32{}, Sections: sectionsPB(st.Sections)}
	if st.Run != nil {
		out.Run = runPB(*st.Run)
	}
	for _, b := range st.Boards {
		out.Boards = append(out.Boards, boardPB(b))
	}
	for k, v := range st.Counts {
		out.Counts[k] = int32(v)
	}
	return out, nil
}

func (g *grpcService) ListInstallationRevisions(context.Context, *fleetv1.ListInstallationRevisionsRequest) (*fleetv1.ListInstallationRevisionsResponse, error) {
	hs, err := g.in.History()
	if err != nil {
		return nil, grpcErr(err)
	}
	out := &fleetv1.ListInstallationRevisionsResponse{}
	for _, r := range hs {
		out.Revisions = append(out.Revisions, revisionPB(r))
	}
	return out, nil
}

func (g *grpcService) GetInstallationRevision(_ context.Context, req *fleetv1.GetInstallationRevisionRequest) (*fleetv1.InstallationRevision, error) {
	r, err := g.in.Revision(int(req.GetN()))
	if err != nil {
		return nil, grpcErr(err)
	}
	return revisionPB(r), nil
}

func (g *grpcService) GetInstallationRun(_ context.Context, req *fleetv1.GetInstallationRunRequest) (*fleetv1.InstallationRunDetail, error) {
	id := int(req.GetId())
	st, err := g.in.RunStatus(id)
	if err != nil {
		return nil, grpcErr(err)
	}
	bs, err := g.in.RunBoards(id)
	if err != nil {
		return nil, grpcErr(err)
	}
	out := &fleetv1.InstallationRunDetail{Run: runPB(st)}
	for _, b := range bs {
		out.Boards = append(out.Boards, &fleetv1.InstallationRunBoard{Board: b.Board, Wave: int32(b.Wave), Phase: b.Phase,
			Summary: b.Summary, Error: b.Error, Requests: int32(b.Requests)})
	}
	return out, nil
}

func (g *grpcService) ControlInstallationRun(_ context.Context, req *fleetv1.ControlInstallationRunRequest) (*fleetv1.InstallationRun, error) {
	id := int(req.GetId())
	var st RunStatus
	var err error
	switch req.GetAction() {
	case "pause":
		st, err = g.in.Pause(id, req.GetReason())
	case "abort":
		st, err = g.in.Abort(id, req.GetReason())
	case "resume":
		st, err = g.in.Resume(id)
	default:
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("action %q: want pause, resume or abort", req.GetAction()))
	}
	if err != nil {
		return nil, grpcErr(err)
	}
	return runPB(st), nil
}

// UploadInstallationContent adds the file a stream carries to the content
// store: the header first, then its chunks (Upload.Chunks checks their
// sum against the declared size). The door has decided and audits the
// call with the header's sha256 (gateway/api guard.go).
func (g *grpcService) UploadInstallationContent(stream fleetv1.InstallationService_UploadInstallationContentServer) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "empty upload: send the header (sha256, size) first")
	}
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "the first message must be the header (sha256, size), not a chunk")
	}
	u := Upload{Name: h.GetName(), SHA256: h.GetSha256(), Size: h.GetSize()}
	if err := u.Check(); err != nil {
		return grpcErr(err)
	}
	next := func() (Part, error) {
		m, err := stream.Recv()
		if err != nil {
			return Part{}, err
		}
		return Part{Chunk: m.GetChunk(), Header: m.GetHeader() != nil}, nil
	}
	sha, n, err := g.in.storeContent(stream.Context(), u.Chunks(next), u.SHA256)
	if err != nil {
		return grpcErr(err)
	}
	return stream.SendAndClose(&fleetv1.InstallationContent{Sha256: sha, Size: n})
}
