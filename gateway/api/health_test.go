package api

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/nettest"
)

// TestProbes: /healthz is 200 while the server answers; /readyz is 200
// when every check passes and 503 naming what is not ready otherwise, with
// no token either way; the gRPC health status follows.
func TestProbes(t *testing.T) {
	store, mq := &errCheck{}, &errCheck{err: errors.New("broker not connected")}
	g := startGateway(t, func(c *Config) {
		c.Ready = map[string]ReadyCheck{"store": store, "mqtt": mq, "drivers": ReadyFunc(func(context.Context) error { return nil })}
	})
	code, body := g.rest(t, "", "GET", "/healthz", "")
	if code != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", code, body)
	}
	code, body = g.rest(t, "", "GET", "/readyz", "")
	var p Probe
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	want := Probe{Status: "not_ready", Error: "unavailable", Message: "not ready: mqtt: broker not connected",
		Checks: map[string]string{"store": "ok", "drivers": "ok", "mqtt": "broker not connected"}}
	if code != 503 || !cmp.Equal(p, want) {
		t.Errorf("readyz: %d %s\n%s", code, body, cmp.Diff(p, want))
	}
	hc := healthpb.NewHealthClient(g.conn)
	for _, svc := range healthNames {
		r, err := hc.Check(g.ctx(t, ""), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health %q while not ready: %v %v", svc, r, err)
		}
	}

	mq.err = nil
	code, body = g.rest(t, "", "GET", "/readyz", "")
	if code != 200 || !strings.Contains(body, `"status":"ready"`) || !strings.Contains(body, `"mqtt":"ok"`) {
		t.Errorf("readyz when ready: %d %s", code, body)
	}
	for _, svc := range healthNames {
		r, err := hc.Check(g.ctx(t, ""), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q when ready: %v %v", svc, r, err)
		}
	}
	if _, err := hc.Check(g.ctx(t, ""), &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v", err)
	}
	// A gateway with no checks is ready.
	g2 := startGateway(t)
	if code, body := g2.rest(t, "", "GET", "/readyz", ""); code != 200 {
		t.Errorf("no checks: %d %s", code, body)
	}
}

// TestHealthWatchFollowsReadiness: Watch sees the status change at the
// next refresh, timed by the injected clock.
func TestHealthWatchFollowsReadiness(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	mq := &flipCheck{}
	g := startGateway(t, func(c *Config) {
		c.Ready = map[string]ReadyCheck{"mqtt": mq}
		c.Clock, c.HealthInterval = clk, time.Second
	})
	w, err := healthpb.NewHealthClient(g.conn).Watch(g.ctx(t, ""), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The first refresh ran at start: not ready.
	for {
		r, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
	}
	mq.setErr(nil)
	got := make(chan healthpb.HealthCheckResponse_ServingStatus, 1)
	go func() {
		r, err := w.Recv()
		if err == nil {
			got <- r.GetStatus()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		clk.Advance(time.Second)
		select {
		case st := <-got:
			if st != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("watch: %v", st)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("watch saw no change")
		}
	}
}

// flipCheck is a ReadyCheck whose answer changes under a test; it is
// not ready until set.
type flipCheck struct {
	mu  sync.Mutex
	err error
	set bool
}

func (f *flipCheck) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.set {
		return errors.New("not yet")
	}
	return f.err
}

func (f *flipCheck) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.set = err, true
}

// TestReflection lists the services over gRPC server reflection with a
// real client and a viewer token, as grpcurl list -H does; without a
// token (outside demo mode) reflection is refused.
func TestReflection(t *testing.T) {
	g := startGateway(t)
	anon, err := reflectionpb.NewServerReflectionClient(g.conn).ServerReflectionInfo(g.ctx(t, ""))
	if err == nil {
		_, err = anon.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without a token: %v, want Unauthenticated", err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(g.conn).ServerReflectionInfo(g.ctx(t, "viewer"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"holo.fleet.v1.FleetService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, not %s", names, want)
		}
	}
	// The service's file descriptor is there too (grpcurl describe).
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "holo.fleet.v1.FleetService"}}); err != nil {
		t.Fatal(err)
	}
	r, err = stream.Recv()
	if err != nil || len(r.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("file containing FleetService: %v %v", r, err)
	}
	// Still: the fleet service itself wants a token.
	if code, _ := g.rest(t, "", "GET", "/v1/boards", ""); code != 401 {
		t.Errorf("boards without a token: %d", code)
	}
}

// TestGrpcurl runs grpcurl against the gateway: list, describe, and the
// health check. Without grpcurl on PATH it is skipped, except in CI.
func TestGrpcurl(t *testing.T) {
	g := startGateway(t)
	grpcurl, run := nettest.Grpcurl(t)
	// Outside demo mode reflection needs a token (docs/gateway-api.md).
	if out, err := grpcurl(g.addr, "list"); err == nil || !strings.Contains(out, "Unauthenticated") {
		t.Errorf("grpcurl list without a token: %v\n%s", err, out)
	}
	viewer := "authorization: Bearer " + g.secrets["viewer"]
	list := run("-H", viewer, g.addr, "list")
	for _, want := range []string{"holo.fleet.v1.FleetService", "grpc.health.v1.Health"} {
		if !strings.Contains(list, want) {
			t.Errorf("grpcurl list:\n%s\nlacks %s", list, want)
		}
	}
	if d := run("-H", viewer, g.addr, "describe", "holo.fleet.v1.FleetService"); !strings.Contains(d, "rpc ListBoards") {
		t.Errorf("grpcurl describe:\n%s", d)
	}
	if h := run("-H", viewer, g.addr, "grpc.health.v1.Health/Check"); !strings.Contains(h, `"SERVING"`) {
		t.Errorf("grpcurl health check:\n%s", h)
	}
	// With a token, a fleet call works through reflection alone.
	if b := run("-H", viewer, g.addr, "holo.fleet.v1.FleetService/ListBoards"); !strings.Contains(b, "holo-b1") {
		t.Errorf("grpcurl ListBoards:\n%s", b)
	}
}
