package installation

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/dmx"
)

// Gateway sections: parts of the description that are the gateway's own
// state rather than a board's. A description without a section leaves
// that part of the gateway alone; with it, the section is the whole
// truth (the patch is replaced whole; the cue lists are exactly the ones
// listed: `cuelists: []` removes every list).
const (
	SectionDMX      = "dmx"
	SectionCueLists = "cuelists"
)

// OpChange is a section item that is there and differs.
const OpChange = "change"

// ErrSection: a section of the description cannot be applied on this
// gateway (the part it sets is not running), or setting it failed.
var ErrSection = errors.New("installation: gateway section")

// DMX is the description's dmx section.
type DMX struct {
	// Patch is the DMX patch as docs/dmx.md defines it (fixtures and
	// universes), replaced whole.
	Patch *dmx.Patch `yaml:"patch" json:"patch"`
}

// PatchEngine is what the installation needs of the DMX engine
// (*dmx.Engine, or the gateway's wrapper that also saves the patch file).
// Patch returns nil when no DMX engine runs.
type PatchEngine interface {
	Patch() *dmx.Patch
	SetPatch(*dmx.Patch) error
}

// CueEngine is what the installation needs of the cue engine
// (*cue.Engine).
type CueEngine interface {
	Lists() []cue.List
	Put(cue.List) (cue.List, error)
	Delete(name string) error
}

// SectionChange is one item of a section to add, change or remove.
type SectionChange struct {
	Op string `json:"op"`
	// Item names it: "fixture universe 2 address 1", "universe 2",
	// "cue list demo".
	Item string `json:"item"`
	// Why says what differs ("cue 2 changed, cue 3 added").
	Why string `json:"why,omitempty"`
}

// SectionPlan is what an apply would change in one gateway section.
type SectionPlan struct {
	Section string          `json:"section"`
	State   string          `json:"state"`
	Summary string          `json:"summary"`
	Changes []SectionChange `json:"changes,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// checkSections finds what is wrong with the gateway sections, with the
// reasons dmx's and cue's own checks give. Cue lists are put in their
// canonical form (numbers canonical, cues by number).
func (d *Description) checkSections() []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{d.at(path), fmt.Sprintf(format, args...)})
	}
	if d.DMX != nil {
		if d.DMX.Patch == nil {
			add("dmx", "dmx: give patch (the patch as docs/dmx.md defines it; fixtures: [] for none)")
		} else if err := d.DMX.Patch.Check(); err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				line = strings.TrimPrefix(line, "dmx: bad patch: ")
				at := "dmx.patch"
				var n int
				if _, err := fmt.Sscanf(line, "fixture %d ", &n); err == nil && n >= 1 {
					at = fmt.Sprintf("dmx.patch.fixtures[%d]", n-1)
				}
				add(at, "dmx.patch: %s", line)
			}
		}
	}
	if d.CueLists != nil {
		seen := map[string]int{}
		for i := range *d.CueLists {
			l := &(*d.CueLists)[i]
			p := fmt.Sprintf("cuelists[%d]", i)
			if j, ok := seen[l.Name]; ok {
				add(join(p, "name"), "%s: cue list %q is also cuelists[%d]", p, l.Name, j)
			} else {
				seen[l.Name] = i
			}
			if err := l.Check(); err != nil {
				add(p, "%s (cue list %q): %s", p, l.Name, strings.ReplaceAll(err.Error(), "cue: bad cue list: ", ""))
			}
		}
	}
	return ps
}

// fixtureKey is a fixture's place in the patch: universe and start
// address (the patch refuses overlaps, so it names one fixture).
type fixtureKey struct{ u, a int }

func describeFixture(f dmx.Fixture) string {
	s := fmt.Sprintf("%s -> %s", f.Profile, f.Target())
	if f.Name != "" {
		s = fmt.Sprintf("%q %s", f.Name, s)
	}
	return s
}

// diffPatch lists what turns have into want: fixtures by universe and
// address, loss rules by universe.
func diffPatch(want, have *dmx.Patch) []SectionChange {
	if have == nil {
		have = &dmx.Patch{}
	}
	var out []SectionChange
	hf := map[fixtureKey]dmx.Fixture{}
	for _, f := range have.Fixtures {
		hf[fixtureKey{f.Universe, f.Address}] = f
	}
	wf := map[fixtureKey]dmx.Fixture{}
	for _, f := range want.Fixtures {
		wf[fixtureKey{f.Universe, f.Address}] = f
	}
	keys := slices.Collect(maps.Keys(hf))
	for k := range wf {
		if _, ok := hf[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b fixtureKey) int { return cmp.Or(cmp.Compare(a.u, b.u), cmp.Compare(a.a, b.a)) })
	for _, k := range keys {
		w, inW := wf[k]
		h, inH := hf[k]
		item := fmt.Sprintf("fixture universe %d address %d", k.u, k.a)
		switch {
		case inW && !inH:
			out = append(out, SectionChange{Op: OpAdd, Item: item, Why: describeFixture(w)})
		case inH && !inW:
			out = append(out, SectionChange{Op: OpRemove, Item: item, Why: describeFixture(h)})
		case w != h:
			out = append(out, SectionChange{Op: OpChange, Item: item, Why: describeFixture(h) + ", want " + describeFixture(w)})
		}
	}
	rules := func(p *dmx.Patch) map[int]string {
		m := map[int]string{}
		for _, r := range p.Universes {
			m[r.Universe] = r.Loss
		}
		return m
	}
	wr, hr := rules(want), rules(have)
	us := slices.Collect(maps.Keys(wr))
	for u := range hr {
		if _, ok := wr[u]; !ok {
			us = append(us, u)
		}
	}
	slices.Sort(us)
	for _, u := range us {
		w, inW := wr[u]
		h, inH := hr[u]
		item := fmt.Sprintf("universe %d", u)
		switch {
		case inW && !inH:
			out = append(out, SectionChange{Op: OpAdd, Item: item, Why: "loss " + w})
		case inH && !inW:
			out = append(out, SectionChange{Op: OpRemove, Item: item, Why: "loss " + h})
		case w != h:
			out = append(out, SectionChange{Op: OpChange, Item: item, Why: fmt.Sprintf("loss %s, want %s", h, w)})
		}
	}
	return out
}

// canonCue is a cue as comparable JSON: action bodies compacted with
// their keys in order, so a list put over REST with other spacing is not
// taken for a different one.
func canonCue(c cue.Cue) string {
	c.Actions = slices.Clone(c.Actions)
	for i, a := range c.Actions {
		var v any
		dec := json.NewDecoder(bytes.NewReader(a.Body))
		dec.UseNumber()
		if len(a.Body) == 0 {
			c.Actions[i].Body = json.RawMessage("{}")
		} else if dec.Decode(&v) == nil {
			c.Actions[i].Body, _ = json.Marshal(v)
		}
	}
	if c.Follow == "" {
		c.Follow = cue.FollowNone
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// diffCues says which cues of a list differ ("" when none).
func diffCues(want, have cue.List) string {
	hc := map[cue.Number]string{}
	for _, c := range have.Cues {
		hc[c.Number] = canonCue(c)
	}
	var added, changed, removed []string
	wn := map[cue.Number]bool{}
	for _, c := range want.Cues {
		wn[c.Number] = true
		h, ok := hc[c.Number]
		switch {
		case !ok:
			added = append(added, string(c.Number))
		case h != canonCue(c):
			changed = append(changed, string(c.Number))
		}
	}
	for _, c := range have.Cues {
		if !wn[c.Number] {
			removed = append(removed, string(c.Number))
		}
	}
	var parts []string
	for _, p := range []struct {
		what string
		ns   []string
	}{{"changed", changed}, {"added", added}, {"removed", removed}} {
		switch len(p.ns) {
		case 0:
		case 1:
			parts = append(parts, fmt.Sprintf("cue %s %s", p.ns[0], p.what))
		default:
			parts = append(parts, fmt.Sprintf("cues %s %s", strings.Join(p.ns, ", "), p.what))
		}
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	if strings.HasSuffix(one, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(one, "y"))
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// diffLists lists what turns have into want, by list name.
func diffLists(want, have []cue.List) []SectionChange {
	hl := map[string]cue.List{}
	for _, l := range have {
		hl[l.Name] = l
	}
	wl := map[string]cue.List{}
	for _, l := range want {
		wl[l.Name] = l
	}
	names := slices.Sorted(maps.Keys(hl))
	for n := range wl {
		if _, ok := hl[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []SectionChange
	for _, n := range names {
		w, inW := wl[n]
		h, inH := hl[n]
		item := "cue list " + n
		switch {
		case inW && !inH:
			out = append(out, SectionChange{Op: OpAdd, Item: item, Why: plural(len(w.Cues), "cue")})
		case inH && !inW:
			out = append(out, SectionChange{Op: OpRemove, Item: item, Why: plural(len(h.Cues), "cue") + ", not in the description"})
		default:
			if why := diffCues(w, h); why != "" {
				out = append(out, SectionChange{Op: OpChange, Item: item, Why: why})
			}
		}
	}
	return out
}

// sectionSummary counts a section's changes in one line.
func sectionSummary(what string, cs []SectionChange) string {
	if len(cs) == 0 {
		return "in sync"
	}
	n := map[string]int{}
	for _, c := range cs {
		n[c.Op]++
	}
	var parts []string
	for _, op := range []string{OpAdd, OpChange, OpRemove} {
		if n[op] > 0 {
			parts = append(parts, fmt.Sprintf("%s to %s", plural(n[op], what), op))
		}
	}
	return strings.Join(parts, ", ")
}

// livePatch is the DMX engine's patch, or an error when none runs.
func (in *Installer) livePatch() (*dmx.Patch, error) {
	if in.o.DMX != nil {
		if p := in.o.DMX.Patch(); p != nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: dmx: this gateway runs no DMX engine (start it with --sacn or --artnet)", ErrSection)
}

// liveLists is the cue engine's lists, or an error when none runs.
func (in *Installer) liveLists() ([]cue.List, error) {
	if in.o.Cues == nil {
		return nil, fmt.Errorf("%w: cuelists: this gateway runs no cue engine", ErrSection)
	}
	return in.o.Cues.Lists(), nil
}

// PlanSections compares the description's gateway sections with the
// gateway's live state: what an apply would change in the DMX patch and
// in each cue list. A section the description leaves out is not listed;
// one this gateway cannot hold is "failed" with the reason.
func (in *Installer) PlanSections(d *Description) []SectionPlan {
	var out []SectionPlan
	plan := func(name, what string, diff func() ([]SectionChange, error)) {
		sp := SectionPlan{Section: name}
		cs, err := diff()
		switch {
		case err != nil:
			sp.State, sp.Summary, sp.Error = StateFailed, err.Error(), err.Error()
		case len(cs) == 0:
			sp.State, sp.Summary = StateInSync, "in sync"
		default:
			sp.State, sp.Summary, sp.Changes = StateDrifted, sectionSummary(what, cs), cs
		}
		out = append(out, sp)
	}
	if d.DMX != nil && d.DMX.Patch != nil {
		plan(SectionDMX, "patch entry", func() ([]SectionChange, error) {
			have, err := in.livePatch()
			if err != nil {
				return nil, err
			}
			return diffPatch(d.DMX.Patch, have), nil
		})
	}
	if d.CueLists != nil {
		plan(SectionCueLists, "cue list", func() ([]SectionChange, error) {
			have, err := in.liveLists()
			if err != nil {
				return nil, err
			}
			return diffLists(*d.CueLists, have), nil
		})
	}
	return out
}

// checkSectionsApply refuses a description whose sections this gateway
// cannot hold, before anything changes.
func (in *Installer) checkSectionsApply(d *Description) error {
	var errs []error
	if d.DMX != nil {
		if _, err := in.livePatch(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.CueLists != nil {
		if _, err := in.liveLists(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sectionsSet is what applySections changed: putBack undoes it (the
// revision was not stored after all), audit records it (it was).
type sectionsSet struct {
	undo   []func()
	audits []auth.Record
}

// putBack sets what was changed back as it was (best effort), newest
// first.
func (s *sectionsSet) putBack() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo, s.audits = nil, nil
}

func (s *sectionsSet) audit(a auth.Auditor) {
	if a == nil {
		return
	}
	for _, r := range s.audits {
		a.Audit(r)
	}
}

// applySections sets the description's gateway sections through the
// DMX and cue engines' own APIs: the patch whole (only when it differs),
// then each cue list added or changed, then the lists the description
// does not name removed. When a step fails, what was set is put back as
// it was (best effort) and the error is returned. The caller audits what
// was set (each section changed, with who and the revision) once the
// revision is stored, or puts it back when it is not.
func (in *Installer) applySections(d *Description, rev Revision) (*sectionsSet, error) {
	set := &sectionsSet{}
	now := in.o.Clock.Now().UTC()
	record := func(res auth.Resource, summary string) {
		a := rev.Author.attrs(rev.Who, rev.N, in.gateway(), "installation.apply_section")
		a.Resource = res
		set.audits = append(set.audits, auth.Record{Time: now, Allowed: true, Code: auth.CodeOK, Reason: summary, Attributes: a})
	}
	fail := func(err error) (*sectionsSet, error) {
		set.putBack()
		return nil, fmt.Errorf("%w: %w", ErrSection, err)
	}
	if d.DMX != nil {
		old, err := in.livePatch()
		if err != nil {
			return nil, err
		}
		if cs := diffPatch(d.DMX.Patch, old); len(cs) > 0 {
			np := clonePatch(d.DMX.Patch)
			if err := in.o.DMX.SetPatch(np); err != nil {
				return fail(fmt.Errorf("dmx: setting the patch: %w", err))
			}
			set.undo = append(set.undo, func() { _ = in.o.DMX.SetPatch(old) })
			record(auth.ResDMX, "dmx patch: "+sectionSummary("patch entry", cs))
		}
	}
	if d.CueLists != nil {
		have, err := in.liveLists()
		if err != nil {
			return fail(err)
		}
		cs := diffLists(*d.CueLists, have)
		byName := map[string]cue.List{}
		for _, l := range have {
			byName[l.Name] = l
		}
		want := map[string]cue.List{}
		for _, l := range *d.CueLists {
			want[l.Name] = l
		}
		for _, c := range cs {
			name := strings.TrimPrefix(c.Item, "cue list ")
			old, had := byName[name]
			switch c.Op {
			case OpAdd, OpChange:
				if _, err := in.o.Cues.Put(want[name].Clone()); err != nil {
					return fail(fmt.Errorf("cuelists: saving %s: %w", name, err))
				}
				if had {
					set.undo = append(set.undo, func() { _, _ = in.o.Cues.Put(old) })
				} else {
					set.undo = append(set.undo, func() { _ = in.o.Cues.Delete(name) })
				}
			case OpRemove:
				if err := in.o.Cues.Delete(name); err != nil && !errors.Is(err, cue.ErrNoList) {
					return fail(fmt.Errorf("cuelists: removing %s: %w", name, err))
				}
				set.undo = append(set.undo, func() { _, _ = in.o.Cues.Put(old) })
			}
		}
		if len(cs) > 0 {
			record(auth.ResCues, "cue lists: "+sectionSummary("cue list", cs))
		}
	}
	return set, nil
}

func clonePatch(p *dmx.Patch) *dmx.Patch {
	return &dmx.Patch{Fixtures: slices.Clone(p.Fixtures), Universes: slices.Clone(p.Universes)}
}

// exportSections reads the gateway's live patch and cue lists into d
// (each only when its engine runs).
func (in *Installer) exportSections(d *Description) {
	if p, err := in.livePatch(); err == nil {
		d.DMX = &DMX{Patch: clonePatch(p)}
	}
	if ls, err := in.liveLists(); err == nil {
		if ls == nil {
			ls = []cue.List{}
		}
		d.CueLists = &ls
	}
}
