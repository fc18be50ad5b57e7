package dmx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Errors of the patch.
var (
	// ErrBadPatch: a patch that cannot be used as it is (a fixture that
	// overlaps another, does not fit its universe, names no target or an
	// unknown profile); the error says which fixture and why.
	ErrBadPatch = fault.New(fault.Invalid, "dmx: bad patch")
)

// Universes of the patch: the sACN range. An Art-Net Port-Address P
// feeds universe P+1 (docs/dmx.md).
const (
	MinUniverse = 1
	MaxUniverse = 63999
	// Slots is the size of a DMX512 universe.
	Slots = 512
)

// Loss rules of a universe whose last source went silent.
const (
	// LossHold keeps the last look (the default).
	LossHold = "hold"
	// LossRelease hands the boards back: every fixture's target is sent
	// scene_end and forgotten, so the next source's look goes out whole.
	LossRelease = "release"
)

// Fixture is one patch line: a profile at a universe and start address,
// driving one target: a group (one group frame per line), a board by id,
// a board by its line and bus address, or the boards with a label.
type Fixture struct {
	Name     string `json:"name,omitempty"`
	Universe int    `json:"universe"`
	Address  int    `json:"address"`
	Profile  string `json:"profile"`

	Group       int    `json:"group,omitempty"`
	Board       string `json:"board,omitempty"`
	Line        string `json:"line,omitempty"`
	LineAddress int    `json:"line_address,omitempty"`
	Label       string `json:"label,omitempty"` // key=value
}

// UniverseRule is what a universe does when its sources are lost.
type UniverseRule struct {
	Universe int    `json:"universe"`
	Loss     string `json:"loss"`
}

// Patch is the whole patch: fixtures and per-universe rules.
type Patch struct {
	Fixtures  []Fixture      `json:"fixtures"`
	Universes []UniverseRule `json:"universes,omitempty"`
}

// Kind is the fixture's target kind ("group" or "board"), for metrics.
func (f Fixture) Kind() string {
	if f.Group != 0 {
		return "group"
	}
	return "board"
}

// Target names the fixture's target for people: "group 1", "board b3",
// "line line0 address 4", "label zone=bar".
func (f Fixture) Target() string {
	switch {
	case f.Group != 0:
		return fmt.Sprintf("group %d", f.Group)
	case f.Board != "":
		return "board " + f.Board
	case f.Line != "":
		return fmt.Sprintf("line %s address %d", f.Line, f.LineAddress)
	}
	return "label " + f.Label
}

// Width is the fixture's channel count (0 for an unknown profile).
func (f Fixture) Width() int {
	if p, ok := Profiles[f.Profile]; ok {
		return len(p.Channels)
	}
	return 0
}

// Last is the fixture's last address.
func (f Fixture) Last() int { return f.Address + f.Width() - 1 }

func (f Fixture) String() string {
	return fmt.Sprintf("universe %d address %d-%d %s -> %s", f.Universe, f.Address, f.Last(), f.Profile, f.Target())
}

// Loss is the loss rule of universe u.
func (p *Patch) Loss(u int) string {
	for _, r := range p.Universes {
		if r.Universe == u && r.Loss != "" {
			return r.Loss
		}
	}
	return LossHold
}

// UniverseList is the patched universes, ascending.
func (p *Patch) UniverseList() []int {
	var us []int
	for _, f := range p.Fixtures {
		if !slices.Contains(us, f.Universe) {
			us = append(us, f.Universe)
		}
	}
	slices.Sort(us)
	return us
}

// Check refuses a patch that cannot be used: each fixture names one
// target and a known profile, fits its universe (1-63999, addresses
// 1-512) and overlaps no other; loss rules are hold or release.
func (p *Patch) Check() error {
	var errs []error
	for i, f := range p.Fixtures {
		at := fmt.Sprintf("fixture %d (universe %d address %d)", i+1, f.Universe, f.Address)
		n := 0
		for _, set := range []bool{f.Group != 0, f.Board != "", f.Line != "" || f.LineAddress != 0, f.Label != ""} {
			if set {
				n++
			}
		}
		switch {
		case n != 1:
			errs = append(errs, fmt.Errorf("%s: names %d targets (one of group, board, line with line_address, label)", at, n))
			continue
		case f.Group != 0:
			if err := fleet.CheckGroup(f.Group); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", at, err))
			}
		case f.Line != "" || f.LineAddress != 0:
			if f.Line == "" || f.LineAddress < 1 || f.LineAddress > 247 {
				errs = append(errs, fmt.Errorf("%s: line and line_address (1-247) go together", at))
			}
		case f.Label != "":
			if k, _, ok := strings.Cut(f.Label, "="); !ok || k == "" {
				errs = append(errs, fmt.Errorf("%s: label %q: want key=value", at, f.Label))
			}
		}
		if _, ok := Profiles[f.Profile]; !ok {
			errs = append(errs, fmt.Errorf("%s: unknown profile %q (%s)", at, f.Profile, strings.Join(ProfileNames(), ", ")))
			continue
		}
		if f.Universe < MinUniverse || f.Universe > MaxUniverse {
			errs = append(errs, fmt.Errorf("%s: universe %d is not %d-%d", at, f.Universe, MinUniverse, MaxUniverse))
			continue
		}
		if f.Address < 1 || f.Last() > Slots {
			errs = append(errs, fmt.Errorf("%s: profile %s is %d channels wide, addresses %d-%d do not fit a universe (1-%d)",
				at, f.Profile, f.Width(), f.Address, f.Last(), Slots))
			continue
		}
		for j, g := range p.Fixtures[:i] {
			if g.Universe == f.Universe && g.Width() > 0 && f.Address <= g.Last() && g.Address <= f.Last() {
				errs = append(errs, fmt.Errorf("%s: addresses %d-%d overlap fixture %d (%d-%d)", at, f.Address, f.Last(), j+1, g.Address, g.Last()))
			}
		}
	}
	for _, r := range p.Universes {
		if r.Loss != LossHold && r.Loss != LossRelease {
			errs = append(errs, fmt.Errorf("universe %d: loss %q is hold or release", r.Universe, r.Loss))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadPatch, err)
	}
	return nil
}

// ParsePatch reads a patch (JSON, docs/dmx.md) strictly and checks it.
func ParsePatch(r io.Reader) (*Patch, error) {
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	var p Patch
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPatch, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more after the patch", ErrBadPatch)
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// ReadPatchFile reads and checks the patch file at path.
func ReadPatchFile(path string) (*Patch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePatch(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// DemoPatch is the demo's patch: groups as group fixtures in universe 1
// (group g at 1 + 16(g-1)), and boards 1..n of the demo's line, by bus
// address, each one fixture in universe 2 from address 1, one profile
// width apart (boards past the universe's end are left out).
func DemoPatch(groups, boards int, line string) *Patch {
	p := &Patch{}
	w := len(Profiles[ProfileHolo].Channels)
	for g := 1; g <= groups && g <= 31 && 1+16*(g-1)+w-1 <= Slots; g++ {
		p.Fixtures = append(p.Fixtures, Fixture{Name: fmt.Sprintf("group %d", g), Universe: 1, Address: 1 + 16*(g-1), Profile: ProfileHolo, Group: g})
	}
	for i := range boards {
		a := 1 + i*w
		if a+w-1 > Slots || i+1 > 247 {
			break
		}
		p.Fixtures = append(p.Fixtures, Fixture{Name: fmt.Sprintf("board %d", i+1), Universe: 2, Address: a, Profile: ProfileHolo, Line: line, LineAddress: i + 1})
	}
	return p
}
