package api

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/auth"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
	"github.com/holofleet/holofleet/store"
)

// TestEveryMethodHasARule: every FleetService method is in the table
// (a missing one would be refused to everyone).
func TestEveryMethodHasARule(t *testing.T) {
	for _, m := range fleetv1.InstallationService_ServiceDesc.Methods {
		if _, ok := rules["/"+fleetv1.InstallationService_ServiceDesc.ServiceName+"/"+m.MethodName]; !ok {
			t.Errorf("%s has no rule", m.MethodName)
		}
	}
	sd := fleetv1.FleetService_ServiceDesc
	for _, m := range sd.Methods {
		if _, ok := rules["/"+sd.ServiceName+"/"+m.MethodName]; !ok {
			t.Errorf("%s has no rule", m.MethodName)
		}
	}
	for _, st := range sd.Streams {
		r, ok := rules["/"+sd.ServiceName+"/"+st.StreamName]
		if !ok {
			t.Errorf("%s has no rule", st.StreamName)
		}
		if st.ServerStreams && !st.ClientStreams && !r.watch {
			t.Errorf("%s streams to the client but is not counted as a watch", st.StreamName)
		}
	}
}

func TestGateAdmit(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	toks, _ := auth.Open(db)
	viewer, _, _ := toks.Create("v", auth.RoleViewer)
	g := &gate{guard: &auth.Guard{Tokens: toks}, log: slog.New(slog.DiscardHandler),
		streams: auth.NewStreamLimiter(1, 0), public: auth.NewStreamLimiter(1, 0)}
	ctxFor := func(authz string) context.Context {
		md := metadata.MD{}
		if authz != "" {
			md.Set("authorization", authz)
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)
		return peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 5}})
	}
	for _, tc := range []struct {
		name, method, authz string
		req                 any
		want                codes.Code
	}{
		{"health without a token", healthCheck, "", nil, codes.OK},
		{"health with a viewer", healthCheck, "Bearer " + viewer, nil, codes.OK},
		{"health with a bad token", healthCheck, "Bearer holo_bad", nil, codes.Unauthenticated},
		{"reflection without a token", reflectionV1, "", nil, codes.Unauthenticated},
		{"reflection with a viewer", reflectionV1, "Bearer " + viewer, nil, codes.OK},
		{"health watch", healthWatch, "", nil, codes.OK},
		{"second health watch of one host", healthWatch, "", nil, codes.ResourceExhausted},
		{"unknown method", "/x.Y/Z", "Bearer " + viewer, nil, codes.PermissionDenied},
		{"list boards without a token", fleetv1.FleetService_ListBoards_FullMethodName, "", nil, codes.Unauthenticated},
		{"relative call path", fleetv1.FleetService_CallBoard_FullMethodName, "Bearer " + viewer,
			&fleetv1.CallBoardRequest{Id: "b1", Method: "GET", Path: "info"}, codes.InvalidArgument},
		{"viewer calls", fleetv1.FleetService_CallBoard_FullMethodName, "Bearer " + viewer,
			&fleetv1.CallBoardRequest{Id: "b1", Method: "GET", Path: "/info"}, codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(tc.authz)
			c := g.begin(ctx, tc.method)
			_, _, _, err := g.admit(ctx, c, tc.method, func() (any, error) { return tc.req, nil })
			if status.Code(err) != tc.want {
				t.Errorf("admit: %v, want %v", err, tc.want)
			}
		})
	}
}
