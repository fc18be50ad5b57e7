package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestInstallationDMXSection: the installation's dmx section sets the
// patch as PUT /v1/dmx/patch does, the patch file first, and says there
// is no patch when no DMX input runs.
func TestInstallationDMXSection(t *testing.T) {
	e := &env{}
	s := dmxSection{e}
	if s.Patch() != nil {
		t.Fatal("a patch without a DMX engine")
	}
	if err := s.SetPatch(&dmx.Patch{}); err == nil {
		t.Fatal("a patch set without a DMX engine")
	}
	eng, err := dmx.New(dmx.Options{Fleet: fleet.New(fleet.Options{}), Patch: &dmx.Patch{}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), DMXPatchFile)
	e.dmx, e.dmxSave = eng, func(p *dmx.Patch) error { return savePatch(file, p) }
	p := &dmx.Patch{Fixtures: []dmx.Fixture{{Universe: 1, Address: 1, Profile: dmx.ProfileHolo, Group: 1}}}
	if err := s.SetPatch(p); err != nil {
		t.Fatal(err)
	}
	if eng.Patch() != p {
		t.Fatal("the engine does not use the patch set")
	}
	back, err := dmx.ReadPatchFile(file)
	if err != nil || len(back.Fixtures) != 1 {
		t.Fatalf("patch file: %+v %v", back, err)
	}
	bad := &dmx.Patch{Fixtures: []dmx.Fixture{{Universe: 1, Address: 510, Profile: dmx.ProfileHolo, Group: 1}}}
	if err := s.SetPatch(bad); !errors.Is(err, dmx.ErrBadPatch) {
		t.Fatalf("bad patch: %v", err)
	}
	if eng.Patch() != p {
		t.Fatal("a bad patch replaced the patch")
	}
	if b, _ := os.ReadFile(file); len(b) == 0 {
		t.Fatal("patch file emptied")
	} else if back, err := dmx.ReadPatchFile(file); err != nil || len(back.Fixtures) != 1 || back.Fixtures[0].Address != 1 {
		t.Fatalf("a bad patch reached the file: %+v %v", back, err)
	}
}
