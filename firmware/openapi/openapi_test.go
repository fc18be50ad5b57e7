package openapi

import (
	"net/http"
	"testing"

	"github.com/holofleet/holofleet/firmware/api"
)

// TestEveryOperationMayMeetARestart: a request may reach a board while it
// restarts and be answered 503 restarting, whatever the route; the
// description says so of every operation (as it says 429 of every one).
// A test of the real board met the undescribed 503 during a restart.
func TestEveryOperationMayMeetARestart(t *testing.T) {
	routes := []api.Route{
		{Method: http.MethodGet, Path: "/info"},
		{Method: http.MethodPatch, Path: "/settings", Request: &struct {
			A int `json:"a"`
		}{}},
		{Method: http.MethodPut, Path: "/fs/file", Raw: true},
	}
	doc := Build(routes, "1.0.0")
	for _, r := range routes {
		op := doc["paths"].(map[string]any)[r.Path].(map[string]any)[map[string]string{
			http.MethodGet: "get", http.MethodPatch: "patch", http.MethodPut: "put"}[r.Method]].(map[string]any)
		resp := op["responses"].(map[string]any)
		for _, code := range []string{"429", "503"} {
			if _, ok := resp[code]; !ok {
				t.Errorf("%s %s does not describe %s: %v", r.Method, r.Path, code, resp)
			}
		}
	}
}
