package api

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// connFrom is a gRPC connection to the gateway from source address ip
// (127.0.0.0/8 is all loopback on Linux: distinct sources on one machine).
func connFrom(t *testing.T, g *testGateway, ip string) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// healthWatch opens a health Watch and returns the error of its first
// answer (nil: admitted, the status arrived).
func healthWatchOn(t *testing.T, ctx context.Context, conn *grpc.ClientConn) error {
	t.Helper()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = w.Recv()
	return err
}

// reflectOn opens a reflection stream, lists the services once and keeps
// the stream open; it returns the error of the first answer.
func reflectOn(t *testing.T, ctx context.Context, conn *grpc.ClientConn) error {
	t.Helper()
	s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	// A stream the server refused may already be closed when the request
	// goes out: Send then says io.EOF, and the refusal's status is what
	// Recv returns (grpc-go's contract for a terminated stream).
	if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = s.Recv()
	return err
}

// TestPublicStreamsCannotStarveAdmin fills the public stream pool (health
// Watch from two source addresses; reflection too in demo mode) and
// shows each source capped, the pool capped, and an admin's event
// stream still admitted: the public pool is not the authenticated one.
func TestPublicStreamsCannotStarveAdmin(t *testing.T) {
	for _, demo := range []bool{false, true} {
		name := "tokens"
		if demo {
			name = "demo"
		}
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, func(c *Config) {
				c.Demo = demo
				c.Limits = Limits{Streams: 2, StreamsPerToken: 2, PublicStreams: 4, PublicStreamsPerSource: 3}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			src1, src2 := connFrom(t, g, "127.0.0.1"), connFrom(t, g, "127.0.0.2")
			open := healthWatchOn
			if demo {
				open = reflectOn // public in demo mode, counted alike
			}
			for i := range 3 {
				if err := open(t, ctx, src1); err != nil {
					t.Fatalf("public stream %d from 127.0.0.1: %v", i+1, err)
				}
			}
			if err := healthWatchOn(t, ctx, src1); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("4th public stream from one source: %v, want ResourceExhausted", err)
			}
			if err := healthWatchOn(t, ctx, src2); err != nil {
				t.Errorf("public stream from another source: %v", err)
			}
			if err := open(t, ctx, src2); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("public stream beyond the pool: %v, want ResourceExhausted", err)
			}
			// The public pool is full; an admin's event streams are not
			// affected (both of the authenticated pool's slots).
			for i := range 2 {
				w, err := g.client.WatchEvents(g.ctx(t, "admin"), &fleetv1.WatchEventsRequest{})
				if err == nil {
					g.fake.waitWatch(t)
				}
				if err != nil {
					t.Fatalf("admin's event stream %d with the public pool full: %v", i+1, err)
				}
				_ = w
			}
			if !demo {
				// Reflection is not public outside demo mode.
				if err := reflectOn(t, ctx, src2); status.Code(err) != codes.Unauthenticated {
					t.Errorf("reflection without a token: %v, want Unauthenticated", err)
				}
			}
		})
	}
}

// TestPublicStreamIdle: a reflection stream that asks nothing, and a
// health Watch that hears nothing, end DeadlineExceeded after the idle
// limit and give their slot back.
func TestPublicStreamIdle(t *testing.T) {
	g := startGateway(t, func(c *Config) {
		c.Demo = true
		c.Limits = Limits{PublicStreams: 1, PublicStreamsPerSource: 1, PublicStreamIdle: 300 * time.Millisecond}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := reflectionpb.NewServerReflectionClient(g.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("quiet reflection stream: %v, want DeadlineExceeded", err)
	}
	// Its slot is free again (the pool holds one): a health Watch gets
	// its status, then hears nothing more and ends alike.
	w, err := healthpb.NewHealthClient(g.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, err := w.Recv()
		if err != nil {
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("quiet health watch: %v, want DeadlineExceeded", err)
			}
			break
		}
	}
	if err := reflectOn(t, ctx, g.conn); err != nil {
		t.Errorf("reflection after the idle streams ended: %v", err)
	}
}
