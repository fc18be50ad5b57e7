package installation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// FileWant is one file a board should hold.
type FileWant struct {
	Content string `json:"content"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
}

// Target is what one board should hold: its profile with the values of
// every assignment that matches it merged over.
type Target struct {
	Board   string              `json:"board"`
	Profile string              `json:"profile"`
	Files   map[string]FileWant `json:"files"`
	Scenes  map[string]Scene    `json:"scenes"`
	// Settings, Servos and Link are nil (or empty) when not managed.
	Settings *Settings        `json:"settings,omitempty"`
	Servos   map[string]Servo `json:"servos,omitempty"`
	Link     *Link            `json:"link,omitempty"`
	Prune    bool             `json:"prune"`
}

// Dirs are the directories the target manages: every parent of its
// files, sorted.
func (t *Target) Dirs() []string {
	set := map[string]bool{}
	for p := range t.Files {
		set[parent(p)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// precedence of the ways of selecting: the more specific wins.
func (a Assignment) precedence() int {
	switch {
	case a.Board != "":
		return 4
	case a.Address != 0 || a.Line != "":
		return 3
	case len(a.Labels) > 0:
		return 2
	default:
		return 1
	}
}

// Matches reports whether the assignment selects the board.
func (a Assignment) Matches(v fleet.BoardView) bool {
	switch {
	case a.Board != "":
		return v.ID == a.Board
	case a.Address != 0 || a.Line != "":
		return v.Address == a.Address && (a.Line == "" || v.Line == a.Line)
	case len(a.Labels) > 0:
		for k, want := range a.Labels {
			if v.Labels[k] != want {
				return false
			}
		}
		return true
	default:
		return slices.Contains(v.Groups, a.Group)
	}
}

// Selector describes the assignment's selection for people.
func (a Assignment) Selector() string {
	switch {
	case a.Board != "":
		return "board " + a.Board
	case a.Address != 0 || a.Line != "":
		if a.Line == "" {
			return fmt.Sprintf("address %d", a.Address)
		}
		return fmt.Sprintf("line %s address %d", a.Line, a.Address)
	case len(a.Labels) > 0:
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			kv = append(kv, k+"="+a.Labels[k])
		}
		return "labels " + strings.Join(kv, ",")
	default:
		return fmt.Sprintf("group %d", a.Group)
	}
}

// Resolve gives the board its target: the profile of the most specific
// assignment that names one (two at the same precedence naming different
// profiles are ErrConflict), with the values of every matching assignment
// merged over it from the least specific to the most. ok is false when
// no assignment gives the board a profile.
func (d *Description) Resolve(v fleet.BoardView) (t Target, ok bool, err error) {
	type hit struct {
		a    Assignment
		prec int
		i    int
	}
	var hits []hit
	for i, a := range d.Assignments {
		if a.Matches(v) {
			hits = append(hits, hit{a, a.precedence(), i})
		}
	}
	slices.SortStableFunc(hits, func(x, y hit) int { return x.prec - y.prec })
	profile, prec := "", 0
	for _, h := range hits {
		if h.a.Profile == "" {
			continue
		}
		if h.prec == prec && profile != h.a.Profile {
			return Target{}, false, fmt.Errorf("%w: board %s: %s and another assignment give profiles %s and %s", ErrConflict, v.ID, h.a.Selector(), profile, h.a.Profile)
		}
		profile, prec = h.a.Profile, h.prec
	}
	if profile == "" {
		return Target{}, false, nil
	}
	pr := d.Profiles[profile]
	t = Target{Board: v.ID, Profile: profile, Files: map[string]FileWant{}, Scenes: maps.Clone(pr.Scenes), Prune: d.Prune,
		Settings: cloneSettings(pr.Settings), Servos: maps.Clone(pr.Servos), Link: cloneLink(pr.Link)}
	if t.Scenes == nil {
		t.Scenes = map[string]Scene{}
	}
	for p, cname := range pr.Files {
		c := d.Content[cname]
		t.Files[p] = FileWant{Content: cname, SHA256: c.SHA256, Size: c.Size}
	}
	for _, h := range hits {
		if h.a.Values == nil {
			continue
		}
		vals := h.a.Values
		t.Settings = mergeSettings(t.Settings, vals.Settings)
		for id, s := range vals.Servos {
			if t.Servos == nil {
				t.Servos = map[string]Servo{}
			}
			cur := t.Servos[id]
			if s.Calibration != nil {
				cur.Calibration = s.Calibration
			}
			if s.Policy != nil {
				cur.Policy = s.Policy
			}
			t.Servos[id] = cur
		}
		if vals.Link != nil {
			if t.Link == nil {
				t.Link = &Link{}
			}
			if vals.Link.Address != nil {
				t.Link.Address = vals.Link.Address
			}
			if vals.Link.Groups != nil {
				t.Link.Groups = slices.Clone(vals.Link.Groups)
			}
		}
	}
	if t.Settings != nil && t.Settings.BootScene != nil && !t.Settings.BootScene.Null {
		if _, ok := t.Scenes[t.Settings.BootScene.Value]; !ok {
			return Target{}, false, fmt.Errorf("%w: board %s: boot_scene %q is not a scene of profile %s", ErrConflict, v.ID, t.Settings.BootScene.Value, profile)
		}
	}
	return t, true, nil
}

func cloneSettings(s *Settings) *Settings {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

func cloneLink(l *Link) *Link {
	if l == nil {
		return nil
	}
	c := *l
	c.Groups = slices.Clone(l.Groups)
	return &c
}

func mergeSettings(base, over *Settings) *Settings {
	if over == nil {
		return base
	}
	out := &Settings{}
	if base != nil {
		*out = *base
	}
	if over.BootScene != nil {
		out.BootScene = over.BootScene
	}
	if over.Screen != nil && over.Screen.Backlight != nil {
		out.Screen = &ScreenSettings{Backlight: over.Screen.Backlight}
	}
	if over.LEDs != nil {
		l := LEDSettings{}
		if out.LEDs != nil {
			l = *out.LEDs
		}
		if over.LEDs.Brightness != nil {
			l.Brightness = over.LEDs.Brightness
		}
		if over.LEDs.Count != nil {
			l.Count = over.LEDs.Count
		}
		out.LEDs = &l
	}
	return out
}
