package installation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
)

func TestDiffPatch(t *testing.T) {
	door := dmx.Fixture{Name: "door", Universe: 1, Address: 1, Profile: dmx.ProfileHolo, Group: 1}
	bar := dmx.Fixture{Universe: 1, Address: 17, Profile: "rgb", Label: "zone=bar"}
	desk := dmx.Fixture{Universe: 2, Address: 1, Profile: dmx.ProfileHolo, Line: "line0", LineAddress: 4}
	moved := door
	moved.Group = 2
	for _, tc := range []struct {
		name       string
		want, have *dmx.Patch
		changes    []SectionChange
	}{
		{"same", &dmx.Patch{Fixtures: []dmx.Fixture{door, bar}}, &dmx.Patch{Fixtures: []dmx.Fixture{door, bar}}, nil},
		{"order does not matter", &dmx.Patch{Fixtures: []dmx.Fixture{bar, door}}, &dmx.Patch{Fixtures: []dmx.Fixture{door, bar}}, nil},
		{"nil and empty are the same", &dmx.Patch{Fixtures: []dmx.Fixture{}}, &dmx.Patch{}, nil},
		{"no live patch", &dmx.Patch{}, nil, nil},
		{"add", &dmx.Patch{Fixtures: []dmx.Fixture{door, desk}}, &dmx.Patch{Fixtures: []dmx.Fixture{door}}, []SectionChange{
			{Op: OpAdd, Item: "fixture universe 2 address 1", Why: "holo -> line line0 address 4"}}},
		{"remove", &dmx.Patch{}, &dmx.Patch{Fixtures: []dmx.Fixture{bar}}, []SectionChange{
			{Op: OpRemove, Item: "fixture universe 1 address 17", Why: "rgb -> label zone=bar"}}},
		{"change", &dmx.Patch{Fixtures: []dmx.Fixture{moved}}, &dmx.Patch{Fixtures: []dmx.Fixture{door}}, []SectionChange{
			{Op: OpChange, Item: "fixture universe 1 address 1", Why: `"door" holo -> group 1, want "door" holo -> group 2`}}},
		{"loss rules", &dmx.Patch{Universes: []dmx.UniverseRule{{Universe: 1, Loss: dmx.LossRelease}, {Universe: 3, Loss: dmx.LossHold}}},
			&dmx.Patch{Universes: []dmx.UniverseRule{{Universe: 1, Loss: dmx.LossHold}, {Universe: 2, Loss: dmx.LossRelease}}}, []SectionChange{
				{Op: OpChange, Item: "universe 1", Why: "loss hold, want release"},
				{Op: OpRemove, Item: "universe 2", Why: "loss release"},
				{Op: OpAdd, Item: "universe 3", Why: "loss hold"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.changes, diffPatch(tc.want, tc.have)); d != "" {
				t.Fatalf("changes (-want +got):\n%s", d)
			}
		})
	}
}

func TestDiffLists(t *testing.T) {
	act := func(body string) []cue.Action {
		return []cue.Action{{Kind: fleet.ActionLEDs, Selector: fleet.Selector{Groups: []int{1}}, Body: json.RawMessage(body)}}
	}
	list := func(name string, cues ...cue.Cue) cue.List {
		l := cue.List{Name: name, Cues: cues}
		if err := l.Check(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	c1 := cue.Cue{Number: "1", Actions: act(`{"mode":"solid","colour":"red"}`)}
	c1Spaced := cue.Cue{Number: "1", Actions: act(`{ "colour": "red",  "mode": "solid" }`)}
	c1Blue := cue.Cue{Number: "1", Actions: act(`{"mode":"solid","colour":"blue"}`)}
	c2 := cue.Cue{Number: "2", Actions: act(`{"mode":"off"}`), Follow: cue.FollowContinue}
	c3 := cue.Cue{Number: "3", Actions: act(`{"mode":"off"}`)}
	for _, tc := range []struct {
		name       string
		want, have []cue.List
		changes    []SectionChange
	}{
		{"same", []cue.List{list("a", c1, c2)}, []cue.List{list("a", c1, c2)}, nil},
		{"body spacing and key order do not matter", []cue.List{list("a", c1)}, []cue.List{list("a", c1Spaced)}, nil},
		{"none wanted, none there", []cue.List{}, nil, nil},
		{"add", []cue.List{list("a", c1, c2)}, nil, []SectionChange{{Op: OpAdd, Item: "cue list a", Why: "2 cues"}}},
		{"remove every list", []cue.List{}, []cue.List{list("a", c1), list("b")}, []SectionChange{
			{Op: OpRemove, Item: "cue list a", Why: "1 cue, not in the description"},
			{Op: OpRemove, Item: "cue list b", Why: "0 cues, not in the description"}}},
		{"change", []cue.List{list("a", c1Blue, c3)}, []cue.List{list("a", c1, c2)}, []SectionChange{
			{Op: OpChange, Item: "cue list a", Why: "cue 1 changed; cue 3 added; cue 2 removed"}}},
		{"several cues", []cue.List{list("a")}, []cue.List{list("a", c1, c2, c3)}, []SectionChange{
			{Op: OpChange, Item: "cue list a", Why: "cues 1, 2, 3 removed"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.changes, diffLists(tc.want, tc.have)); d != "" {
				t.Fatalf("changes (-want +got):\n%s", d)
			}
		})
	}
}

// TestSectionsJSONRoundTrip: a description's sections survive the
// canonical JSON a revision stores, and cuelists: [] stays [] (remove
// every list), not absent (leave them alone).
func TestSectionsJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, text      string
		dmx, lists      bool
		fixtures, nList int
	}{
		{"both", "version: 1\nprofiles: {p: {}}\ndmx: {patch: {fixtures: [{universe: 1, address: 1, profile: holo, group: 1}]}}\ncuelists: [{name: a, cues: [{number: 1, actions: [{kind: scene_end, selector: {all: true}}]}]}]\n", true, true, 1, 1},
		{"empty list set", "version: 1\nprofiles: {p: {}}\ncuelists: []\n", false, true, 0, 0},
		{"empty patch", "version: 1\nprofiles: {p: {}}\ndmx: {patch: {}}\n", true, false, 0, 0},
		{"neither", "version: 1\nprofiles: {p: {}}\n", false, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse("x.yaml", []byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			back, err := FromJSON("rev", d.JSON())
			if err != nil {
				t.Fatalf("%v\n%s", err, d.JSON())
			}
			for _, x := range []*Description{d, back} {
				if (x.DMX != nil) != tc.dmx || (x.CueLists != nil) != tc.lists {
					t.Fatalf("dmx %v cuelists %v, want %v %v (%s)", x.DMX != nil, x.CueLists != nil, tc.dmx, tc.lists, x.JSON())
				}
				if tc.dmx && len(x.DMX.Patch.Fixtures) != tc.fixtures {
					t.Fatalf("fixtures %d, want %d", len(x.DMX.Patch.Fixtures), tc.fixtures)
				}
				if tc.lists && len(*x.CueLists) != tc.nList {
					t.Fatalf("lists %d, want %d", len(*x.CueLists), tc.nList)
				}
			}
			if string(back.JSON()) != string(d.JSON()) {
				t.Fatalf("JSON changed on a round trip:\n%s\n%s", d.JSON(), back.JSON())
			}
		})
	}
}

// TestCueNumberAsWritten: a cue number written bare (1.50) is taken as
// its text, then made canonical ("1.5") as the cue API does.
func TestCueNumberAsWritten(t *testing.T) {
	d, err := Parse("x.yaml", []byte("version: 1\nprofiles: {p: {}}\ncuelists: [{name: a, cues: [{number: 10, actions: [{kind: scene_end, selector: {all: true}}]}, {number: 1.50, actions: [{kind: scene_end, selector: {all: true}}]}, {number: \"2\", actions: [{kind: scene_end, selector: {all: true}}]}]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []cue.Number
	for _, c := range (*d.CueLists)[0].Cues {
		got = append(got, c.Number)
	}
	if d := cmp.Diff([]cue.Number{"1.5", "2", "10"}, got); d != "" {
		t.Fatalf("numbers (-want +got):\n%s", d)
	}
}

// TestSectionErrorOutcome: a section the gateway cannot hold or failed
// to set answers 409 over REST, audited as FailedPrecondition.
func TestSectionErrorOutcome(t *testing.T) {
	in := &Installer{}
	err := in.checkSectionsApply(&Description{CueLists: &[]cue.List{}, DMX: &DMX{Patch: &dmx.Patch{}}})
	if err == nil {
		t.Fatal("sections accepted without engines")
	}
	st, code, audit := outcome(err)
	if st != 409 || code != "failed_precondition" || audit != "FailedPrecondition" {
		t.Fatalf("outcome %d %s %s", st, code, audit)
	}
	if c := status.Code(grpcErr(err)); c != codes.FailedPrecondition {
		t.Fatalf("gRPC code %v, want FailedPrecondition", c)
	}
	for _, want := range []string{"no DMX engine", "no cue engine"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
