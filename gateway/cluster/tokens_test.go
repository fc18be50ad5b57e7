package cluster_test

import (
	"fmt"
	"testing"
	"time"
)

// TestTokens: a token made on one gateway works on every gateway, each
// gateway's first admin token too, a name is taken once in the cluster,
// and a token revoked on one gateway stops working on all, also on a
// gateway restarted since.
func TestTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	t.Parallel()
	gw1 := startGatewayAuth(t, "gw1", "embedded", nil, true)
	gw2 := startGatewayAuth(t, "gw2", gw1.join, nil, true)
	if gw1.admin == "" || gw2.admin == "" {
		t.Fatalf("first admin tokens: %q %q", gw1.admin, gw2.admin)
	}
	whoami := func(g *gwProc, secret string) (int, string) {
		g.token = secret
		defer func() { g.token = "" }()
		var id struct{ Name, Role string }
		code, b := g.rest(t, "GET", "/v1/whoami", nil)
		if code == 200 {
			if err := jsonUnmarshal(b, &id); err != nil {
				t.Fatal(err)
			}
		}
		return code, id.Name + "/" + id.Role
	}
	expect := func(g *gwProc, secret string, code int, who string) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%s whoami", g.name), func() error {
			c, w := whoami(g, secret)
			if c != code || (code == 200 && w != who) {
				return fmt.Errorf("%d %s, want %d %s", c, w, code, who)
			}
			return nil
		})
	}
	expect(gw2, gw1.admin, 200, "admin-gw1/admin")
	expect(gw1, gw2.admin, 200, "admin-gw2/admin")

	gw2.token = gw1.admin
	var made struct {
		Secret string `json:"secret"`
	}
	gw2.restJSON(t, "POST", "/v1/tokens", map[string]string{"name": "ops", "role": "operator"}, &made)
	expect(gw1, made.Secret, 200, "ops/operator")
	gw1.token = gw2.admin
	if code, b := gw1.rest(t, "POST", "/v1/tokens", map[string]string{"name": "ops", "role": "viewer"}); code != 409 {
		t.Errorf("ops made twice: %d %s", code, b)
	}
	if code, b := gw1.rest(t, "DELETE", "/v1/tokens/ops", nil); code != 200 {
		t.Fatalf("revoke on gw1: %d %s", code, b)
	}
	gw1.token, gw2.token = "", ""
	expect(gw2, made.Secret, 401, "")
	gw2.kill()
	gw2.start(t)
	expect(gw2, made.Secret, 401, "")
	expect(gw2, gw1.admin, 200, "admin-gw1/admin")
}
