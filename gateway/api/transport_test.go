package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/fleet"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// docPaths reads the served document's paths and their methods (upper
// case, sorted).
func docPaths(t *testing.T, g *testGateway) map[string][]string {
	t.Helper()
	code, body := g.rest(t, "", "GET", "/v1/openapi.json", "")
	if code != 200 {
		t.Fatalf("openapi: %d", code)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for p, item := range doc.Paths {
		for m := range item {
			out[p] = append(out[p], strings.ToUpper(m))
		}
		slices.Sort(out[p])
	}
	return out
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// TestWrongMethodIs405 asks every path of the document with every method
// it does not list: 405 with an Allow header naming exactly the methods it
// lists (HEAD too where the HTTP mux serves GET), never grpc-gateway's
// 501. Every listed method is routed (not 404/405 from routing).
func TestWrongMethodIs405(t *testing.T) {
	g := startGateway(t)
	paths := docPaths(t, g)
	for _, must := range []string{"/v1/boards", "/v1/boards/{id}", "/v1/artifacts", "/v1/tokens/{name}", "/v1/rollouts/{id}/pause", "/healthz", "/readyz"} {
		if _, ok := paths[must]; !ok {
			t.Errorf("document lacks %s", must)
		}
	}
	// The paths the HTTP mux serves with GET also take HEAD.
	paths["/metrics"] = []string{"GET"}
	headToo := map[string]bool{"/metrics": true, "/v1/openapi.json": true, "/healthz": true, "/readyz": true}
	paths["/v1/openapi.json"] = []string{"GET"}
	all := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	for tmpl, methods := range paths {
		p := pathParam.ReplaceAllString(tmpl, "x")
		allow := slices.Clone(methods)
		if headToo[tmpl] {
			allow = append(allow, "HEAD")
			slices.Sort(allow)
		}
		for _, m := range all {
			if slices.Contains(methods, m) && strings.HasSuffix(tmpl, "/events") {
				continue // a stream: routed if it does not end at once
			}
			req, _ := http.NewRequestWithContext(g.ctx(t, ""), m, g.url+p, nil)
			req.Header.Set("Authorization", "Bearer "+g.secrets["admin"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if slices.Contains(methods, m) {
				if resp.StatusCode == 405 || resp.StatusCode == 404 && body.Message == "Not Found" {
					t.Errorf("%s %s (listed): %d %+v", m, p, resp.StatusCode, body)
				}
				continue
			}
			if servedByAnother(paths, tmpl, p, m) {
				continue // GET /v1/rollouts/dry-run is GetRollout("dry-run")
			}
			if resp.StatusCode != 405 || body.Error != "method_not_allowed" {
				t.Errorf("%s %s: %d %+v, want 405 method_not_allowed", m, p, resp.StatusCode, body)
				continue
			}
			if got, want := resp.Header.Get("Allow"), strings.Join(allow, ", "); got != want {
				t.Errorf("%s %s: Allow %q, want %q", m, p, got, want)
			}
		}
	}
	// Unknown paths stay 404, whatever the method.
	for _, m := range []string{"GET", "DELETE"} {
		for _, p := range []string{"/v1/nothing", "/v1/boards/x/y/z", "/v1/boards/x/"} {
			if code, body := g.rest(t, "admin", m, p, ""); code != 404 {
				t.Errorf("%s %s: %d %s, want 404", m, p, code, body)
			}
		}
	}
}

// servedByAnother reports whether another template than tmpl matches
// path p and lists method m.
func servedByAnother(paths map[string][]string, tmpl, p, m string) bool {
	segs := strings.Split(p, "/")
	for other, methods := range paths {
		if other == tmpl || !slices.Contains(methods, m) {
			continue
		}
		osegs := strings.Split(other, "/")
		if len(osegs) != len(segs) {
			continue
		}
		match := true
		for i := range osegs {
			if !strings.HasPrefix(osegs[i], "{") && osegs[i] != segs[i] {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

// TestBodyOverMessageLimitIs413: a REST body over gRPC's message limit is
// the caller's to shrink: 413 too_large naming the limit, not 429 (which
// says "retry later"). A real ResourceExhausted stays 429.
func TestBodyOverMessageLimitIs413(t *testing.T) {
	g := startGateway(t)
	big := `{"selector":{"all":true},"kind":"leds","body":{"x":"` + strings.Repeat("a", 8<<20) + `"}}`
	code, body := g.rest(t, "operator", "POST", "/v1/actions", big)
	var eb ErrorBody
	_ = json.Unmarshal([]byte(body), &eb)
	// The front's body limit (--max-body, 1 MiB) refuses it before gRPC's
	// message limit could; both answer the same way.
	if code != 413 || eb.Error != "too_large" || !strings.Contains(eb.Message, "1048576") {
		t.Errorf("8 MiB body: %d %s, want 413 too_large naming 1048576", code, body)
	}
	for _, tc := range []struct {
		st   *status.Status
		code int
		err  string
	}{
		{status.New(codes.ResourceExhausted, "grpc: received message larger than max (8388620 vs. 4194304)"), 413, "too_large"},
		{status.New(codes.ResourceExhausted, "grpc: received message after decompression larger than max (9 vs. 4)"), 413, "too_large"},
		{status.New(codes.ResourceExhausted, "grpc: received message after decompression larger than max 4194304"), 413, "too_large"},
		{Status(fmt.Errorf("watch: %w", ErrFellBehind)), 429, "resource_exhausted"},
		{status.New(codes.ResourceExhausted, "rate limited"), 429, "resource_exhausted"},
		{status.New(codes.InvalidArgument, "grpc: received message larger than max (1 vs. 0)"), 400, "invalid_argument"},
	} {
		code, body := restError(tc.st)
		if code != tc.code || body.Error != tc.err {
			t.Errorf("%v: %d %+v, want %d %s", tc.st, code, body, tc.code, tc.err)
		}
	}
}

// TestTooLargeForTheBoard: fleet.ErrTooLarge (and an image over a slot)
// is the caller's error on both sides: REST 413 too_large with the
// driver's message, gRPC InvalidArgument with ErrorInfo too_large. A
// board's own 413 stays the board's over REST and is InvalidArgument (not
// ResourceExhausted, which invites a retry) over gRPC.
func TestTooLargeForTheBoard(t *testing.T) {
	g := startGateway(t)
	tooLarge := fmt.Errorf("board b1: rs485:line0 5: %w: POST /scenes/apply: a request line of 20541 bytes is over the 1024-byte limit of a JSON line on RS485", fleet.ErrTooLarge)
	g.fake.set(func(f *fakeFleet) { f.err = tooLarge })
	big := `{"method":"POST","path":"/scenes/apply","body":{"name":"` + strings.Repeat("x", 20<<10) + `"}}`
	code, body := g.rest(t, "operator", "POST", "/v1/boards/b1/call", big)
	var eb ErrorBody
	_ = json.Unmarshal([]byte(body), &eb)
	if code != 413 || eb.Error != "too_large" || !strings.Contains(eb.Message, "1024") {
		t.Errorf("REST: %d %s, want 413 too_large naming 1024", code, body)
	}
	v, _ := structpb.NewValue(map[string]any{"name": strings.Repeat("x", 20<<10)})
	_, err := g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: "b1", Method: "POST", Path: "/scenes/apply", Body: v})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "1024") || gatewayReason(st) != ReasonTooLarge {
		t.Errorf("gRPC: %v %q %v, want InvalidArgument with ErrorInfo too_large", st.Code(), st.Message(), st.Details())
	}

	// The image store's own limit says the same.
	code, eb2 := restError(Status(fmt.Errorf("%w: more than 1048576 bytes", artifact.ErrTooLarge)))
	if code != 413 || eb2.Error != "too_large" || !strings.Contains(eb2.Message, "1048576") {
		t.Errorf("artifact too large: %d %+v", code, eb2)
	}

	// A LAN board's own 413.
	boardErr := &boardapi.Error{Status: 413, Code: "too_large", Message: "body over 16384 bytes"}
	g.fake.set(func(f *fakeFleet) { f.err = fmt.Errorf("board b2: %w", boardErr) })
	code, body = g.rest(t, "operator", "POST", "/v1/boards/b2/call", `{"method":"POST","path":"/scenes/apply","body":{}}`)
	if code != 413 || !strings.Contains(body, `"error":"too_large"`) || !strings.Contains(body, "16384") {
		t.Errorf("board 413 over REST: %d %s", code, body)
	}
	_, err = g.client.CallBoard(g.ctx(t, "operator"), &fleetv1.CallBoardRequest{Id: "b2", Method: "POST", Path: "/scenes/apply"})
	st = status.Convert(err)
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if st.Code() != codes.InvalidArgument || info == nil || info.GetReason() != "too_large" || info.GetDomain() != BoardErrorDomain {
		t.Errorf("board 413 over gRPC: %v %v", st.Code(), st.Details())
	}
}

// TestTooLargeErrorsAreDistinct: the too-large reason is never given to
// another error.
func TestTooLargeErrorsAreDistinct(t *testing.T) {
	for _, err := range []error{fleet.ErrNoReply, ErrBadRequest, errors.New("x"), artifact.ErrInvalid} {
		if _, ok := tooLarge(Status(err)); ok {
			t.Errorf("%v reads as too large", err)
		}
	}
}

// TestOpenAPIDescribesUpload: the raw upload is under paths with its
// query parameters, octet-stream body and responses.
func TestOpenAPIDescribesUpload(t *testing.T) {
	doc, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]struct {
			Consumes   []string
			Parameters []struct {
				Name, In string
				Schema   map[string]any
			}
			Responses map[string]struct {
				Schema map[string]any
			}
		}
		Definitions map[string]any
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	up, ok := d.Paths["/v1/artifacts"]["post"]
	if !ok {
		t.Fatal("no POST /v1/artifacts")
	}
	if !slices.Equal(up.Consumes, []string{"application/octet-stream"}) {
		t.Errorf("consumes %v", up.Consumes)
	}
	var params []string
	for _, p := range up.Parameters {
		params = append(params, p.In+":"+p.Name)
	}
	slices.Sort(params)
	if !slices.Equal(params, []string{"body:body", "query:name", "query:sha256"}) {
		t.Errorf("parameters %v", params)
	}
	if ref := up.Responses["200"].Schema["$ref"]; ref != "#/definitions/v1UploadArtifactResponse" {
		t.Errorf("200 schema %v", ref)
	}
	if _, ok := d.Definitions["v1UploadArtifactResponse"]; !ok {
		t.Error("no v1UploadArtifactResponse definition")
	}
	if _, ok := d.Paths["/v1/artifacts"]["get"]; !ok {
		t.Error("the generated GET /v1/artifacts is gone")
	}
	// A path described twice is refused.
	if _, err := mergeOpenAPI(fleetv1.OpenAPI, []byte(`{"paths":{"/v1/boards":{"get":{}}}}`)); err == nil {
		t.Error("a second GET /v1/boards was merged")
	}
	if !bytes.Equal(doc, mustOpenAPI(t)) {
		t.Error("OpenAPI is not stable")
	}
}

func mustOpenAPI(t *testing.T) []byte {
	b, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// errCheck is a ReadyCheck with a settable answer.
type errCheck struct{ err error }

func (c *errCheck) Ready(context.Context) error { return c.err }

// TestAPIMetricsExistAtZero: a fresh server exports every fleet method's
// request counter for every code, and the latency of every unary method,
// at zero, before any call.
func TestAPIMetricsExistAtZero(t *testing.T) {
	g := startGateway(t)
	code, body := g.rest(t, "", "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, md := range fleetv1.FleetService_ServiceDesc.Methods {
		for _, c := range []string{"OK", "NotFound", "Unauthenticated", "Internal"} {
			want := fmt.Sprintf(`holo_gateway_api_requests_total{code=%q,method=%q} 0`, c, md.MethodName)
			if !strings.Contains(body, want) {
				t.Errorf("no %s", want)
			}
		}
		if want := fmt.Sprintf(`holo_gateway_api_request_seconds_count{method=%q} 0`, md.MethodName); !strings.Contains(body, want) {
			t.Errorf("no %s", want)
		}
	}
	for _, sd := range fleetv1.FleetService_ServiceDesc.Streams {
		if want := fmt.Sprintf(`holo_gateway_api_requests_total{code="OK",method=%q} 0`, sd.StreamName); !strings.Contains(body, want) {
			t.Errorf("no %s", want)
		}
	}
}
