package installation_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/installation"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestGRPC drives InstallationService through the gateway's real API
// server and its door: a viewer plans, reads and is refused applies; an
// admin applies and rolls back; an operator may pause but not resume;
// every change is audited.
func TestGRPC(t *testing.T) {
	r, g, aud := auditedGRPC(t)
	c, as := g.client, g.as
	admin, viewer, op := g.tokens["admin"], g.tokens["viewer"], g.tokens["operator"]
	code := func(err error) codes.Code { return status.Code(err) }

	d := r.parse(t, desc(false, "image")) // content into the store, as holoctl's upload does
	for name, ct := range d.Content {
		d.Content[name] = installation.Content{SHA256: ct.SHA256, Size: ct.Size}
	}
	text := string(d.JSON())
	plan, err := c.PlanInstallation(as(viewer), &fleetv1.PlanInstallationRequest{Description: text})
	if err != nil || len(plan.Boards) != 2 || plan.Boards[0].State != installation.StateDrifted || len(plan.Boards[0].Changes) == 0 {
		t.Fatalf("plan: %v %v", plan, err)
	}
	if _, err := c.PlanInstallation(as(viewer), &fleetv1.PlanInstallationRequest{Description: "version: 1\nprofiles: {p: {filez: {}}}\n", File: "x.yaml"}); code(err) != codes.InvalidArgument {
		t.Fatalf("a bad description: %v", err)
	}
	if _, err := c.ApplyInstallation(as(viewer), &fleetv1.ApplyInstallationRequest{Description: text}); code(err) != codes.PermissionDenied {
		t.Fatalf("viewer apply: %v", err)
	}
	ap, err := c.ApplyInstallation(as(admin), &fleetv1.ApplyInstallationRequest{Description: text, Message: "over gRPC"})
	if err != nil || ap.Revision.N != 1 || ap.Revision.Who != "ada" {
		t.Fatalf("apply: %v %v", ap, err)
	}
	g.inSync(t, ap.Run.Id, 2)
	if _, err := c.ControlInstallationRun(as(op), &fleetv1.ControlInstallationRunRequest{Id: 1, Action: "resume"}); code(err) != codes.PermissionDenied {
		t.Fatalf("operator resume: %v", err)
	}
	if _, err := c.ControlInstallationRun(as(op), &fleetv1.ControlInstallationRunRequest{Id: 1, Action: "pause"}); code(err) != codes.FailedPrecondition {
		t.Fatalf("operator pauses a finished run: %v", err)
	}
	if _, err := c.ControlInstallationRun(as(admin), &fleetv1.ControlInstallationRunRequest{Id: 1, Action: "explode"}); code(err) != codes.InvalidArgument {
		t.Fatalf("unknown action: %v", err)
	}
	rb, err := c.RollbackInstallation(as(admin), &fleetv1.RollbackInstallationRequest{Revision: 1})
	if err != nil || rb.Revision.RollbackOf != 1 {
		t.Fatalf("rollback: %v %v", rb, err)
	}
	var run *fleetv1.InstallationRunDetail
	waitFor(t, 30*time.Second, "the rollback's run", func() bool {
		run, err = c.GetInstallationRun(as(viewer), &fleetv1.GetInstallationRunRequest{Id: rb.Run.Id})
		return err == nil && run.Run.Finished
	})
	revs, err := c.ListInstallationRevisions(as(viewer), &fleetv1.ListInstallationRevisionsRequest{})
	if err != nil || len(revs.Revisions) != 2 || revs.Revisions[0].DescriptionJson != "" {
		t.Fatalf("revisions: %v %v", revs, err)
	}
	one, err := c.GetInstallationRevision(as(viewer), &fleetv1.GetInstallationRevisionRequest{N: 1})
	if err != nil || one.DescriptionJson == "" {
		t.Fatalf("revision 1: %v %v", one, err)
	}
	if _, err := c.GetInstallationRevision(as(viewer), &fleetv1.GetInstallationRevisionRequest{N: 9}); code(err) != codes.NotFound {
		t.Fatalf("revision 9: %v", err)
	}
	st, err := c.GetInstallationStatus(as(viewer), &fleetv1.GetInstallationStatusRequest{})
	if err != nil || len(st.Boards) != 2 {
		t.Fatalf("status: %v %v", st, err)
	}
	var applied, denied int
	aud.mu.Lock()
	for _, rec := range aud.recs {
		if rec.Operation == "ApplyInstallation" {
			if rec.Allowed {
				applied++
			} else {
				denied++
			}
		}
	}
	aud.mu.Unlock()
	if applied != 1 || denied != 1 {
		t.Errorf("audit of ApplyInstallation: %d allowed, %d denied; want 1 and 1", applied, denied)
	}
}

// auditedGRPC is a rig of two labelled boards behind the real API
// server, auditing into the memAudit it returns.
func auditedGRPC(t *testing.T) (*rig, *grpcAPI, *memAudit) {
	t.Helper()
	aud := &memAudit{}
	r := startRig(t, 2, nil, func(o *installation.Options) { o.Audit = aud })
	r.label(t)
	return r, serveGRPC(t, r, aud), aud
}

// grpcAPI is the gateway's real API server (gRPC with its door) in front
// of a rig's installer, on a port of its own, with a token per role.
type grpcAPI struct {
	addr   string
	client fleetv1.InstallationServiceClient
	// tokens are bearer secrets by role: admin (ada), viewer (vic),
	// operator (otto).
	tokens map[string]string
}

// inSync waits for run id to finish (read as a viewer) and fails unless
// it left n boards in sync.
func (g *grpcAPI) inSync(t *testing.T, id int32, n int32) {
	t.Helper()
	var run *fleetv1.InstallationRunDetail
	var err error
	waitFor(t, 30*time.Second, "the run", func() bool {
		run, err = g.client.GetInstallationRun(g.as(g.tokens["viewer"]), &fleetv1.GetInstallationRunRequest{Id: id})
		return err == nil && run.Run.Finished
	})
	if run.Run.Phases[installation.PhaseInSync] != n {
		t.Fatalf("run: %v", run)
	}
}

// as is a context carrying tok as the bearer token.
func (g *grpcAPI) as(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

func serveGRPC(t *testing.T, r *rig, aud auth.Auditor) *grpcAPI {
	t.Helper()
	tokens, err := auth.Open(r.db)
	if err != nil {
		t.Fatal(err)
	}
	g := &grpcAPI{tokens: map[string]string{}}
	for name, role := range map[string]auth.Role{"ada": auth.RoleAdmin, "vic": auth.RoleViewer, "otto": auth.RoleOperator} {
		secret, _, err := tokens.Create(name, role)
		if err != nil {
			t.Fatal(err)
		}
		g.tokens[role.String()] = secret
	}
	reg := prometheus.NewRegistry()
	srv, err := api.New(api.Config{Fleet: r.fleet, Tokens: tokens, Guard: &auth.Guard{Tokens: tokens, Audit: aud},
		Registerer: reg, Gatherer: reg, Installation: r.in.GRPC()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	g.addr, g.client = ln.Addr().String(), fleetv1.NewInstallationServiceClient(conn)
	return g
}
