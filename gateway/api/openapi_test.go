package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/store"
)

// servedDoc loads /v1/openapi.json as a generated client would: as
// Swagger 2.0, converted to OpenAPI 3, valid.
func servedDoc(t *testing.T, g *testGateway) *openapi3.T {
	t.Helper()
	code, body := g.rest(t, "", "GET", "/v1/openapi.json", "")
	if code != 200 {
		t.Fatalf("openapi: %d", code)
	}
	var v2 openapi2.T
	if err := v2.UnmarshalJSON([]byte(body)); err != nil {
		t.Fatalf("not Swagger 2.0: %v", err)
	}
	v3, err := openapi2conv.ToV3(&v2)
	if err != nil {
		t.Fatalf("to OpenAPI 3: %v", err)
	}
	if err := openapi3.NewLoader().ResolveRefsIn(v3, nil); err != nil {
		t.Fatalf("refs: %v", err)
	}
	if err := v3.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid: %v", err)
	}
	return v3
}

// TestOpenAPIValidAndUploadMatches checks the served document and a real
// raw upload against it: the request (query parameters, octet-stream
// body) and the 200 and error replies are what the document says.
func TestOpenAPIValidAndUploadMatches(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "arts.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	arts, err := artifact.Open(artifact.Options{Dir: filepath.Join(t.TempDir(), "artifacts"), DB: db})
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, func(c *Config) { c.Artifacts = arts })
	doc := servedDoc(t, g)
	doc.Servers = openapi3.Servers{{URL: g.url}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	img := fwImage(t, "2.0.0", 4096)
	for _, tc := range []struct {
		name, query string
		body        []byte
		want        int
	}{
		{"good", "?name=holo-board-2.0.0.bin", img, 200},
		{"again", "?name=holo-board-2.0.0.bin", img, 200},
		{"corrupt", "?name=x.bin", []byte("not an image"), 400},
	} {
		req, err := http.NewRequest("POST", g.url+"/v1/artifacts"+tc.query, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s: the upload is not described: %v", tc.name, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s: request does not match the document: %v", tc.name, err)
		}
		req.Body = io.NopCloser(bytes.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+g.secrets["admin"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, rb, tc.want)
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		out.SetBodyBytes(rb)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s: reply does not match the document: %v\n%s", tc.name, err, rb)
		}
	}
}
