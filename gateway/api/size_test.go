package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/holofleet/holofleet/bus/simline"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/lan"
	"github.com/holofleet/holofleet/gateway/rs485"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// TestRequestTooLargeForTheTransport runs the real transports: two
// fleet-mode boards on a simulated RS485 line under the real master, the
// second also on the LAN. A call the line cannot carry is the caller's
// error on every transport, with the limit in the message, over REST
// (413) and gRPC (InvalidArgument); one the line cannot carry but the LAN
// can goes over the LAN.
func TestRequestTooLargeForTheTransport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs boards on a simulated line")
	}
	line, err := simline.New(simline.Config{Baud: 115200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	fm, err := fleetmode.Start(context.Background(), fleetmode.Options{N: 2, BaseDir: t.TempDir(), Line: line})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fm.Stop() })
	master, err := line.Attach(simline.NodeOptions{Name: "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	boards := fm.Boards()
	lineOnly, both := boards[0], boards[1]
	ld := lan.New(lan.Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err := ld.Add(both.URL, ""); err != nil {
		t.Fatal(err)
	}
	rl := rs485.New(rs485.Options{Name: "line0", Port: master, Addresses: []int{lineOnly.Address, both.Address}})
	fl := fleet.New(fleet.Options{Drivers: []fleet.Driver{rl, ld}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = fl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	g := startGateway(t, func(c *Config) { c.Fleet = fl })

	deadline := time.Now().Add(30 * time.Second)
	for {
		a, errA := fl.Board(lineOnly.ID)
		b, errB := fl.Board(both.ID)
		if errA == nil && errB == nil && a.Online && len(b.Transports) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("boards not online on their transports: %+v %+v", a, b)
		}
		time.Sleep(20 * time.Millisecond)
	}

	callBody := func(n int) string {
		return `{"method":"POST","path":"/scenes/apply","body":{"name":"` + strings.Repeat("x", n) + `"}}`
	}
	// 20 KiB to the board only the line reaches: the gateway refuses.
	code, body := g.rest(t, "operator", "POST", "/v1/boards/"+lineOnly.ID+"/call", callBody(20<<10))
	var eb ErrorBody
	_ = json.Unmarshal([]byte(body), &eb)
	if code != 413 || eb.Error != "too_large" || !strings.Contains(eb.Message, "1024") {
		t.Errorf("line only, REST: %d %s, want 413 too_large naming 1024", code, body)
	}
	v, _ := structpb.NewValue(map[string]any{"name": strings.Repeat("x", 20<<10)})
	_, err = g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: lineOnly.ID, Method: "POST", Path: "/scenes/apply", Body: v})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || gatewayReason(st) != ReasonTooLarge || !strings.Contains(st.Message(), "1024") {
		t.Errorf("line only, gRPC: %v %q", st.Code(), st.Message())
	}

	// 20 KiB to the board on both: too large for the line, and over the
	// board's own body limit on the LAN: the board's 413.
	code, body = g.rest(t, "operator", "POST", "/v1/boards/"+both.ID+"/call", callBody(20<<10))
	eb = ErrorBody{}
	_ = json.Unmarshal([]byte(body), &eb)
	if code != 413 || eb.Error != "too_large" {
		t.Errorf("both, REST: %d %s, want the board's 413 too_large", code, body)
	}
	_, err = g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: both.ID, Method: "POST", Path: "/scenes/apply", Body: v})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || BoardError(st) == nil || BoardError(st).Code != "too_large" {
		t.Errorf("both, gRPC: %v %q %v", st.Code(), st.Message(), st.Details())
	}

	// 2 KiB: over a JSON line, well under the board's HTTP limit: the
	// LAN carries it and the board answers (no such scene).
	code, body = g.rest(t, "operator", "POST", "/v1/boards/"+both.ID+"/call", callBody(2<<10))
	eb = ErrorBody{}
	_ = json.Unmarshal([]byte(body), &eb)
	if code == 413 || eb.Error == "too_large" || code >= 500 {
		t.Errorf("both, 2 KiB: %d %s, want the board's own answer over the LAN", code, body)
	}
}
