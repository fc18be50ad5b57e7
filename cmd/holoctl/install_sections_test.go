package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
)

var updateGolden = flag.Bool("update-install", false, "rewrite testdata/install-*.golden")

const sectionsYAML = `version: 1
profiles:
  p:
    settings: {screen: {backlight: 55}}
assignments:
  - {profile: p, board: BOARD}
dmx:
  patch:
    fixtures:
      - {name: door, universe: 1, address: 1, profile: holo, group: 1}
      - {universe: 2, address: 1, profile: rgb, label: zone=bar}
    universes:
      - {universe: 2, loss: release}
cuelists:
  - name: demo
    cues:
      - number: 1
        name: Group 1 red
        actions:
          - {kind: leds, selector: {groups: [1]}, body: {mode: solid, colour: red}}
      - number: 2
        actions:
          - {kind: leds, selector: {all: true}, body: {mode: "off"}}
`

// TestHoloctlInstallSections: holoctl install diff shows the DMX patch
// and cue lists beside the boards (golden), apply sets them, status
// shows them in sync then drifted, export writes them, and applying the
// export restores them after a wipe.
func TestHoloctlInstallSections(t *testing.T) {
	var patchEng *dmx.Engine
	var cues *cue.Engine
	g := startInstallGW(t, 1, func(g *installGW, o *installation.Options) {
		var err error
		if patchEng, err = dmx.New(dmx.Options{Fleet: g.fl, Patch: &dmx.Patch{}}); err != nil {
			t.Fatal(err)
		}
		if cues, err = cue.New(cue.Options{DB: g.db, Fleet: g.fl}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cues.Close)
		if _, err := cues.Put(cue.List{Name: "rehearsal", Cues: []cue.Cue{{Number: "1", Actions: []cue.Action{{Kind: "scene_end", Selector: fleet.Selector{All: true}}}}}}); err != nil {
			t.Fatal(err)
		}
		o.DMX, o.Cues, o.CheckEvery = patchEng, cues, -1
	})
	fm, admin, viewer := g.fm, g.admin, g.viewer
	id := fm.Boards()[0].ID

	work := t.TempDir()
	file := filepath.Join(work, "installation.yaml")
	os.WriteFile(file, []byte(strings.ReplaceAll(sectionsYAML, "BOARD", id)), 0o644)
	holoctl := g.holoctl(t)

	// The plan, as a viewer sees it.
	golden(t, "testdata/install-plan-sections.golden", strings.ReplaceAll(holoctl(0, viewer, "install", "diff", "-f", file), id, "BOARD0000000"))
	if len(patchEng.Patch().Fixtures) != 0 || len(cues.Lists()) != 1 {
		t.Fatal("a plan changed the gateway")
	}

	holoctl(0, admin, "install", "apply", "-f", file, "-m", "sections")
	if got := len(patchEng.Patch().Fixtures); got != 2 {
		t.Fatalf("%d fixtures after apply, want 2", got)
	}
	if ls := cues.Lists(); len(ls) != 1 || ls[0].Name != "demo" || len(ls[0].Cues) != 2 {
		t.Fatalf("lists after apply: %+v", ls)
	}
	out := holoctl(0, viewer, "install", "status")
	for _, want := range []string{"dmx       in_sync", "cuelists  in_sync"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status lacks %q:\n%s", want, out)
		}
	}

	// Someone edits a cue over the cue API: status shows the drift.
	l, _ := cues.Get("demo")
	l.Cues[1].Notes = "edited by hand"
	if _, err := cues.Put(l); err != nil {
		t.Fatal(err)
	}
	out = holoctl(0, viewer, "install", "status")
	if !strings.Contains(out, "cuelists  drifted") || !strings.Contains(out, "~ cue list demo (cue 2 changed)") {
		t.Fatalf("status after an edit:\n%s", out)
	}

	// Export (the current revision), wipe the sections, restore.
	exp := filepath.Join(t.TempDir(), "installation.yaml")
	holoctl(0, viewer, "install", "export", "-f", exp)
	text, _ := os.ReadFile(exp)
	for _, want := range []string{"dmx:", "cuelists:", "name: demo", "colour: red", "loss: release"} {
		if !strings.Contains(string(text), want) {
			t.Fatalf("export lacks %q:\n%s", want, text)
		}
	}
	if err := patchEng.SetPatch(&dmx.Patch{}); err != nil {
		t.Fatal(err)
	}
	if err := cues.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	out = holoctl(0, viewer, "install", "diff", "-f", exp)
	if !strings.Contains(out, "+ cue list demo (2 cues)") || !strings.Contains(out, "+ fixture universe 1 address 1") {
		t.Fatalf("diff of the export after a wipe:\n%s", out)
	}
	holoctl(0, admin, "install", "apply", "-f", exp, "-m", "restore")
	if got := len(patchEng.Patch().Fixtures); got != 2 {
		t.Fatalf("%d fixtures after the restore, want 2", got)
	}
	ls := cues.Lists()
	if len(ls) != 1 || ls[0].Cues[1].Notes != "" || ls[0].Cues[0].Name != "Group 1 red" {
		t.Fatalf("lists after the restore: %+v", ls)
	}
	out = holoctl(0, viewer, "install", "status")
	if !strings.Contains(out, "dmx       in_sync") || !strings.Contains(out, "cuelists  in_sync") {
		t.Fatalf("status after the restore:\n%s", out)
	}
}

// golden compares got with the file, or rewrites it with -update-install.
func golden(t *testing.T, file, got string) {
	t.Helper()
	if *updateGolden {
		os.MkdirAll(filepath.Dir(file), 0o755)
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update-install to write it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Fatalf("%s (-want +got):\n%s", file, d)
	}
}
