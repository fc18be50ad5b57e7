package api

import (
	"encoding/json"
	"testing"
)

// TestWhoAmI: each token learns its own name and role (a console offers
// only what the role may do); no token, no answer.
func TestWhoAmI(t *testing.T) {
	g := startGateway(t)
	for _, role := range []string{"viewer", "operator", "admin"} {
		code, body := g.rest(t, role, "GET", "/v1/whoami", "")
		var id struct{ Name, Role string }
		if err := json.Unmarshal([]byte(body), &id); err != nil || code != 200 || id.Role != role || id.Name == "" {
			t.Errorf("%s: %d %s", role, code, body)
		}
	}
	if code, body := g.rest(t, "", "GET", "/v1/whoami", ""); code != 401 {
		t.Errorf("no token: %d %s", code, body)
	}
}
