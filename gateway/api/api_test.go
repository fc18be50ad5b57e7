package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

func (g *testGateway) ctx(t testing.TB, role string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if role == "" {
		return ctx
	}
	sec, ok := g.secrets[role]
	if !ok {
		sec = role // a raw secret
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+sec)
}

// rest sends a request with the token of role ("" for none) and returns the
// status and body.
func (g *testGateway) rest(t *testing.T, role, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if role != "" {
		sec, ok := g.secrets[role]
		if !ok {
			sec = role
		}
		req.Header.Set("Authorization", "Bearer "+sec)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGRPCEveryCall(t *testing.T) {
	g := startGateway(t)
	ctx := g.ctx(t, "admin")
	c := g.client

	list, err := c.ListBoards(ctx, &fleetv1.ListBoardsRequest{Group: 2, Selector: "room=hall", Firmware: "1.2.0", Online: proto.Bool(true), Ids: []string{"b1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(list.GetBoards()); got != 2 {
		t.Fatalf("ListBoards: %d boards, want 2", got)
	}
	online := true
	if diff := cmp.Diff(g.fake.filter, fleet.Filter{Group: 2, Labels: map[string]string{"room": "hall"}, Firmware: "1.2.0", Online: &online, IDs: []string{"b1"}}); diff != "" {
		t.Errorf("filter (-got +want):\n%s", diff)
	}
	b, err := c.GetBoard(ctx, &fleetv1.GetBoardRequest{Id: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	if b.GetHostname() != "holo-b1" || b.GetAddress() != 5 || !b.GetOnline() || b.GetFirmware() != "1.2.0" || len(b.GetGroups()) != 2 {
		t.Errorf("GetBoard = %v", b)
	}
	b, err = c.SetLabels(ctx, &fleetv1.SetLabelsRequest{Id: "b2", Labels: map[string]string{"room": "lobby"}})
	if err != nil || b.GetLabels()["room"] != "lobby" {
		t.Fatalf("SetLabels = %v, %v", b, err)
	}
	body, _ := structpb.NewValue(map[string]any{"on": true})
	cr, err := c.CallBoard(ctx, &fleetv1.CallBoardRequest{Id: "b1", Method: "patch", Path: "/leds", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if cr.GetStatus() != 200 || cr.GetBody() != `{"on":true,  "b":1}` {
		t.Errorf("CallBoard = %v (the board's bytes must arrive intact)", cr)
	}
	if diff := cmp.Diff(g.fake.call, []string{"b1", "PATCH", "/leds", `{"on":true}`}); diff != "" {
		t.Errorf("call (-got +want):\n%s", diff)
	}
	g.fake.set(func(f *fakeFleet) {
		f.results = []fleet.Result{
			{Board: "b1", Via: "group"},
			{Board: "b2", Via: "lan", Reply: fleet.Reply{Status: 404, Body: []byte(`{"error":"unknown_scene","message":"no scene x"}`)}},
			{Board: "b3", Via: "rs485", Error: "board did not reply"},
		}
	})
	scene, _ := structpb.NewValue(map[string]any{"name": "x"})
	dr, err := c.DoAction(ctx, &fleetv1.DoActionRequest{Selector: &fleetv1.Selector{Groups: []int32{1}}, Kind: "scene_apply", Body: scene})
	if err != nil {
		t.Fatal(err)
	}
	want := []*fleetv1.Result{
		{Board: "b1", Via: "group"},
		{Board: "b2", Via: "lan", Status: 404, Body: `{"error":"unknown_scene","message":"no scene x"}`, Error: "unknown_scene", Message: "no scene x"},
		{Board: "b3", Via: "rs485", Error: "board did not reply"},
	}
	if diff := cmp.Diff(dr.GetResults(), want, cmpProto); diff != "" {
		t.Errorf("DoAction (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(g.fake.sel, fleet.Selector{Groups: []int{1}}); diff != "" {
		t.Errorf("selector (-got +want):\n%s", diff)
	}
	if g.fake.action.Kind != "scene_apply" || string(g.fake.action.Body) != `{"name":"x"}` {
		t.Errorf("action = %+v", g.fake.action)
	}

	ct, err := c.CreateToken(ctx, &fleetv1.CreateTokenRequest{Name: "ci", Role: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ct.GetSecret(), auth.SecretPrefix) || ct.GetToken().GetRole() != "viewer" {
		t.Errorf("CreateToken = %v", ct)
	}
	lt, err := c.ListTokens(ctx, &fleetv1.ListTokensRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tk := range lt.GetTokens() {
		names = append(names, tk.GetName()+":"+tk.GetRole())
	}
	if diff := cmp.Diff(names, []string{"ci:viewer", "t-admin:admin", "t-operator:operator", "t-viewer:viewer"}); diff != "" {
		t.Errorf("ListTokens (-got +want):\n%s", diff)
	}
	if _, err := c.RevokeToken(ctx, &fleetv1.RevokeTokenRequest{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListBoards(g.ctx(t, ct.GetSecret()), &fleetv1.ListBoardsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("revoked token: %v, want Unauthenticated", err)
	}
	if _, err := c.RevokeToken(ctx, &fleetv1.RevokeTokenRequest{Name: "ci"}); status.Code(err) != codes.NotFound {
		t.Errorf("revoke twice: %v, want NotFound", err)
	}
}

var cmpProto = cmp.Comparer(proto.Equal)

func TestGRPCWatchEvents(t *testing.T) {
	g := startGateway(t)
	ctx, cancel := context.WithCancel(g.ctx(t, "viewer"))
	defer cancel()
	stream, err := g.client.WatchEvents(ctx, &fleetv1.WatchEventsRequest{Group: 1, After: proto.Uint64(7)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	g.fake.waitWatch(t)
	if w := g.fake.lastWatcher(); w.after != 7 || w.f.Group != 1 {
		t.Errorf("watch after %d filter %+v", w.after, w.f)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g.fake.publish(fleet.Event{N: 8, Board: "b1", Type: "happening", Kind: "touch", Seq: 3, Data: []byte(`{"x": 1}`), Time: t0})
	g.fake.publish(fleet.Event{N: 9, Board: "b1", Type: "offline", Reason: "no reply", Time: t0})
	for _, want := range []uint64{8, 9} {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetN() != want {
			t.Errorf("event n %d, want %d", ev.GetN(), want)
		}
		if want == 8 && (ev.GetData() != `{"x": 1}` || ev.GetSeq() != 3 || ev.GetKind() != "touch") {
			t.Errorf("event = %v", ev)
		}
	}
	g.fake.cutOff(4)
	_, err = stream.Recv()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("after cut-off: %v, want ResourceExhausted", err)
	}
}

func TestRESTEveryCall(t *testing.T) {
	g := startGateway(t)
	code, body := g.rest(t, "viewer", "GET", "/v1/boards?group=2&selector=room%3Dhall&online=true", "")
	if code != 200 {
		t.Fatalf("GET /v1/boards: %d %s", code, body)
	}
	var boards []map[string]any
	if err := json.Unmarshal([]byte(body), &boards); err != nil {
		t.Fatalf("GET /v1/boards is not a JSON list: %v\n%s", err, body)
	}
	if len(boards) != 2 {
		t.Fatalf("%d boards", len(boards))
	}
	for _, k := range []string{"id", "hostname", "address", "groups", "online", "firmware", "labels", "last_seen", "url", "offline_reason"} {
		if _, ok := boards[1][k]; !ok {
			t.Errorf("board JSON lacks %q: %v", k, boards[1])
		}
	}
	if boards[0]["address"] != 5.0 || boards[0]["online"] != true || boards[0]["id"] != "b1" {
		t.Errorf("board 0 = %v", boards[0])
	}
	if f := g.fake.filter; f.Group != 2 || f.Labels["room"] != "hall" || f.Online == nil || !*f.Online {
		t.Errorf("filter = %+v", f)
	}
	code, body = g.rest(t, "viewer", "GET", "/v1/boards/b2", "")
	if code != 200 || !strings.Contains(body, `"offline_reason":"stream closed"`) {
		t.Errorf("GET /v1/boards/b2: %d %s", code, body)
	}
	code, body = g.rest(t, "operator", "PATCH", "/v1/boards/b1/labels", `{"room":"stage","row":"2"}`)
	if code != 200 || !strings.Contains(body, `"row":"2"`) {
		t.Errorf("PATCH labels: %d %s", code, body)
	}
	code, body = g.rest(t, "operator", "POST", "/v1/boards/b1/call", `{"method":"GET","path":"/leds"}`)
	if code != 200 {
		t.Fatalf("call: %d %s", code, body)
	}
	var cr struct {
		Status int
		Body   string
	}
	if err := json.Unmarshal([]byte(body), &cr); err != nil || cr.Status != 200 || cr.Body != `{"on":true,  "b":1}` {
		t.Errorf("call reply %s (%v)", body, err)
	}
	if g.fake.call[3] != "" {
		t.Errorf("call without body sent %q", g.fake.call[3])
	}
	g.fake.set(func(f *fakeFleet) {
		f.results = []fleet.Result{{Board: "b1", Via: "rs485", Reply: fleet.Reply{Status: 200, Body: []byte(`{}`)}}}
	})
	code, body = g.rest(t, "operator", "POST", "/v1/actions", `{"selector":{"labels":{"room":"hall"}},"kind":"leds","body":{"mode":"off"}}`)
	if code != 200 || !strings.Contains(body, `"board":"b1"`) {
		t.Errorf("actions: %d %s", code, body)
	}
	if string(g.fake.action.Body) != `{"mode":"off"}` || g.fake.sel.Labels["room"] != "hall" {
		t.Errorf("action %+v sel %+v", g.fake.action, g.fake.sel)
	}
	code, body = g.rest(t, "admin", "POST", "/v1/tokens", `{"name":"dash","role":"operator"}`)
	if code != 200 || !strings.Contains(body, `"secret":"holo_`) {
		t.Errorf("create token: %d %s", code, body)
	}
	code, body = g.rest(t, "admin", "GET", "/v1/tokens", "")
	if code != 200 || !strings.HasPrefix(body, "[") || !strings.Contains(body, `"name":"dash"`) || strings.Contains(body, "holo_") {
		t.Errorf("list tokens: %d %s", code, body)
	}
	code, body = g.rest(t, "admin", "DELETE", "/v1/tokens/dash", "")
	if code != 200 {
		t.Errorf("revoke: %d %s", code, body)
	}
	code, body = g.rest(t, "admin", "DELETE", "/v1/tokens/dash", "")
	if code != 404 || !strings.Contains(body, `"error":"not_found"`) {
		t.Errorf("revoke twice: %d %s", code, body)
	}
}

func TestRESTEventsNDJSON(t *testing.T) {
	g := startGateway(t)
	req, _ := http.NewRequest("GET", g.url+"/v1/events?ids=b1&after=3", nil)
	req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// grpc-gateway sends the response head with the first event.
	go func() {
		g.fake.waitWatch(t)
		g.fake.publish(fleet.Event{N: 4, Board: "b1", Type: "state", Kind: "leds", Data: []byte(`{"on":true}`)})
	}()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if w := g.fake.lastWatcher(); w.after != 3 || len(w.f.IDs) != 1 {
		t.Errorf("watch %+v", w)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal(sc.Err())
	}
	var line struct{ Result map[string]any }
	if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, sc.Text())
	}
	if line.Result["n"] != "4" || line.Result["data"] != `{"on":true}` || line.Result["type"] != "state" {
		t.Errorf("line %s", sc.Text())
	}
}

func TestRESTEventsSSE(t *testing.T) {
	g := startGateway(t)
	req, _ := http.NewRequest("GET", g.url+"/v1/events?group=3", nil)
	req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "41")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	g.fake.waitWatch(t)
	if w := g.fake.lastWatcher(); w.after != 41 || w.f.Group != 3 {
		t.Errorf("watch after %d filter %+v", w.after, w.f)
	}
	g.fake.publish(fleet.Event{N: 42, Board: "b2", Type: "online"})
	g.fake.cutOff(9)
	b, _ := io.ReadAll(resp.Body)
	got := string(b)
	if !strings.HasPrefix(got, "id: 42\nevent: online\ndata: {") {
		t.Errorf("SSE stream:\n%s", got)
	}
	if !strings.Contains(got, "event: error\ndata: {\"error\":\"resource_exhausted\"") {
		t.Errorf("SSE stream lacks the error event:\n%s", got)
	}

	// Without a token the SSE request is refused like any other.
	req, _ = http.NewRequest("GET", g.url+"/v1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 401 {
		t.Errorf("SSE without token: %d", resp2.StatusCode)
	}
}

// calls lists every RPC with its REST form and the role it needs.
var calls = []struct {
	name       string
	need       string
	grpc       func(context.Context, fleetv1.FleetServiceClient) error
	method     string
	path, body string
}{
	{"ListBoards", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ListBoards(ctx, &fleetv1.ListBoardsRequest{})
		return err
	}, "GET", "/v1/boards", ""},
	{"GetBoard", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.GetBoard(ctx, &fleetv1.GetBoardRequest{Id: "b1"})
		return err
	}, "GET", "/v1/boards/b1", ""},
	{"WatchEvents", "viewer", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s, err := c.WatchEvents(ctx, &fleetv1.WatchEventsRequest{})
		if err != nil {
			return err
		}
		md, err := s.Header()
		if err == nil && len(md.Get(WatchHeader)) == 0 {
			_, err = s.Recv()
		}
		return err
	}, "", "", ""},
	{"SetLabels", "operator", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.SetLabels(ctx, &fleetv1.SetLabelsRequest{Id: "b1", Labels: map[string]string{"a": "b"}})
		return err
	}, "PATCH", "/v1/boards/b1/labels", `{"a":"b"}`},
	{"CallBoard", "operator", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.CallBoard(ctx, &fleetv1.CallBoardRequest{Id: "b1", Method: "GET", Path: "/info"})
		return err
	}, "POST", "/v1/boards/b1/call", `{"method":"GET","path":"/info"}`},
	{"DoAction", "operator", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.DoAction(ctx, &fleetv1.DoActionRequest{Selector: &fleetv1.Selector{All: true}, Kind: "scene_end"})
		return err
	}, "POST", "/v1/actions", `{"selector":{"all":true},"kind":"scene_end"}`},
	{"ListTokens", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.ListTokens(ctx, &fleetv1.ListTokensRequest{})
		return err
	}, "GET", "/v1/tokens", ""},
	{"CreateToken", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.CreateToken(ctx, &fleetv1.CreateTokenRequest{Name: "x", Role: "viewer"})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	}, "POST", "/v1/tokens", `{"name":"y","role":"viewer"}`},
	{"RevokeToken", "admin", func(ctx context.Context, c fleetv1.FleetServiceClient) error {
		_, err := c.RevokeToken(ctx, &fleetv1.RevokeTokenRequest{Name: "nobody"})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return err
	}, "DELETE", "/v1/tokens/nobody", ""},
}

func TestAuthEveryRole(t *testing.T) {
	g := startGateway(t)
	rank := map[string]int{"viewer": 1, "operator": 2, "admin": 3}
	for _, c := range calls {
		for _, role := range []string{"", "bogus-secret", "viewer", "operator", "admin"} {
			want := codes.OK
			switch {
			case role == "" || role == "bogus-secret":
				want = codes.Unauthenticated
			case rank[role] < rank[c.need]:
				want = codes.PermissionDenied
			}
			err := c.grpc(g.ctx(t, role), g.client)
			if got := status.Code(err); got != want {
				t.Errorf("gRPC %s as %q: %v, want %v", c.name, role, err, want)
			}
			if c.path == "" {
				continue
			}
			code, body := g.rest(t, role, c.method, c.path, c.body)
			if wantHTTP := httpStatus(want); code != wantHTTP && !(want == codes.OK && code == 404 && c.name == "RevokeToken") {
				t.Errorf("REST %s %s as %q: %d %s, want %d", c.method, c.path, role, code, body, wantHTTP)
			}
		}
	}
}

func TestNoTokenModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  gwOpt
	}{
		{"demo loopback", func(c *Config) { c.Demo = true }},
		{"insecure lab", func(c *Config) { c.InsecureLab = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, tc.opt)
			for _, c := range calls {
				if err := c.grpc(g.ctx(t, ""), g.client); err != nil {
					t.Errorf("gRPC %s without token: %v", c.name, err)
				}
				if c.path != "" {
					if code, body := g.rest(t, "", c.method, c.path, c.body); code != 200 && code != 404 {
						t.Errorf("REST %s without token: %d %s", c.name, code, body)
					}
				}
			}
		})
	}
}

func TestGuardIgnoresForgedRemoteAddr(t *testing.T) {
	g := startGateway(t) // not demo: loopback needs a token anyway
	req, _ := http.NewRequest("GET", g.url+"/v1/boards", nil)
	req.Header.Set("Grpc-Metadata-Holo-Remote-Addr", "127.0.0.1:1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}
}

func TestErrorMapping(t *testing.T) {
	boardErr := &boardapi.Error{Status: 404, Code: "unknown_scene", Message: `no scene "x"`}
	for _, tc := range []struct {
		err      error
		code     codes.Code
		http     int
		restBody string
	}{
		{fleet.ErrUnknownBoard, codes.NotFound, 404, `"error":"not_found"`},
		{fmt.Errorf("group 9: %w", fleet.ErrUnknownGroup), codes.NotFound, 404, `"error":"not_found"`},
		{fleet.ErrUnreachable, codes.Unavailable, 503, `"error":"unavailable"`},
		{fmt.Errorf("after 3 tries: %w", fleet.ErrNoReply), codes.Unavailable, 503, `"message":"after 3 tries: fleet: board did not reply"`},
		{fleet.ErrNotOverLink, codes.FailedPrecondition, 412, `"error":"failed_precondition"`},
		{fleet.ErrBadReply, codes.Internal, 500, `"error":"internal"`},
		{fmt.Errorf("%w: x", ErrBadRequest), codes.InvalidArgument, 400, `"error":"invalid_argument"`},
		{context.DeadlineExceeded, codes.DeadlineExceeded, 504, `"error":"deadline_exceeded"`},
		{errors.New("boom"), codes.Internal, 500, `"message":"boom"`},
		{boardErr, codes.NotFound, 404, `{"error":"unknown_scene","message":"no scene \"x\""}`},
		{&boardapi.Error{Status: 409, Code: "busy", Message: "flashing"}, codes.FailedPrecondition, 409, `{"error":"busy","message":"flashing"}`},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := Status(tc.err).Code(); got != tc.code {
				t.Errorf("Status = %v, want %v", got, tc.code)
			}
			g := startGateway(t)
			g.fake.set(func(f *fakeFleet) { f.err = tc.err })
			_, err := g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: "b1", Method: "GET", Path: "/x"})
			if status.Code(err) != tc.code {
				t.Errorf("gRPC: %v, want %v", err, tc.code)
			}
			code, body := g.rest(t, "operator", "POST", "/v1/boards/b1/call", `{"method":"GET","path":"/x"}`)
			if code != tc.http || !strings.Contains(body, tc.restBody) {
				t.Errorf("REST: %d %s, want %d with %s", code, body, tc.http, tc.restBody)
			}
		})
	}
}

func TestBoardErrorIntact(t *testing.T) {
	g := startGateway(t)
	raw := `{"error":"unknown_scene","message":"no scene \"x\""}`
	g.fake.set(func(f *fakeFleet) { f.reply = fleet.Reply{Status: 404, Body: []byte(raw)} })
	_, err := g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: "b1", Method: "POST", Path: "/scenes/apply"})
	st := status.Convert(err)
	if st.Code() != codes.NotFound {
		t.Errorf("code %v", st.Code())
	}
	be := BoardError(st)
	if diff := cmp.Diff(be, &boardapi.Error{Status: 404, Code: "unknown_scene", Message: `no scene "x"`}); diff != "" {
		t.Errorf("board error over gRPC (-got +want):\n%s", diff)
	}
	code, body := g.rest(t, "operator", "POST", "/v1/boards/b1/call", `{"method":"POST","path":"/scenes/apply","body":{"name":"x"}}`)
	if code != 404 || strings.TrimSpace(body) != raw {
		t.Errorf("REST: %d %s, want 404 %s", code, body, raw)
	}
}

func TestBadRequests(t *testing.T) {
	g := startGateway(t)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/boards/b1/call", `{"method":"BREW","path":"/x"}`},
		{"POST", "/v1/boards/b1/call", `{"method":"GET","path":"x"}`},
		{"POST", "/v1/boards/b1/call", `{"method":"GET",`},
		{"POST", "/v1/actions", `{"selector":{},"kind":"leds"}`},
		{"POST", "/v1/actions", `{"selector":{"all":true},"kind":"dance"}`},
		{"POST", "/v1/actions", `{"selector":{"groups":[40]},"kind":"leds"}`},
		{"GET", "/v1/boards?selector=bad", ""},
		{"GET", "/v1/boards?group=99", ""},
		{"PATCH", "/v1/boards/b1/labels", `{"bad key":"x"}`},
		{"POST", "/v1/tokens", `{"name":"a b","role":"viewer"}`},
		{"POST", "/v1/tokens", `{"name":"ok","role":"root"}`},
	} {
		code, body := g.rest(t, "admin", tc.method, tc.path, tc.body)
		if code != 400 || !strings.Contains(body, `"error":"invalid_argument"`) {
			t.Errorf("%s %s %s: %d %s", tc.method, tc.path, tc.body, code, body)
		}
	}
	if code, body := g.rest(t, "admin", "GET", "/v1/boards/nope", ""); code != 404 {
		t.Errorf("unknown board: %d %s", code, body)
	}
	if code, _ := g.rest(t, "admin", "GET", "/v1/nothing", ""); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

func TestOpenAPIAndMetrics(t *testing.T) {
	g := startGateway(t)
	code, body := g.rest(t, "", "GET", "/v1/openapi.json", "")
	if code != 200 {
		t.Fatalf("openapi: %d", code)
	}
	var doc struct {
		Swagger string
		Paths   map[string]map[string]any
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	for p, m := range map[string]string{"/v1/boards": "get", "/v1/boards/{id}": "get", "/v1/boards/{id}/labels": "patch",
		"/v1/boards/{id}/call": "post", "/v1/actions": "post", "/v1/events": "get", "/v1/tokens": "post", "/v1/tokens/{name}": "delete"} {
		if _, ok := doc.Paths[p][m]; !ok {
			t.Errorf("openapi lacks %s %s", m, p)
		}
	}
	if doc.Swagger != "2.0" {
		t.Errorf("swagger %q", doc.Swagger)
	}
	g.rest(t, "viewer", "GET", "/v1/boards", "")
	code, body = g.rest(t, "", "GET", "/metrics", "")
	if code != 200 || !strings.Contains(body, `holo_gateway_api_requests_total{code="OK",method="ListBoards"} 1`) {
		t.Errorf("metrics: %d\n%s", code, body)
	}
}

func TestJSONShapeOfBoard(t *testing.T) {
	// The REST JSON of a board uses the proto names.
	b := boardOf(newFake().boards[0])
	out, err := jsonPb.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m["last_seen"] != "2026-03-01T12:00:00Z" || m["hostname"] != "holo-b1" {
		t.Errorf("%s", out)
	}
	var back fleetv1.Board
	if err := protojson.Unmarshal(out, &back); err != nil || !proto.Equal(&back, b) {
		t.Errorf("round trip: %v", err)
	}
}

// TestWatchAfter: an after the caller gives, 0 included, is the number
// the replay starts after (0: from the first event kept); no after is
// fleet.Live (from now on). after=0 once meant "from now", so event 1
// could never be replayed.
func TestWatchAfter(t *testing.T) {
	g := startGateway(t)
	for _, tc := range []struct {
		name   string
		query  string
		lastID string
		sse    bool
		want   uint64
	}{
		{"no after", "", "", false, fleet.Live},
		{"after=0", "?after=0", "", false, 0},
		{"after=1", "?after=1", "", false, 1},
		{"SSE, no after", "", "", true, fleet.Live},
		{"SSE, after=0", "?after=0", "", true, 0},
		{"SSE, Last-Event-ID 0", "", "0", true, 0},
		{"SSE, Last-Event-ID wins", "?after=5", "7", true, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/events"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
			if tc.sse {
				req.Header.Set("Accept", "text/event-stream")
			}
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
			}()
			g.fake.waitWatch(t)
			if w := g.fake.lastWatcher(); w.after != tc.want {
				t.Errorf("watch after %d, want %d", w.after, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		req  *fleetv1.WatchEventsRequest
		want uint64
	}{
		{"gRPC, no after", &fleetv1.WatchEventsRequest{}, fleet.Live},
		{"gRPC, after 0", &fleetv1.WatchEventsRequest{After: proto.Uint64(0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(g.ctx(t, "viewer"))
			defer cancel()
			stream, err := g.client.WatchEvents(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Header(); err != nil {
				t.Fatal(err)
			}
			g.fake.waitWatch(t)
			if w := g.fake.lastWatcher(); w.after != tc.want {
				t.Errorf("watch after %d, want %d", w.after, tc.want)
			}
		})
	}
}
