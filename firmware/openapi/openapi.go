// Package openapi builds the board's GET /api/v1/openapi.json from the
// routes the firmware serves, so the description always matches the
// firmware that serves it: a route that exists is described, and one that
// does not is not.
//
// Schemas come from the Go types the handlers encode and decode (the
// Request and Response of each api.Route) by reflection over their JSON
// tags: a field without omitempty is required, a pointer or
// json.RawMessage may be null, named struct types become shared
// components. The tests validate real replies against the result.
package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
)

// Version is the OpenAPI version of the document.
const Version = "3.0.3"

// Doc is an OpenAPI document as plain JSON values.
type Doc = map[string]any

// Build describes routes. title and version fill the info object; the
// version is the API's, not the firmware's.
func Build(routes []api.Route, firmwareVersion string) Doc {
	g := &gen{schemas: map[string]any{}, names: map[reflect.Type]string{}}
	g.schemas["Error"] = map[string]any{
		"type":     "object",
		"required": []string{"error", "message"},
		"properties": map[string]any{
			"error":   map[string]any{"type": "string", "description": "stable error code"},
			"message": map[string]any{"type": "string"},
		},
	}
	paths := map[string]any{}
	for _, r := range routes {
		item, _ := paths[r.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.Path] = item
		}
		item[strings.ToLower(r.Method)] = g.operation(r)
	}
	return Doc{
		"openapi": Version,
		"info": map[string]any{
			"title":       "holo-board API",
			"version":     "1",
			"description": "HTTP API of a holofleet board (firmware " + firmwareVersion + "). Every path is under /api/v1.",
		},
		"servers": []any{map[string]any{"url": "/api/v1"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         g.schemas,
			"securitySchemes": securitySchemes,
		},
	}
}

// The board's password, once one is set, is presented either way
// (Authorization: Bearer <password>, or HTTP Basic with any user name).
var securitySchemes = map[string]any{
	"password": map[string]any{"type": "http", "scheme": "bearer",
		"description": "The board's password (PATCH /web), once one is set."},
	"passwordBasic": map[string]any{"type": "http", "scheme": "basic",
		"description": "The board's password as HTTP Basic's password, with any user name."},
}

// security is an operation's security requirement: a change, a file
// download and the web settings need the password once one is set (an
// empty requirement, {}, stands for a board with none); other reads need
// nothing.
func security(r api.Route) []any {
	if r.Method == http.MethodGet && !r.Private {
		return []any{}
	}
	return []any{
		map[string]any{"password": []string{}},
		map[string]any{"passwordBasic": []string{}},
		map[string]any{},
	}
}

// anyValueSchema is the component any JSON value or null refers to
// (json.RawMessage and interface fields). OpenAPI 3.0 has no type for
// "anything" that admits null (nullable needs a type beside it), so it is
// one of the JSON types, the object one nullable.
var anyValueSchema = map[string]any{
	"description": "Any JSON value, or null.",
	"anyOf": []any{
		map[string]any{"type": "object", "nullable": true},
		map[string]any{"type": "array", "items": map[string]any{}},
		map[string]any{"type": "string"},
		map[string]any{"type": "number"},
		map[string]any{"type": "boolean"},
	},
}

const anyValueRef = "#/components/schemas/AnyValue"

type gen struct {
	schemas map[string]any
	names   map[reflect.Type]string
}

func (g *gen) operation(r api.Route) map[string]any {
	op := map[string]any{
		"operationId": operationID(r.Method, r.Path),
		"summary":     r.Summary,
	}
	var tags []string
	if seg := strings.Split(strings.Trim(r.Path, "/"), "/"); len(seg) > 0 {
		tags = append(tags, seg[0])
	}
	op["tags"] = tags
	op["security"] = security(r)
	if r.Link {
		op["x-link"] = true
	}
	var params []any
	for _, p := range r.Query {
		typ := p.Type
		if typ == "" {
			typ = "string"
		}
		params = append(params, map[string]any{
			"name": p.Name, "in": "query", "required": p.Required,
			"description": p.Description, "schema": map[string]any{"type": typ},
		})
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	switch {
	case r.Raw:
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
	case r.Request != nil:
		op["requestBody"] = map[string]any{"content": map[string]any{
			"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(r.Request))}}}
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	responses := map[string]any{}
	for _, st := range append([]int{status}, r.AlsoStatus...) {
		ok := map[string]any{"description": http.StatusText(st)}
		if r.Response != nil {
			switch v := r.Response.(type) {
			case RawContent:
				content := map[string]any{}
				for _, mt := range strings.Split(string(v), ",") {
					content[strings.TrimSpace(mt)] = map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
				}
				ok["content"] = content
			default:
				ok["content"] = map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(r.Response))}}
			}
		}
		responses[fmt.Sprint(st)] = ok
	}
	if r.Accepted != nil {
		if _, taken := responses["202"]; !taken {
			responses["202"] = map[string]any{"description": "Accepted: scheduled (fire_at, at_ms)",
				"content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(r.Accepted))}}}
		}
	}
	for _, code := range errorStatuses(r) {
		responses[fmt.Sprint(code)] = map[string]any{
			"description": http.StatusText(code),
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
		}
	}
	op["responses"] = responses
	return op
}

// RawContent as a Route.Response names the non-JSON media types of the
// reply, comma separated; "*/*" stands for any (a file download).
type RawContent string

func errorStatuses(r api.Route) []int {
	// Any request that presents a password may meet the limit on
	// guessing it (429 too_many_attempts), and any request may find the
	// board restarting (503 restarting, once it has waited 10 s for the
	// new boot, or when the firmware process it reached is going away:
	// docs/spec-decisions.md).
	set := map[int]bool{http.StatusTooManyRequests: true, http.StatusServiceUnavailable: true}
	changing := r.Method != http.MethodGet
	if changing {
		set[http.StatusForbidden] = true
		set[http.StatusUnauthorized] = true
	}
	if r.Private {
		set[http.StatusUnauthorized] = true
	}
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if !r.Raw {
			set[http.StatusUnsupportedMediaType] = true
		}
	}
	if r.Request != nil || len(r.Query) > 0 {
		set[http.StatusBadRequest] = true
		set[http.StatusRequestEntityTooLarge] = true
	}
	for _, e := range r.Errors {
		set[e.Status] = true
	}
	var out []int
	for s := range set {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		for _, part := range strings.FieldsFunc(seg, func(r rune) bool { return r == '.' || r == '_' || r == '-' }) {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	timeType   = reflect.TypeFor[time.Time]()
)

// Schemaer lets a type describe its own JSON schema (for types with a
// custom MarshalJSON).
type Schemaer interface {
	OpenAPISchema() map[string]any
}

var schemaer = reflect.TypeFor[Schemaer]()

func (g *gen) schema(t reflect.Type) map[string]any {
	if t.Implements(schemaer) {
		return reflect.Zero(t).Interface().(Schemaer).OpenAPISchema()
	}
	switch {
	case t == rawMessage:
		return g.anyValue()
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := g.schema(t.Elem())
		if ref, ok := s["$ref"]; ok {
			if ref == anyValueRef { // null is one of its values already
				return s
			}
			// Named structs are objects; nullable needs its type beside it.
			return map[string]any{"type": "object", "allOf": []any{map[string]any{"$ref": ref}}, "nullable": true}
		}
		out := map[string]any{}
		for k, v := range s {
			out[k] = v
		}
		out["nullable"] = true
		return out
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return g.anyValue()
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name := g.nameOf(t)
		if _, done := g.schemas[name]; !done {
			g.schemas[name] = map[string]any{} // placeholder against recursion
			g.schemas[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// anyValue returns a reference to the AnyValue component, adding it on
// first use.
func (g *gen) anyValue() map[string]any {
	g.schemas["AnyValue"] = anyValueSchema
	return map[string]any{"$ref": anyValueRef}
}

func (g *gen) nameOf(t reflect.Type) string {
	if n, ok := g.names[t]; ok {
		return n
	}
	pkg := t.PkgPath()
	if i := strings.LastIndex(pkg, "/"); i >= 0 {
		pkg = pkg[i+1:]
	}
	name := t.Name()
	if !strings.EqualFold(pkg, name) && !strings.HasPrefix(strings.ToLower(name), strings.ToLower(pkg)) {
		name = strings.ToUpper(pkg[:1]) + pkg[1:] + name
	}
	for taken := true; taken; {
		taken = false
		for other, n := range g.names {
			if n == name && other != t {
				name += "_"
				taken = true
			}
		}
	}
	g.names[t] = name
	return name
}

func (g *gen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	g.fields(t, props, &required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		out["required"] = required
	}
	return out
}

func (g *gen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.fields(ft, props, required)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		if d := f.Tag.Get("doc"); d != "" {
			s = withDescription(s, d)
		}
		props[name] = s
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}

func withDescription(s map[string]any, d string) map[string]any {
	if _, ok := s["$ref"]; ok {
		return map[string]any{"allOf": []any{s}, "description": d}
	}
	out := map[string]any{}
	for k, v := range s {
		out[k] = v
	}
	out["description"] = d
	return out
}

// Lister returns the routes to describe (the HTTP server's Routes).
type Lister interface{ Routes() []api.Route }

// Route returns GET /openapi.json over the routes of l, built on each
// request so features added later are described.
func Route(l Lister, firmwareVersion func() string) api.Route {
	return api.Route{
		Method: http.MethodGet, Path: "/openapi.json", Summary: "This description of the API",
		Response: map[string]any{},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			api.WriteJSON(w, http.StatusOK, Build(l.Routes(), firmwareVersion()))
		}),
	}
}
