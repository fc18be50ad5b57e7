package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
)

type noFleet struct{}

func (noFleet) Boards(fleet.Filter) []fleet.BoardView { return nil }
func (noFleet) Do(context.Context, fleet.Selector, fleet.Action) ([]fleet.Result, error) {
	return nil, nil
}

// TestDMXPatch: holoctl dmx patch shows the patch; patch set replaces it,
// or prints the gateway's reasons and changes nothing.
func TestDMXPatch(t *testing.T) {
	e, err := dmx.New(dmx.Options{Fleet: noFleet{}, Patch: dmx.DemoPatch(1, 2, "demo")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&dmx.Handler{Engine: e, Guard: &auth.Guard{Insecure: true}})
	defer srv.Close()
	holoctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"dmx", "--gateway", srv.URL}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := holoctl("patch")
	for _, want := range []string{"UNIVERSE  ADDRESS  PROFILE  TARGET", "1         1-11     holo     group 1", "2         12-22    holo     line demo address 2", "sources: none heard"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, no %q in\n%s", code, want, out)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"fixtures":[{"universe":1,"address":1,"profile":"rgb","group":1},{"universe":1,"address":3,"profile":"rgb","group":2}]}`), 0o600)
	code, _, errOut := holoctl("patch", "set", bad)
	if code != 1 || !strings.Contains(errOut, "overlap fixture 1 (1-5)") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"fixtures":[{"universe":5,"address":100,"profile":"rgb","board":"b1"}]}`), 0o600)
	code, out, errOut = holoctl("patch", "set", good)
	if code != 0 || !strings.Contains(out, "5         100-104  rgb      board b1") {
		t.Errorf("exit %d: %s %s", code, out, errOut)
	}
	if code, _, _ := holoctl("patch", "get"); code != 2 {
		t.Errorf("bad usage: exit %d", code)
	}
}
