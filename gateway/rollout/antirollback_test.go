package rollout_test

import (
	"context"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// TestDryRunNamesDowngrades (issue 25 row 11): a board that burned secure
// version 2 would refuse an image of secure version 1 (422
// downgrade_refused); the dry run names it under refused with the reason,
// and selects the boards that would take the image.
func TestDryRunNamesDowngrades(t *testing.T) {
	bs := startBoardsOTA(t, 2, nil)
	fl, err := flash.Open(bs.fm.Boards()[0].Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := efuse.Open(fl.Dir()).BurnSecureVersion(2); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, t.TempDir(), bs.urls, nil)
	g.waitOnline(t, 2)
	old, err := image.WithSecureVersion(sigtest.Image(t, "1.0.0", 800), 1)
	if err != nil {
		t.Fatal(err)
	}
	a := g.add(t, old)
	if a.App.SecureVersion != 1 {
		t.Fatalf("artifact secure version %d", a.App.SecureVersion)
	}
	sel, err := g.eng.DryRun(context.Background(), rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	if sel.Boards() != 1 || sel.Waves[0][0] != bs.ids[1] || len(sel.Refused) != 1 || sel.Refused[0].Board != bs.ids[0] ||
		!strings.Contains(sel.Refused[0].Reason, "downgrade_refused") || !strings.Contains(sel.Refused[0].Reason, "secure version is 1, the board's 2") {
		t.Fatalf("selection %+v", sel)
	}
	cur, err := image.WithSecureVersion(sigtest.Image(t, "2.0.0", 800), 2)
	if err != nil {
		t.Fatal(err)
	}
	sel, err = g.eng.DryRun(context.Background(), rollout.Plan{Artifact: g.add(t, cur).SHA256, Target: rollout.Target{All: true}})
	if err != nil || sel.Boards() != 2 || len(sel.Refused) != 0 {
		t.Fatalf("secure version 2: %+v %v", sel, err)
	}
}
