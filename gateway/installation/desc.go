package installation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// Version is the description format's version (the "version" key).
const Version = 1

// Limits of a description.
const (
	// MaxDescription is the largest description file read (bytes).
	MaxDescription = 1 << 20
	// MaxScenes is how many scenes a board keeps (the board's limit).
	MaxScenes = 16
	// MaxPathLen and MaxNameLen are the board's path rules.
	MaxPathLen = 159
	MaxNameLen = 63
)

// Description is an installation as written: content, profiles, which
// boards take which profile, and the apply policy. The YAML keys are the
// JSON keys; the file format is documented in docs/installation.md and by
// the JSON Schema (Schema).
type Description struct {
	Version int    `yaml:"version" json:"version"`
	Name    string `yaml:"name" json:"name,omitempty"`
	// Prune removes, from each board, files in the directories the
	// profile manages that the profile does not list, files the
	// installation wrote before and no longer lists, and saved scenes the
	// profile does not list.
	Prune bool `yaml:"prune" json:"prune"`
	// Heal lets the gateway bring drifted boards back on its own.
	Heal bool `yaml:"heal" json:"heal"`
	// Content names the files the profiles use.
	Content map[string]Content `yaml:"content" json:"content,omitempty"`
	// Profiles are what a board holds, by profile name.
	Profiles map[string]Profile `yaml:"profiles" json:"profiles"`
	// Assignments say which boards take which profile.
	Assignments []Assignment `yaml:"assignments" json:"assignments"`
	// Rollout is how an apply goes over the fleet.
	Rollout *Strategy `yaml:"rollout" json:"rollout,omitempty"`
	// DMX, when given, is the gateway's DMX patch (replaced whole); nil
	// leaves the patch alone.
	DMX *DMX `yaml:"dmx" json:"dmx,omitempty"`
	// CueLists, when given, are exactly the gateway's cue lists (lists
	// not named are removed; an empty list removes every one); nil leaves
	// the cue lists alone.
	CueLists *[]cue.List `yaml:"cuelists" json:"cuelists,omitempty"`

	// pos is where each value was written, by dotted path.
	pos map[string]Pos
	// file is the file name given to Parse.
	file string
}

// Content is one file of the installation: a local file (read when the
// description is loaded) or content already in the gateway's store named
// by its SHA-256. Loading fills SHA256 and Size.
type Content struct {
	File   string `yaml:"file" json:"file,omitempty"`
	SHA256 string `yaml:"sha256" json:"sha256,omitempty"`
	Size   int64  `yaml:"size" json:"size,omitempty"`
}

// Profile is what a board holds.
type Profile struct {
	// Files maps a path on the board's volume to a content name.
	Files map[string]string `yaml:"files" json:"files,omitempty"`
	// Scenes are saved scenes by name.
	Scenes   map[string]Scene `yaml:"scenes" json:"scenes,omitempty"`
	Settings *Settings        `yaml:"settings" json:"settings,omitempty"`
	Servos   map[string]Servo `yaml:"servos" json:"servos,omitempty"`
	Link     *Link            `yaml:"link" json:"link,omitempty"`
}

// Scene is a saved scene as the board's API takes it. Parts left out are
// left alone when the scene runs.
type Scene struct {
	Slot      *int         `yaml:"slot" json:"slot,omitempty"`
	Screen    *SceneScreen `yaml:"screen" json:"screen,omitempty"`
	LEDs      *SceneLEDs   `yaml:"leds" json:"leds,omitempty"`
	Holo      *SceneHolo   `yaml:"holo" json:"holo,omitempty"`
	Then      string       `yaml:"then" json:"then,omitempty"`
	DurationS *float64     `yaml:"duration_s" json:"duration_s,omitempty"`
}

// SceneScreen is a scene's screen part (as POST /screen/show).
type SceneScreen struct {
	Path        *string `yaml:"path" json:"path,omitempty"`
	Loop        *bool   `yaml:"loop" json:"loop,omitempty"`
	Loops       *int    `yaml:"loops" json:"loops,omitempty"`
	Colour      *string `yaml:"colour" json:"colour,omitempty"`
	Calibration *bool   `yaml:"calibration" json:"calibration,omitempty"`
}

// SceneLEDs is a scene's LED part (as PATCH /leds).
type SceneLEDs struct {
	Mode       *string `yaml:"mode" json:"mode,omitempty"`
	Colour     *string `yaml:"colour" json:"colour,omitempty"`
	Loop       *bool   `yaml:"loop" json:"loop,omitempty"`
	Brightness *int    `yaml:"brightness" json:"brightness,omitempty"`
}

// SceneHolo is a scene's holo part (as POST /holo/motion).
type SceneHolo struct {
	Motion     string    `yaml:"motion" json:"motion"`
	X          *float64  `yaml:"x" json:"x,omitempty"`
	Y          *float64  `yaml:"y" json:"y,omitempty"`
	DurationMS *int      `yaml:"duration_ms" json:"duration_ms,omitempty"`
	Range      *int      `yaml:"range" json:"range,omitempty"`
	Count      *int      `yaml:"count" json:"count,omitempty"`
	IntervalS  []float64 `yaml:"interval_s" json:"interval_s,omitempty"`
}

// Settings are the saved settings an installation manages; a field left
// out is left as the board has it.
type Settings struct {
	BootScene *NullString     `yaml:"boot_scene" json:"boot_scene,omitempty"`
	Screen    *ScreenSettings `yaml:"screen" json:"screen,omitempty"`
	LEDs      *LEDSettings    `yaml:"leds" json:"leds,omitempty"`
}

// ScreenSettings: the backlight applied at start (percent).
type ScreenSettings struct {
	Backlight *int `yaml:"backlight" json:"backlight,omitempty"`
}

// LEDSettings: LED brightness at start (percent) and the strip's length.
type LEDSettings struct {
	Brightness *int `yaml:"brightness" json:"brightness,omitempty"`
	Count      *int `yaml:"count" json:"count,omitempty"`
}

// NullString is a string that may be an explicit null (boot_scene: null
// means "no boot scene", an absent key means "leave it").
type NullString struct {
	Null  bool
	Value string
}

func (n *NullString) setNull() { n.Null = true }

// MarshalJSON writes null or the string.
func (n NullString) MarshalJSON() ([]byte, error) {
	if n.Null {
		return []byte("null"), nil
	}
	return json.Marshal(n.Value)
}

// UnmarshalJSON reads null or a string.
func (n *NullString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = NullString{Null: true}
		return nil
	}
	n.Null = false
	return json.Unmarshal(b, &n.Value)
}

// Servo is one servo's calibration and drive policy.
type Servo struct {
	Calibration *Calibration `yaml:"calibration" json:"calibration,omitempty"`
	Policy      *Policy      `yaml:"policy" json:"policy,omitempty"`
}

// Calibration: pulse widths of the closed and the open end.
type Calibration struct {
	MinUS int `yaml:"min_us" json:"min_us"`
	MaxUS int `yaml:"max_us" json:"max_us"`
}

// Policy: whether the servo keeps being driven once settled.
type Policy struct {
	HoldAtEnds  bool `yaml:"hold_at_ends" json:"hold_at_ends"`
	HoldBetween bool `yaml:"hold_between" json:"hold_between"`
}

// Link is the link settings an installation manages.
type Link struct {
	Address *int  `yaml:"address" json:"address,omitempty"`
	Groups  []int `yaml:"groups" json:"groups,omitempty"`
}

// Values are per-board values an assignment gives over its profile.
type Values struct {
	Settings *Settings        `yaml:"settings" json:"settings,omitempty"`
	Servos   map[string]Servo `yaml:"servos" json:"servos,omitempty"`
	Link     *Link            `yaml:"link" json:"link,omitempty"`
}

// Assignment selects boards and gives them a profile, values, or both.
// Exactly one way of selecting: board (an id), line and address (an
// RS485 position), group, or labels (every one must match).
type Assignment struct {
	Profile string            `yaml:"profile" json:"profile,omitempty"`
	Board   string            `yaml:"board" json:"board,omitempty"`
	Line    string            `yaml:"line" json:"line,omitempty"`
	Address int               `yaml:"address" json:"address,omitempty"`
	Group   int               `yaml:"group" json:"group,omitempty"`
	Labels  map[string]string `yaml:"labels" json:"labels,omitempty"`
	Values  *Values           `yaml:"values" json:"values,omitempty"`
}

// Strategy is how an apply goes over the fleet: boards in waves of
// WaveSize, at most MaxInFlight at once, pausing when the failed share
// of the finished boards reaches FailureThreshold (after MinSample).
type Strategy struct {
	WaveSize         int     `yaml:"wave_size" json:"wave_size,omitempty"`
	MaxInFlight      int     `yaml:"max_in_flight" json:"max_in_flight,omitempty"`
	FailureThreshold float64 `yaml:"failure_threshold" json:"failure_threshold,omitempty"`
	MinSample        int     `yaml:"min_sample" json:"min_sample,omitempty"`
	// Window, when set, is when the apply may start boards: the
	// rollouts' window (a daily window on some weekdays in the
	// installation's time zone, and/or explicit intervals). Outside it
	// no new board starts and boards already applying finish; an apply
	// restarts no board, so every window is strict for it.
	Window *rollout.Window `yaml:"window" json:"window,omitempty"`
}

// Parse reads a description (YAML, or JSON, which is YAML too) strictly:
// unknown keys, values of the wrong type, keys given twice, anchors and
// several documents are refused, and so is a description that does not
// hold together (Check). Every problem is reported with file:line:column
// in a *ParseError. Content files are not read here (see Load).
func Parse(file string, data []byte) (*Description, error) {
	perr := &ParseError{File: file}
	if len(data) > MaxDescription {
		perr.Problems = append(perr.Problems, Problem{Msg: fmt.Sprintf("larger than %d bytes", MaxDescription)})
		return nil, perr
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			perr.Problems = append(perr.Problems, Problem{Msg: "empty: want a description"})
		} else {
			perr.Problems = append(perr.Problems, yamlProblem(err))
		}
		return nil, perr
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		perr.Problems = append(perr.Problems, Problem{Pos{extra.Line, extra.Column}, "a second document: want one description per file"})
		return nil, perr
	} else if !errors.Is(err, io.EOF) {
		perr.Problems = append(perr.Problems, yamlProblem(err))
		return nil, perr
	}
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	d := &Description{file: file}
	dc := &decoder{pos: map[string]Pos{}}
	dc.decode(n, reflect.ValueOf(d).Elem(), "")
	d.pos = dc.pos
	if len(dc.problems) == 0 {
		dc.problems = d.check()
	}
	if len(dc.problems) > 0 {
		sortProblems(dc.problems)
		perr.Problems = dc.problems
		return nil, perr
	}
	return d, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlProblem turns a YAML syntax error into a problem at its line.
func yamlProblem(err error) Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscanf(m[1], "%d", &line)
		return Problem{Pos{line, 1}, "syntax: " + m[2]}
	}
	return Problem{Msg: "syntax: " + strings.TrimPrefix(msg, "yaml: ")}
}

// at is where path was written (the key of a map entry when asked with
// the "#key" suffix and known), or the nearest enclosing place.
func (d *Description) at(path string) Pos {
	for p := path; ; {
		if pos, ok := d.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return Pos{}
		}
		p = p[:i]
	}
}

// File is the name the description was parsed from.
func (d *Description) File() string { return d.file }

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	shaRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	thenWords = []string{"", "stay", "restore", "off"}
)

// CheckBoardPath applies the board's path rules to a file path.
func CheckBoardPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/") || p == "/":
		return fmt.Errorf("%q: a file path starts with / and names a file", p)
	case len(p) > MaxPathLen:
		return fmt.Errorf("%q: longer than %d bytes", p, MaxPathLen)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("%q: ends with /", p)
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch {
		case seg == "" || seg == "." || seg == "..":
			return fmt.Errorf("%q: empty, . and .. segments are not allowed", p)
		case len(seg) > MaxNameLen:
			return fmt.Errorf("%q: a name longer than %d bytes", p, MaxNameLen)
		case strings.HasSuffix(seg, ".part"):
			return fmt.Errorf("%q: names ending .part are the board's unfinished uploads", p)
		case strings.ContainsAny(seg, "\x00\\"):
			return fmt.Errorf("%q: NUL and backslash are not allowed", p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("%q: not a clean path", p)
	}
	return nil
}

// check finds what does not hold together in a decoded description.
func (d *Description) check() []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{d.at(path), fmt.Sprintf(format, args...)})
	}
	if d.Version != Version {
		add("version", "version: want %d, got %d", Version, d.Version)
	}
	for _, name := range slices.Sorted(maps.Keys(d.Content)) {
		c := d.Content[name]
		p := join("content", name)
		if !nameRE.MatchString(name) {
			add(p+"#key", "content %q: a name is 1-63 of A-Z a-z 0-9 . _ - starting with a letter or digit", name)
		}
		if c.File == "" && c.SHA256 == "" {
			add(p, "content %q: give file (a local path) or sha256 (content already in the gateway)", name)
		}
		if c.SHA256 != "" && !shaRE.MatchString(c.SHA256) {
			add(join(p, "sha256"), "content %q: sha256 must be 64 lowercase hex digits", name)
		}
	}
	if len(d.Profiles) == 0 {
		add("profiles", "profiles: at least one profile is needed")
	}
	for _, pname := range slices.Sorted(maps.Keys(d.Profiles)) {
		ps = append(ps, d.checkProfile(pname, d.Profiles[pname])...)
	}
	for i, a := range d.Assignments {
		p := fmt.Sprintf("assignments[%d]", i)
		ways := 0
		if a.Board != "" {
			ways++
		}
		if a.Address != 0 || a.Line != "" {
			ways++
			if a.Address < 1 || a.Address > 223 {
				add(join(p, "address"), "%s: address must be 1-223 (with line)", p)
			}
		}
		if a.Group != 0 {
			ways++
			if a.Group < 1 || a.Group > 31 {
				add(join(p, "group"), "%s: group must be 1-31", p)
			}
		}
		if len(a.Labels) > 0 {
			ways++
		}
		if ways != 1 {
			add(p, "%s: select boards one way: board, line and address, group, or labels (got %d)", p, ways)
		}
		if a.Profile == "" && a.Values == nil {
			add(p, "%s: give a profile, values, or both", p)
		}
		if a.Profile != "" {
			if _, ok := d.Profiles[a.Profile]; !ok {
				add(join(p, "profile"), "%s: no profile %q", p, a.Profile)
			}
		}
		if a.Values != nil {
			ps = append(ps, d.checkValues(join(p, "values"), a.Values.Settings, a.Values.Servos, a.Values.Link)...)
		}
	}
	if d.Rollout != nil {
		r := d.Rollout
		if r.WaveSize < 0 || r.MaxInFlight < 0 || r.MinSample < 0 {
			add("rollout", "rollout: sizes must not be negative")
		}
		if r.FailureThreshold < 0 || r.FailureThreshold > 1 {
			add("rollout.failure_threshold", "rollout.failure_threshold: a share from 0 to 1")
		}
		if r.Window != nil {
			if err := r.Window.Check(); err != nil {
				add("rollout.window", "rollout.window: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
			}
		}
	}
	ps = append(ps, d.checkSections()...)
	return ps
}

func (d *Description) checkProfile(pname string, pr Profile) []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{d.at(path), fmt.Sprintf(format, args...)})
	}
	p := join("profiles", pname)
	if !nameRE.MatchString(pname) {
		add(p+"#key", "profile %q: a name is 1-63 of A-Z a-z 0-9 . _ -", pname)
	}
	for _, fp := range slices.Sorted(maps.Keys(pr.Files)) {
		fpp := join(join(p, "files"), fp)
		if err := CheckBoardPath(fp); err != nil {
			add(fpp+"#key", "%s: %v", p, err)
		}
		if _, ok := d.Content[pr.Files[fp]]; !ok {
			add(fpp, "%s: file %s: no content %q", p, fp, pr.Files[fp])
		}
		// A file may not sit where the profile needs a directory.
		for other := range pr.Files {
			if strings.HasPrefix(other, fp+"/") {
				add(fpp+"#key", "%s: %s is a file and a directory of %s", p, fp, other)
			}
		}
	}
	if len(pr.Scenes) > MaxScenes {
		add(join(p, "scenes"), "%s: %d scenes; a board keeps at most %d", p, len(pr.Scenes), MaxScenes)
	}
	slots := map[int]string{}
	for _, sname := range slices.Sorted(maps.Keys(pr.Scenes)) {
		s := pr.Scenes[sname]
		sp := join(join(p, "scenes"), sname)
		if !nameRE.MatchString(sname) {
			add(sp+"#key", "scene %q: a name is 1-63 of A-Z a-z 0-9 . _ -", sname)
		}
		if s.Slot != nil {
			if *s.Slot < 1 || *s.Slot > 255 {
				add(join(sp, "slot"), "scene %s: slot must be 1-255", sname)
			} else if other, ok := slots[*s.Slot]; ok {
				add(join(sp, "slot"), "scene %s: slot %d is also scene %s's", sname, *s.Slot, other)
			} else {
				slots[*s.Slot] = sname
			}
		}
		if !slices.Contains(thenWords, s.Then) {
			add(join(sp, "then"), "scene %s: then must be stay, restore or off", sname)
		}
		if s.DurationS != nil && *s.DurationS <= 0 {
			add(join(sp, "duration_s"), "scene %s: duration_s must be above 0", sname)
		}
		if s.Screen != nil && s.Screen.Path != nil {
			if _, ok := pr.Files[*s.Screen.Path]; !ok {
				add(join(sp, "screen.path"), "scene %s shows %s, which profile %s does not list under files", sname, *s.Screen.Path, pname)
			}
		}
		if s.Screen != nil && s.Screen.Loops != nil && (*s.Screen.Loops < 1 || *s.Screen.Loops > 10000) {
			add(join(sp, "screen.loops"), "scene %s: loops must be 1-10000", sname)
		}
		if s.LEDs != nil && s.LEDs.Brightness != nil && (*s.LEDs.Brightness < 1 || *s.LEDs.Brightness > 100) {
			add(join(sp, "leds.brightness"), "scene %s: brightness must be 1-100", sname)
		}
		if s.Holo != nil && s.Holo.Motion == "" {
			add(join(sp, "holo"), "scene %s: holo needs a motion", sname)
		}
	}
	ps = append(ps, d.checkValues(p, pr.Settings, pr.Servos, pr.Link)...)
	if pr.Settings != nil && pr.Settings.BootScene != nil && !pr.Settings.BootScene.Null {
		if _, ok := pr.Scenes[pr.Settings.BootScene.Value]; !ok {
			add(join(p, "settings.boot_scene"), "%s: boot_scene %q is not one of the profile's scenes", p, pr.Settings.BootScene.Value)
		}
	}
	return ps
}

func (d *Description) checkValues(p string, st *Settings, servos map[string]Servo, l *Link) []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{d.at(path), fmt.Sprintf(format, args...)})
	}
	if st != nil {
		if st.Screen != nil && st.Screen.Backlight != nil && (*st.Screen.Backlight < 0 || *st.Screen.Backlight > 100) {
			add(join(p, "settings.screen.backlight"), "backlight must be 0-100")
		}
		if st.LEDs != nil && st.LEDs.Brightness != nil && (*st.LEDs.Brightness < 0 || *st.LEDs.Brightness > 100) {
			add(join(p, "settings.leds.brightness"), "LED brightness must be 0-100")
		}
		if st.LEDs != nil && st.LEDs.Count != nil && (*st.LEDs.Count < 1 || *st.LEDs.Count > 1024) {
			add(join(p, "settings.leds.count"), "LED count must be 1-1024")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(servos)) {
		s := servos[id]
		sp := join(join(p, "servos"), id)
		if id == "all" || !nameRE.MatchString(id) {
			add(sp+"#key", "servo %q: not a servo id", id)
		}
		if c := s.Calibration; c != nil && (c.MinUS < 500 || c.MaxUS > 2500 || c.MinUS == c.MaxUS) {
			add(join(sp, "calibration"), "servo %s: min_us and max_us must differ, within 500-2500", id)
		}
	}
	if l != nil {
		if l.Address != nil && (*l.Address < 1 || *l.Address > 223) {
			add(join(p, "link.address"), "link address must be 1-223")
		}
		if len(l.Groups) > 8 {
			add(join(p, "link.groups"), "at most 8 link groups")
		}
		for i, g := range l.Groups {
			if g < 1 || g > 31 {
				add(fmt.Sprintf("%s.link.groups[%d]", p, i), "link groups are 1-31")
			}
		}
	}
	return ps
}

// JSON is the description as canonical JSON (what a revision stores).
func (d *Description) JSON() []byte {
	b, _ := json.Marshal(d)
	return b
}

// FromJSON reads a description stored as JSON by JSON (a revision), with
// the same checks as Parse.
func FromJSON(name string, b []byte) (*Description, error) {
	return Parse(name, b)
}
