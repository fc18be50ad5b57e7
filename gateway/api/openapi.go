package api

// The OpenAPI document served at /v1/openapi.json, and the table of
// routes the listener answers that it gives.
//
// protoc-gen-openapiv2 writes the REST routes of FleetService from the
// HTTP rules (proto/holo/fleet/v1). The routes the Server adds itself are
// described in openapi_extra.json: the raw upload POST /v1/artifacts and
// the probes /healthz and /readyz. OpenAPI merges the two once; a path
// and method both describe is a programming error (New fails).
//
// The same document tells which methods each path takes: a request for a
// known path with another method is answered 405 with an Allow header
// (routes.allow), so the list a client reads in the document and the one
// the server enforces cannot drift apart.

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

//go:embed openapi_extra.json
var openapiExtra []byte

// OpenAPI returns the document served at /v1/openapi.json: the generated
// description of FleetService's REST routes with the routes the Server
// serves beside grpc-gateway (the raw firmware upload, the probes).
func OpenAPI() ([]byte, error) {
	return mergeOpenAPI(fleetv1.OpenAPI, openapiExtra)
}

// mergeOpenAPI adds extra's paths, definitions and tags to base.
func mergeOpenAPI(base, extra []byte) ([]byte, error) {
	var doc, add map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi: %w", err)
	}
	if err := json.Unmarshal(extra, &add); err != nil {
		return nil, fmt.Errorf("api: openapi extra: %w", err)
	}
	for _, section := range []string{"paths", "definitions"} {
		if _, ok := doc[section].(map[string]any); !ok {
			doc[section] = map[string]any{}
		}
	}
	paths := doc["paths"].(map[string]any)
	addPaths, _ := add["paths"].(map[string]any)
	for p, ops := range addPaths {
		item, ok := paths[p].(map[string]any)
		if !ok {
			item = map[string]any{}
			paths[p] = item
		}
		for method, op := range ops.(map[string]any) {
			if _, dup := item[method]; dup {
				return nil, fmt.Errorf("api: openapi: %s %s is described twice", method, p)
			}
			item[method] = op
		}
	}
	if addTags, ok := add["tags"].([]any); ok {
		tags, _ := doc["tags"].([]any)
		doc["tags"] = append(tags, addTags...)
	}
	defs := doc["definitions"].(map[string]any)
	addDefs, _ := add["definitions"].(map[string]any)
	for name, d := range addDefs {
		if _, dup := defs[name]; dup {
			return nil, fmt.Errorf("api: openapi: definition %s is described twice", name)
		}
		defs[name] = d
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// routes is what the listener serves by path: each path template of the
// document (a segment "{x}" matches any one segment) with its methods,
// and the fixed paths served beside it.
type routes struct {
	paths []routePath
}

type routePath struct {
	segs    []string
	methods []string // upper case, sorted
}

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch"}

// newRoutes reads the paths and methods of an OpenAPI document and adds
// fixed, the paths http.ServeMux serves with GET (and so HEAD).
func newRoutes(doc []byte, fixed ...string) (*routes, error) {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("api: routes: %w", err)
	}
	r := &routes{}
	add := func(p string, methods []string) {
		segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i := range r.paths {
			if slices.Equal(r.paths[i].segs, segs) {
				methods = append(methods, r.paths[i].methods...)
				slices.Sort(methods)
				r.paths[i].methods = slices.Compact(methods)
				return
			}
		}
		slices.Sort(methods)
		r.paths = append(r.paths, routePath{segs: segs, methods: slices.Compact(methods)})
	}
	for p, item := range d.Paths {
		var methods []string
		for _, m := range httpMethods {
			if _, ok := item[m]; ok {
				methods = append(methods, strings.ToUpper(m))
			}
		}
		add(p, methods)
	}
	for _, p := range fixed {
		add(p, []string{http.MethodGet, http.MethodHead})
	}
	// Literal paths first: /v1/rollouts/dry-run is not /v1/rollouts/{id}.
	slices.SortStableFunc(r.paths, func(a, b routePath) int {
		return strings.Count(a.key(), "{") - strings.Count(b.key(), "{")
	})
	return r, nil
}

func (p routePath) key() string { return "/" + strings.Join(p.segs, "/") }

func (p routePath) match(segs []string) bool {
	if len(segs) != len(p.segs) {
		return false
	}
	for i, s := range p.segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			continue // any segment, even empty, as grpc-gateway matches
		}
		if s != segs[i] {
			return false
		}
	}
	return true
}

// allow returns the methods the first template matching path takes, nil
// when no template matches.
func (r *routes) allow(path string) []string {
	if !strings.HasPrefix(path, "/") {
		return nil
	}
	segs := strings.Split(path[1:], "/")
	for _, p := range r.paths {
		if p.match(segs) {
			return p.methods
		}
	}
	return nil
}
