package installation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/nettest"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// sectionRig is a rig with the gateway's real DMX and cue engines (the
// cue lists in the rig's bbolt file) behind the installer.
type sectionRig struct {
	*rig
	dmx   *dmx.Engine
	cues  *cue.Engine
	audit *auditLog
}

type auditLog struct {
	mu sync.Mutex
	rs []auth.Record
}

func (a *auditLog) Audit(r auth.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rs = append(a.rs, r)
}

func (a *auditLog) sections() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, r := range a.rs {
		if r.Operation == "installation.apply_section" {
			out = append(out, fmt.Sprintf("%s %s %s: %s", r.Who.Name, r.Resource, r.Name, r.Reason))
		}
	}
	return out
}

// failingCues is the real cue engine, refusing to save one list (a
// store that fails mid-apply).
type failingCues struct {
	*cue.Engine
	fail string
}

func (f failingCues) Put(l cue.List) (cue.List, error) {
	if l.Name == f.fail {
		return cue.List{}, errors.New("disk full")
	}
	return f.Engine.Put(l)
}

func startSectionRig(t *testing.T, cuesFor func(*cue.Engine) installation.CueEngine, withDMX bool, tune ...func(*installation.Options)) *sectionRig {
	t.Helper()
	sr := &sectionRig{audit: &auditLog{}}
	sr.rig = startRig(t, 1, nil, func(o *installation.Options) {
		for _, f := range tune {
			f(o)
		}
		o.Audit = sr.audit
		var err error
		if withDMX {
			if sr.dmx, err = dmx.New(dmx.Options{Fleet: o.Fleet.(dmx.Fleet), Patch: &dmx.Patch{}}); err != nil {
				t.Fatal(err)
			}
			o.DMX = sr.dmx
		}
		if sr.cues, err = cue.New(cue.Options{DB: o.DB, Fleet: o.Fleet.(cue.Fleet)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sr.cues.Close)
		o.Cues = sr.cues
		if cuesFor != nil {
			o.Cues = cuesFor(sr.cues)
		}
	})
	return sr
}

const sectionsDesc = `version: 1
profiles:
  p:
    settings: {screen: {backlight: 60}}
assignments:
  - {profile: p, board: %q}
dmx:
  patch:
    fixtures:
      - {name: door, universe: 1, address: 1, profile: holo, group: 1}
      - {universe: 2, address: 1, profile: rgb, board: %q}
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
        follow: after
        follow_ms: 2000
`

func fleetAll() fleet.Selector { return fleet.Selector{All: true} }

func listNames(ls []cue.List) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func sectionState(t *testing.T, sps []installation.SectionPlan) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, sp := range sps {
		out[sp.Section] = sp.State
	}
	return out
}

// TestSectionsApplyStatusExportRestore: the DMX patch and the cue lists
// of a description are planned beside the boards, applied through the
// engines' own APIs (a list the description does not name is removed),
// shown in sync or drifted by status, exported, and restored from the
// export after being wiped. A description without the sections leaves
// them alone.
func TestSectionsApplyStatusExportRestore(t *testing.T) {
	r := startSectionRig(t, nil, true)
	ctx := context.Background()
	id := r.boards[0].ID
	if _, err := r.cues.Put(cue.List{Name: "old", Cues: []cue.Cue{{Number: "1", Actions: []cue.Action{{Kind: "scene_end", Selector: fleetAll()}}}}}); err != nil {
		t.Fatal(err)
	}
	d := r.parse(t, fmt.Sprintf(sectionsDesc, id, id))

	plan := r.in.PlanSections(d)
	want := []installation.SectionPlan{
		{Section: "dmx", State: installation.StateDrifted, Summary: "3 patch entries to add", Changes: []installation.SectionChange{
			{Op: "add", Item: "fixture universe 1 address 1", Why: `"door" holo -> group 1`},
			{Op: "add", Item: "fixture universe 2 address 1", Why: "rgb -> board " + id},
			{Op: "add", Item: "universe 2", Why: "loss release"}}},
		{Section: "cuelists", State: installation.StateDrifted, Summary: "1 cue list to add, 1 cue list to remove", Changes: []installation.SectionChange{
			{Op: "add", Item: "cue list demo", Why: "2 cues"},
			{Op: "remove", Item: "cue list old", Why: "1 cue, not in the description"}}},
	}
	if diff := cmp.Diff(want, plan); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}

	rev, st := r.apply(t, d, "first")
	if st.State != installation.RunDone {
		t.Fatalf("run %+v", st)
	}
	if diff := cmp.Diff(d.DMX.Patch, r.dmx.Patch()); diff != "" {
		t.Fatalf("live patch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff((*d.CueLists), r.cues.Lists()); diff != "" {
		t.Fatalf("live lists (-want +got):\n%s", diff)
	}
	wantAudit := []string{
		fmt.Sprintf("test dmx revision %d: dmx patch: 3 patch entries to add", rev.N),
		fmt.Sprintf("test cues revision %d: cue lists: 1 cue list to add, 1 cue list to remove", rev.N),
	}
	if diff := cmp.Diff(wantAudit, r.audit.sections()); diff != "" {
		t.Fatalf("audit (-want +got):\n%s", diff)
	}
	status, err := r.in.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sectionState(t, status.Sections); got["dmx"] != installation.StateInSync || got["cuelists"] != installation.StateInSync {
		t.Fatalf("status after apply: %+v", status.Sections)
	}

	// Drift: someone changes the patch and a list over their own APIs.
	p := *r.dmx.Patch()
	p.Universes = nil
	if err := r.dmx.SetPatch(&p); err != nil {
		t.Fatal(err)
	}
	l, _ := r.cues.Get("demo")
	l.Cues[0].Name = "renamed"
	if _, err := r.cues.Put(l); err != nil {
		t.Fatal(err)
	}
	status, err = r.in.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantDrift := []installation.SectionPlan{
		{Section: "dmx", State: installation.StateDrifted, Summary: "1 patch entry to add",
			Changes: []installation.SectionChange{{Op: "add", Item: "universe 2", Why: "loss release"}}},
		{Section: "cuelists", State: installation.StateDrifted, Summary: "1 cue list to change",
			Changes: []installation.SectionChange{{Op: "change", Item: "cue list demo", Why: "cue 1 changed"}}},
	}
	if diff := cmp.Diff(wantDrift, status.Sections); diff != "" {
		t.Fatalf("status after drift (-want +got):\n%s", diff)
	}

	// Export -> wipe -> restore.
	r.apply(t, d, "back in sync")
	ex, _, err := r.in.Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ex.DMX == nil || ex.CueLists == nil {
		t.Fatalf("export without sections: %s", ex.JSON())
	}
	if err := r.dmx.SetPatch(&dmx.Patch{}); err != nil {
		t.Fatal(err)
	}
	if err := r.cues.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	back, err := installation.FromJSON("export", ex.JSON())
	if err != nil {
		t.Fatal(err)
	}
	r.apply(t, back, "restore")
	if diff := cmp.Diff(d.DMX.Patch.Fixtures, r.dmx.Patch().Fixtures); diff != "" {
		t.Fatalf("restored fixtures (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(d.DMX.Patch.Universes, r.dmx.Patch().Universes); diff != "" {
		t.Fatalf("restored universes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(*d.CueLists, r.cues.Lists()); diff != "" {
		t.Fatalf("restored lists (-want +got):\n%s", diff)
	}

	// Without the sections, the patch and the lists are left alone.
	if _, err := r.cues.Put(cue.List{Name: "extra"}); err != nil {
		t.Fatal(err)
	}
	bare := r.parse(t, fmt.Sprintf("version: 1\nprofiles: {p: {settings: {screen: {backlight: 60}}}}\nassignments: [{profile: p, board: %q}]\n", id))
	if sp := r.in.PlanSections(bare); len(sp) != 0 {
		t.Fatalf("sections planned for a description without them: %+v", sp)
	}
	before := r.dmx.Patch()
	r.apply(t, bare, "boards only")
	if r.dmx.Patch() != before {
		t.Fatal("the patch was set by a description without a dmx section")
	}
	if got := listNames(r.cues.Lists()); !cmp.Equal(got, []string{"demo", "extra"}) {
		t.Fatalf("lists %v after a description without cuelists", got)
	}
	status, err = r.in.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Sections) != 0 {
		t.Fatalf("status shows sections the revision does not hold: %+v", status.Sections)
	}

	// cuelists: [] removes every list.
	none := r.parse(t, fmt.Sprintf("version: 1\nprofiles: {p: {}}\nassignments: [{profile: p, board: %q}]\ncuelists: []\n", id))
	r.apply(t, none, "no lists")
	if got := r.cues.Lists(); len(got) != 0 {
		t.Fatalf("lists %v after cuelists: []", listNames(got))
	}
}

// TestSectionsRefusedWhole: a description with a section this gateway
// cannot hold, or one whose setting fails midway, stores no revision and
// leaves the patch and the lists as they were.
func TestSectionsRefusedWhole(t *testing.T) {
	t.Run("no dmx engine", func(t *testing.T) {
		r := startSectionRig(t, nil, false)
		id := r.boards[0].ID
		d := r.parse(t, fmt.Sprintf(sectionsDesc, id, id))
		plan := r.in.PlanSections(d)
		if got := sectionState(t, plan); got["dmx"] != installation.StateFailed || got["cuelists"] != installation.StateDrifted {
			t.Fatalf("plan %+v", plan)
		}
		_, _, err := r.in.Apply(context.Background(), d, "test", "")
		if !errors.Is(err, installation.ErrSection) {
			t.Fatalf("apply: %v, want ErrSection", err)
		}
		if hs, _ := r.in.History(); len(hs) != 0 {
			t.Fatalf("a revision was stored: %+v", hs)
		}
		if got := r.cues.Lists(); len(got) != 0 {
			t.Fatalf("lists %v set by a refused description", listNames(got))
		}
	})
	t.Run("saving a list fails", func(t *testing.T) {
		r := startSectionRig(t, func(e *cue.Engine) installation.CueEngine { return failingCues{e, "zz"} }, true)
		id := r.boards[0].ID
		keep := cue.List{Name: "keep", Cues: []cue.Cue{{Number: "1", Actions: []cue.Action{{Kind: "scene_end", Selector: fleetAll()}}}}}
		if _, err := r.cues.Put(keep); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf(sectionsDesc, id, id) + "  - {name: zz, cues: []}\n"
		d := r.parse(t, text)
		_, _, err := r.in.Apply(context.Background(), d, "test", "")
		if !errors.Is(err, installation.ErrSection) {
			t.Fatalf("apply: %v, want ErrSection", err)
		}
		if hs, _ := r.in.History(); len(hs) != 0 {
			t.Fatalf("a revision was stored: %+v", hs)
		}
		if p := r.dmx.Patch(); len(p.Fixtures) != 0 {
			t.Fatalf("patch not put back: %+v", p)
		}
		if got := listNames(r.cues.Lists()); !cmp.Equal(got, []string{"keep"}) {
			t.Fatalf("lists %v, want the old ones put back", got)
		}
		if a := r.audit.sections(); len(a) != 0 {
			t.Fatalf("audited a change that was put back: %v", a)
		}
	})
}

// TestSectionsOverGRPC: PlanInstallation and GetInstallationStatus carry
// the gateway sections as REST does: the plan lists what an apply would
// change in the patch and the lists; after an apply over gRPC the status
// shows them in sync, and drifted (with what differs) once the patch is
// changed behind the installation's back. grpcurl, working from
// reflection alone, reads the same.
func TestSectionsOverGRPC(t *testing.T) {
	r := startSectionRig(t, nil, true)
	g := serveGRPC(t, r.rig, r.audit)
	viewer, admin := g.as(g.tokens["viewer"]), g.as(g.tokens["admin"])
	id := r.boards[0].ID
	if _, err := r.cues.Put(cue.List{Name: "old", Cues: []cue.Cue{{Number: "1", Actions: []cue.Action{{Kind: "scene_end", Selector: fleetAll()}}}}}); err != nil {
		t.Fatal(err)
	}
	text := string(r.parse(t, fmt.Sprintf(sectionsDesc, id, id)).JSON())

	plan, err := g.client.PlanInstallation(viewer, &fleetv1.PlanInstallationRequest{Description: text})
	if err != nil {
		t.Fatal(err)
	}
	want := []*fleetv1.InstallationSection{
		{Section: "dmx", State: installation.StateDrifted, Summary: "3 patch entries to add", Changes: []*fleetv1.InstallationSectionChange{
			{Op: "add", Item: "fixture universe 1 address 1", Why: `"door" holo -> group 1`},
			{Op: "add", Item: "fixture universe 2 address 1", Why: "rgb -> board " + id},
			{Op: "add", Item: "universe 2", Why: "loss release"}}},
		{Section: "cuelists", State: installation.StateDrifted, Summary: "1 cue list to add, 1 cue list to remove", Changes: []*fleetv1.InstallationSectionChange{
			{Op: "add", Item: "cue list demo", Why: "2 cues"},
			{Op: "remove", Item: "cue list old", Why: "1 cue, not in the description"}}},
	}
	if diff := cmp.Diff(want, plan.Sections, protocmp.Transform()); diff != "" {
		t.Fatalf("plan sections (-want +got):\n%s", diff)
	}
	if len(plan.Boards) != 1 || plan.Boards[0].Board != id {
		t.Fatalf("plan boards: %v", plan.Boards)
	}

	ap, err := g.client.ApplyInstallation(admin, &fleetv1.ApplyInstallationRequest{Description: text, Message: "sections over gRPC"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitRun(t, int(ap.Run.Id))
	st, err := g.client.GetInstallationStatus(viewer, &fleetv1.GetInstallationStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	inSync := []*fleetv1.InstallationSection{
		{Section: "dmx", State: installation.StateInSync, Summary: "in sync"},
		{Section: "cuelists", State: installation.StateInSync, Summary: "in sync"},
	}
	if diff := cmp.Diff(inSync, st.Sections, protocmp.Transform()); diff != "" {
		t.Fatalf("status sections after the apply (-want +got):\n%s", diff)
	}

	// The patch changed behind the installation's back: drifted, with how.
	p := *r.dmx.Patch()
	p.Universes = nil
	if err := r.dmx.SetPatch(&p); err != nil {
		t.Fatal(err)
	}
	st, err = g.client.GetInstallationStatus(viewer, &fleetv1.GetInstallationStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	drift := []*fleetv1.InstallationSection{
		{Section: "dmx", State: installation.StateDrifted, Summary: "1 patch entry to add",
			Changes: []*fleetv1.InstallationSectionChange{{Op: "add", Item: "universe 2", Why: "loss release"}}},
		{Section: "cuelists", State: installation.StateInSync, Summary: "in sync"},
	}
	if diff := cmp.Diff(drift, st.Sections, protocmp.Transform()); diff != "" {
		t.Fatalf("status sections after drift (-want +got):\n%s", diff)
	}

	// The real grpcurl reads the same through reflection.
	_, run := nettest.Grpcurl(t)
	bearer := "authorization: Bearer " + g.tokens["viewer"]
	out := run("-H", bearer, g.addr, "holo.fleet.v1.InstallationService/GetInstallationStatus")
	for _, w := range []string{`"section": "dmx"`, `"state": "drifted"`, `"item": "universe 2"`, `"why": "loss release"`, `"section": "cuelists"`} {
		if !strings.Contains(out, w) {
			t.Errorf("grpcurl status lacks %s:\n%s", w, out)
		}
	}
	req, _ := json.Marshal(map[string]string{"description": text})
	out = run("-H", bearer, "-d", string(req), g.addr, "holo.fleet.v1.InstallationService/PlanInstallation")
	for _, w := range []string{`"section": "dmx"`, `"summary": "1 patch entry to add"`, `"section": "cuelists"`, `"summary": "in sync"`} {
		if !strings.Contains(out, w) {
			t.Errorf("grpcurl plan lacks %s:\n%s", w, out)
		}
	}
}
