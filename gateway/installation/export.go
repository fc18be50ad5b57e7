package installation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// MaxExportFile is the largest file Export reads from a board (what the
// LAN driver takes in one reply).
const MaxExportFile = 8 << 20

// Export reads the boards the fleet reaches now into a description: every
// file on each board's volume (added to the content store, so a restore
// needs nothing else), its saved scenes, settings and servo calibration.
// Boards holding the same are given one profile; each board is assigned
// by its line address when it has one (a replacement at that address
// takes it), else by its id. What cannot be kept is listed in the
// warnings: a scene naming a file the board lacks is left out, and so is
// a file too large to read. Boards reached only over a line are exported
// without files. The gateway's DMX patch and cue lists are exported as
// the dmx and cuelists sections when their engines run (cuelists: [] when
// there is none, so a restore leaves none).
//
// In a cluster every gateway's boards are exported: this gateway reads
// the boards it owns, and asks each other gateway for its own (their
// files come through the cluster's content store).
func (in *Installer) Export(ctx context.Context) (*Description, []string, error) {
	x := newExportSet()
	d := x.d
	warnings := in.exportBoards(ctx, x)
	if in.o.Shared != nil {
		warn, err := in.exportOthers(ctx, x)
		if err != nil {
			return nil, warnings, err
		}
		warnings = append(warnings, warn...)
	}
	if len(d.Profiles) == 0 {
		return nil, warnings, fmt.Errorf("%w: no board could be exported", ErrNotFound)
	}
	in.exportSections(d)
	// The result must read back as any description does.
	back, err := Parse("export", d.JSON())
	if err != nil {
		return nil, warnings, err
	}
	return back, warnings, nil
}

// exportSet is an export being put together: boards holding the same
// are given one profile, files holding the same bytes one content.
type exportSet struct {
	d         *Description
	byContent map[string]string // sha -> content name
	profiles  map[string]string // canonical profile JSON -> name
}

func newExportSet() *exportSet {
	return &exportSet{d: &Description{Version: Version, Name: "export", Content: map[string]Content{}, Profiles: map[string]Profile{}},
		byContent: map[string]string{}, profiles: map[string]string{}}
}

// content names the content of sha (size bytes), from base when new.
func (x *exportSet) content(sha string, size int64, base string) string {
	name, ok := x.byContent[sha]
	if !ok {
		name = contentName(base, x.d.Content)
		x.byContent[sha] = name
		x.d.Content[name] = Content{SHA256: sha, Size: size}
	}
	return name
}

// add assigns pr to a board (a's profile is set here).
func (x *exportSet) add(pr Profile, a Assignment) {
	key := string(js(pr))
	name, ok := x.profiles[key]
	if !ok {
		name = fmt.Sprintf("profile-%d", len(x.profiles)+1)
		x.profiles[key] = name
		x.d.Profiles[name] = pr
	}
	a.Profile = name
	x.d.Assignments = append(x.d.Assignments, a)
}

// merge adds the boards of another gateway's export o.
func (x *exportSet) merge(o *Description) {
	for _, a := range o.Assignments {
		pr := o.Profiles[a.Profile]
		files := make(map[string]string, len(pr.Files))
		for p, cn := range pr.Files {
			c := o.Content[cn]
			files[p] = x.content(c.SHA256, c.Size, cn)
		}
		pr.Files = files
		x.add(pr, a)
	}
}

// exportBoards reads into x the boards this gateway owns (every board it
// reaches, alone) and returns the warnings.
func (in *Installer) exportBoards(ctx context.Context, x *exportSet) []string {
	views := in.o.Fleet.Boards(fleet.Filter{})
	slices.SortFunc(views, func(a, b fleet.BoardView) int { return strings.Compare(a.ID, b.ID) })
	var warnings []string
	for _, v := range views {
		if !in.owns(v.ID) {
			continue // its own gateway exports it
		}
		if !v.Online {
			warnings = append(warnings, fmt.Sprintf("board %s: offline, not exported", v.ID))
			continue
		}
		pr, warn, err := in.exportBoard(ctx, v, x)
		warnings = append(warnings, warn...)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("board %s: not exported: %v", v.ID, err))
			continue
		}
		a := Assignment{Board: v.ID}
		if v.Address != 0 {
			a = Assignment{Line: v.Line, Address: v.Address}
		}
		x.add(pr, a)
	}
	return warnings
}

func (in *Installer) exportBoard(ctx context.Context, v fleet.BoardView, x *exportSet) (Profile, []string, error) {
	c := in.client(v.ID)
	var warn []string
	pr := Profile{Files: map[string]string{}, Scenes: map[string]Scene{}}
	files, lineOnly, err := c.walk(ctx, "/")
	if err != nil {
		return Profile{}, nil, err
	}
	if lineOnly {
		warn = append(warn, fmt.Sprintf("board %s: reached only over a line: its files are not exported", v.ID))
	}
	for _, e := range files {
		if e.Size > MaxExportFile {
			warn = append(warn, fmt.Sprintf("board %s: %s: %d bytes, over the %d an export reads", v.ID, e.Path, e.Size, MaxExportFile))
			continue
		}
		b, err := c.call(ctx, http.MethodGet, "/fs/file?path="+url.QueryEscape(e.Path), nil)
		if err != nil {
			warn = append(warn, fmt.Sprintf("board %s: %s: %v", v.ID, e.Path, err))
			continue
		}
		sha, n, err := in.o.Contents.Add(bytes.NewReader(b), "")
		if err != nil {
			return Profile{}, warn, err
		}
		pr.Files[e.Path] = x.content(sha, n, path.Base(e.Path))
	}
	raw, err := c.call(ctx, http.MethodGet, "/scenes", nil)
	if err != nil {
		return Profile{}, warn, fmt.Errorf("reading scenes: %w", err)
	}
	var bs boardScenes
	if err := json.Unmarshal(raw, &bs); err != nil {
		return Profile{}, warn, fmt.Errorf("%w: GET /scenes: %v", ErrBoard, err)
	}
	for _, r := range bs.Scenes {
		var named struct {
			Name string `json:"name"`
		}
		var s Scene
		if json.Unmarshal(r, &named) != nil || json.Unmarshal(r, &s) != nil || !nameRE.MatchString(named.Name) {
			continue
		}
		if s.Screen != nil && s.Screen.Path != nil {
			if _, ok := pr.Files[*s.Screen.Path]; !ok {
				warn = append(warn, fmt.Sprintf("board %s: scene %s shows %s, which is not exported; scene left out", v.ID, named.Name, *s.Screen.Path))
				continue
			}
		}
		if s.Then == "stay" {
			s.Then = ""
		}
		pr.Scenes[named.Name] = s
	}
	raw, err = c.call(ctx, http.MethodGet, "/settings", nil)
	if err != nil {
		return Profile{}, warn, fmt.Errorf("reading settings: %w", err)
	}
	var set boardSettings
	if err := json.Unmarshal(raw, &set); err != nil {
		return Profile{}, warn, fmt.Errorf("%w: GET /settings: %v", ErrBoard, err)
	}
	boot := &NullString{Null: true}
	if set.BootScene != nil {
		if _, ok := pr.Scenes[*set.BootScene]; ok {
			boot = &NullString{Value: *set.BootScene}
		}
	}
	bl, br, cnt := set.Screen.Backlight, set.LEDs.Brightness, set.LEDs.Count
	pr.Settings = &Settings{BootScene: boot, Screen: &ScreenSettings{Backlight: &bl}, LEDs: &LEDSettings{Brightness: &br}}
	if cnt >= 1 {
		pr.Settings.LEDs.Count = &cnt
	}
	if !lineOnly {
		if raw, err := c.call(ctx, http.MethodGet, "/servos", nil); err == nil {
			var sv struct {
				Servos []boardServo `json:"servos"`
			}
			if json.Unmarshal(raw, &sv) == nil {
				for _, s := range sv.Servos {
					if s.Calibrated && nameRE.MatchString(s.ID) && s.ID != "all" {
						if pr.Servos == nil {
							pr.Servos = map[string]Servo{}
						}
						p := s.Policy
						pr.Servos[s.ID] = Servo{Calibration: &Calibration{MinUS: s.MinUS, MaxUS: s.MaxUS}, Policy: &p}
					}
				}
			}
		}
	}
	return pr, warn, nil
}

// walk lists every file under dir on the board, depth first. lineOnly
// is true when the board's files cannot be read (reached over a line).
func (c *boardClient) walk(ctx context.Context, dir string) ([]boardEntry, bool, error) {
	b, err := c.call(ctx, http.MethodGet, "/fs/list?path="+url.QueryEscape(dir), nil)
	if isNotOverLink(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("listing %s: %w", dir, err)
	}
	var l struct {
		Entries []boardEntry `json:"entries"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, false, fmt.Errorf("%w: GET /fs/list: %v", ErrBoard, err)
	}
	var out []boardEntry
	for _, e := range l.Entries {
		if e.Path == "" {
			e.Path = strings.TrimSuffix(dir, "/") + "/" + e.Name
		}
		switch {
		case e.Type == "dir":
			sub, _, err := c.walk(ctx, e.Path)
			if err != nil {
				return nil, false, err
			}
			out = append(out, sub...)
		case e.Type == "file" && CheckBoardPath(e.Path) == nil:
			out = append(out, e)
		}
	}
	return out, false, nil
}

// contentName makes a content name from a file name, unique in taken.
func contentName(base string, taken map[string]Content) string {
	var b strings.Builder
	for _, r := range strings.TrimSuffix(base, path.Ext(base)) {
		if r < 128 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := strings.TrimLeft(b.String(), "-_.")
	if name == "" {
		name = "file"
	}
	if len(name) > 50 {
		name = name[:50]
	}
	cand := name
	for i := 2; ; i++ {
		if _, ok := taken[cand]; !ok {
			return cand
		}
		cand = fmt.Sprintf("%s-%d", name, i)
	}
}

func isNotOverLink(err error) bool { return errors.Is(err, fleet.ErrNotOverLink) }
