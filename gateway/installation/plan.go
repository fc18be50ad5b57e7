package installation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Fleet is what the package needs of the fleet core (*fleet.Fleet).
type Fleet = fleet.Caller

// StateCache is the fleet's copy of each board's reported states
// (*fleet.Fleet has one). A copy that already shows what is wanted saves
// a request; one that does not is checked with a fresh GET.
type StateCache interface {
	State(id, kind string) (json.RawMessage, bool)
}

// Written is what the gateway remembers writing to a board.
type Written struct {
	Files map[string]WrittenFile `json:"files"`
}

// WrittenFile is one file as written: its size and SHA-256, and the
// mtime the board reported for it.
type WrittenFile struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	MTime  string `json:"mtime"`
}

// File operations of a plan.
const (
	OpAdd     = "add"
	OpReplace = "replace"
	OpRemove  = "remove"
	OpSave    = "save"
	OpSet     = "set"
)

// FileChange is one file to change on a board.
type FileChange struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// Why says what was seen: "absent", "size 10 on the board, want 12",
	// "content differs", "not in the profile".
	Why string `json:"why,omitempty"`
}

// SceneChange is one saved scene to save or remove.
type SceneChange struct {
	Op   string `json:"op"`
	Name string `json:"name"`
	Why  string `json:"why,omitempty"`
	// Scene is the scene to save (nil for a removal).
	Scene *Scene `json:"scene,omitempty"`
}

// FieldChange is one setting to set: its dotted name, what the board
// has and what is wanted, as JSON.
type FieldChange struct {
	Field string          `json:"field"`
	From  json.RawMessage `json:"from"`
	To    json.RawMessage `json:"to"`
}

// Diff is what applying a target would change on one board. It is
// empty when the board is in sync.
type Diff struct {
	Board   string        `json:"board"`
	Profile string        `json:"profile"`
	Files   []FileChange  `json:"files,omitempty"`
	Scenes  []SceneChange `json:"scenes,omitempty"`
	// Settings, Servos and Link: fields named settings.boot_scene,
	// servos.pan.calibration, link.address ...
	Settings []FieldChange `json:"settings,omitempty"`
	// FilesNeedLAN is set for a board reached only over a line: its
	// files were checked by size only (GET /media/info) and cannot be
	// written; missing ones wait for the LAN.
	FilesNeedLAN bool `json:"files_need_lan,omitempty"`
	// Requests is how many board requests the plan took.
	Requests int `json:"requests"`

	// seen is the written record with what the plan confirmed (files
	// hashed and found right, with the board's mtime).
	seen Written
	// sceneSlots maps each slot saved on the board to its scene.
	sceneSlots map[int]string
}

// Empty reports whether the board is in sync.
func (d *Diff) Empty() bool {
	return len(d.Files) == 0 && len(d.Scenes) == 0 && len(d.Settings) == 0
}

// Summary is a one-line description of the diff.
func (d *Diff) Summary() string {
	if d.Empty() {
		if d.FilesNeedLAN {
			return "in sync (over the line: files checked by size only)"
		}
		return "in sync"
	}
	var parts []string
	count := func(what string, n int) {
		if n > 0 {
			if n > 1 {
				what = strings.Replace(what, "file ", "files ", 1)
				what = strings.Replace(what, "scene ", "scenes ", 1)
				what = strings.Replace(what, "setting ", "settings ", 1)
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	var add, rep, rm int
	for _, f := range d.Files {
		switch f.Op {
		case OpAdd:
			add++
		case OpReplace:
			rep++
		case OpRemove:
			rm++
		}
	}
	count("file to add", add)
	count("file to replace", rep)
	count("file to remove", rm)
	var save, drop int
	for _, sc := range d.Scenes {
		if sc.Op == OpRemove {
			drop++
		} else {
			save++
		}
	}
	count("scene to save", save)
	count("scene to remove", drop)
	count("setting to change", len(d.Settings))
	if d.FilesNeedLAN {
		parts = append(parts, "files need the LAN")
	}
	return strings.Join(parts, ", ")
}

// boardClient runs one board's requests and counts them.
type boardClient struct {
	f     Fleet
	cache StateCache
	id    string
	n     int
	// busyWait is how long a 409 busy is retried.
	busyWait time.Duration
	sleep    func(context.Context, time.Duration) error
}

// BoardError is a board's refusal of a request.
type BoardError struct {
	Method, Path string
	Status       int
	Code, Msg    string
}

func (e *BoardError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Msg)
}

// Unwrap makes errors.Is(err, ErrBoard) true.
func (e *BoardError) Unwrap() error { return ErrBoard }

func boardErr(method, path string, rep fleet.Reply) error {
	var be boardapi.Error
	e := &BoardError{Method: method, Path: path, Status: rep.Status}
	if json.Unmarshal(rep.Body, &be) == nil {
		e.Code, e.Msg = be.Code, be.Message
	} else {
		e.Msg = strings.TrimSpace(string(rep.Body))
	}
	return e
}

func isCode(err error, code string) bool {
	var be *BoardError
	return errors.As(err, &be) && be.Code == code
}

func wrapUnreachable(err error) error {
	if errors.Is(err, fleet.ErrUnreachable) || errors.Is(err, fleet.ErrUnknownBoard) || errors.Is(err, fleet.ErrNoReply) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// call runs one request; a 409 busy (another long operation on the
// board) is tried again for up to busyWait. Statuses of 400 and more are
// *BoardError.
func (c *boardClient) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(c.busyWait)
	for wait := 20 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		c.n++
		rep, err := c.f.Call(ctx, c.id, method, path, raw)
		if err != nil {
			return nil, wrapUnreachable(err)
		}
		if rep.Status < 400 {
			return rep.Body, nil
		}
		err = boardErr(method, path, rep)
		if !isCode(err, "busy") || time.Now().After(deadline) {
			return nil, err
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// state reads kind (at path) from the cache when good says it shows
// what is wanted, else from the board.
func (c *boardClient) state(ctx context.Context, kind, path string, v any, good func() bool) error {
	if c.cache != nil {
		if s, ok := c.cache.State(c.id, kind); ok && json.Unmarshal(s, v) == nil && good() {
			return nil
		}
	}
	b, err := c.call(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrBoard, path, err)
	}
	return nil
}

// boardEntry is an entry of GET /fs/list.
type boardEntry struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	MTime  string `json:"mtime"`
	SHA256 string `json:"sha256,omitempty"`
}

type boardScenes struct {
	Scenes []json.RawMessage `json:"scenes"`
}

type boardSettings struct {
	BootScene *string `json:"boot_scene"`
	Screen    struct {
		Backlight int `json:"backlight"`
	} `json:"screen"`
	LEDs struct {
		Brightness int `json:"brightness"`
		Count      int `json:"count"`
	} `json:"leds"`
}

type boardServo struct {
	ID         string `json:"id"`
	Calibrated bool   `json:"calibrated"`
	MinUS      int    `json:"min_us"`
	MaxUS      int    `json:"max_us"`
	Policy     Policy `json:"policy"`
}

// canonScene is a scene in one canonical JSON form ("stay" is the
// default of then), for comparing what is saved with what is wanted.
func canonScene(s Scene) string {
	if s.Then == "stay" {
		s.Then = ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func js(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Plan compares the target with what the board holds and what the
// gateway remembers writing there (rec), and returns what an apply would
// change. It changes nothing on the board.
func (c *boardClient) plan(ctx context.Context, t Target, rec Written) (*Diff, error) {
	d := &Diff{Board: t.Board, Profile: t.Profile, seen: Written{Files: map[string]WrittenFile{}}, sceneSlots: map[int]string{}}
	for p, w := range rec.Files {
		d.seen.Files[p] = w
	}
	if err := c.planFiles(ctx, t, rec, d); err != nil {
		return d, err
	}
	if err := c.planScenes(ctx, t, d); err != nil {
		return d, err
	}
	if err := c.planSettings(ctx, t, d); err != nil {
		return d, err
	}
	d.Requests = c.n
	return d, nil
}

func (c *boardClient) planFiles(ctx context.Context, t Target, rec Written, d *Diff) error {
	dirs := t.Dirs()
	if t.Prune {
		for p := range rec.Files {
			if _, ok := t.Files[p]; !ok && !slices.Contains(dirs, parent(p)) {
				dirs = append(dirs, parent(p))
			}
		}
		slices.Sort(dirs)
	}
	listed := map[string]boardEntry{} // path -> entry
	for _, dir := range dirs {
		b, err := c.call(ctx, http.MethodGet, "/fs/list?path="+url.QueryEscape(dir), nil)
		if errors.Is(err, fleet.ErrNotOverLink) {
			d.FilesNeedLAN = true
			return c.planLineFiles(ctx, t, d)
		}
		if isCode(err, "not_found") {
			continue // the directory is not there: every file in it is missing
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		var l struct {
			Entries []boardEntry `json:"entries"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("%w: GET /fs/list: %v", ErrBoard, err)
		}
		for _, e := range l.Entries {
			if e.Path == "" {
				e.Path = strings.TrimSuffix(dir, "/") + "/" + e.Name
			}
			listed[e.Path] = e
		}
	}
	for _, p := range slices.Sorted(maps.Keys(t.Files)) {
		want := t.Files[p]
		e, ok := listed[p]
		switch {
		case !ok:
			delete(d.seen.Files, p)
			d.Files = append(d.Files, FileChange{Op: OpAdd, Path: p, SHA256: want.SHA256, Size: want.Size, Why: "absent"})
			continue
		case e.Type != "file":
			d.Files = append(d.Files, FileChange{Op: OpReplace, Path: p, SHA256: want.SHA256, Size: want.Size, Why: "a directory is in the way"})
			continue
		case e.Size != want.Size:
			delete(d.seen.Files, p)
			d.Files = append(d.Files, FileChange{Op: OpReplace, Path: p, SHA256: want.SHA256, Size: want.Size,
				Why: fmt.Sprintf("size %d on the board, want %d", e.Size, want.Size)})
			continue
		}
		if w, ok := rec.Files[p]; ok && w.SHA256 == want.SHA256 && w.Size == e.Size && w.MTime == e.MTime {
			continue // as written: not hashed again
		}
		b, err := c.call(ctx, http.MethodGet, "/fs/entry?sha256=true&path="+url.QueryEscape(p), nil)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", p, err)
		}
		var he boardEntry
		if err := json.Unmarshal(b, &he); err != nil {
			return fmt.Errorf("%w: GET /fs/entry: %v", ErrBoard, err)
		}
		if he.SHA256 == want.SHA256 {
			d.seen.Files[p] = WrittenFile{Size: he.Size, SHA256: he.SHA256, MTime: he.MTime}
			continue
		}
		delete(d.seen.Files, p)
		d.Files = append(d.Files, FileChange{Op: OpReplace, Path: p, SHA256: want.SHA256, Size: want.Size, Why: "content differs"})
	}
	if t.Prune {
		for _, p := range slices.Sorted(maps.Keys(listed)) {
			e := listed[p]
			if _, ok := t.Files[p]; ok || e.Type != "file" {
				continue
			}
			d.Files = append(d.Files, FileChange{Op: OpRemove, Path: p, Size: e.Size, Why: "not in the profile"})
		}
	}
	return nil
}

// planLineFiles checks, on a board reached only over a line, which of
// the target's files are there: GET /media/info (served over the link)
// gives a playable file's size; a file that is there but not playable
// answers 422. Contents cannot be hashed over the line.
func (c *boardClient) planLineFiles(ctx context.Context, t Target, d *Diff) error {
	for _, p := range slices.Sorted(maps.Keys(t.Files)) {
		want := t.Files[p]
		b, err := c.call(ctx, http.MethodGet, "/media/info?path="+url.QueryEscape(p), nil)
		switch {
		case isCode(err, "not_playable"):
			continue
		case isCode(err, "not_found"):
			d.Files = append(d.Files, FileChange{Op: OpAdd, Path: p, SHA256: want.SHA256, Size: want.Size, Why: "absent (files need the LAN)"})
			continue
		case err != nil:
			return fmt.Errorf("checking %s: %w", p, err)
		}
		var info struct {
			Size int64 `json:"size"`
		}
		if json.Unmarshal(b, &info) == nil && info.Size != want.Size {
			d.Files = append(d.Files, FileChange{Op: OpReplace, Path: p, SHA256: want.SHA256, Size: want.Size,
				Why: fmt.Sprintf("size %d on the board, want %d (files need the LAN)", info.Size, want.Size)})
		}
	}
	return nil
}

func (c *boardClient) planScenes(ctx context.Context, t Target, d *Diff) error {
	// The wanted scenes in canonical form, once; the board's decoded once
	// per reply (a re-apply plans every board from the fleet's copy, and
	// decoding was most of the gateway's own time in it).
	want := make(map[string]string, len(t.Scenes))
	for name, s := range t.Scenes {
		want[name] = canonScene(s)
	}
	have := map[string]string{}
	var bs boardScenes
	parse := func() {
		clear(have)
		clear(d.sceneSlots)
		for _, raw := range bs.Scenes {
			var s struct {
				Name string `json:"name"`
				Scene
			}
			if json.Unmarshal(raw, &s) != nil {
				continue
			}
			have[s.Name] = canonScene(s.Scene)
			if s.Slot != nil {
				d.sceneSlots[*s.Slot] = s.Name
			}
		}
	}
	parsed := false // have is bs's
	good := func() bool {
		parse()
		parsed = true
		for name, w := range want {
			if have[name] != w {
				parsed = false // a GET follows and replaces bs
				return false
			}
		}
		if t.Prune && len(have) != len(t.Scenes) {
			parsed = false
			return false
		}
		return true
	}
	if err := c.state(ctx, "scenes", "/scenes", &bs, good); err != nil {
		return fmt.Errorf("reading scenes: %w", err)
	}
	if !parsed {
		parse()
	}
	for _, name := range slices.Sorted(maps.Keys(t.Scenes)) {
		s := t.Scenes[name]
		cur, ok := have[name]
		switch {
		case !ok:
			d.Scenes = append(d.Scenes, SceneChange{Op: OpSave, Name: name, Why: "absent", Scene: &s})
		case cur != want[name]:
			d.Scenes = append(d.Scenes, SceneChange{Op: OpSave, Name: name, Why: "differs", Scene: &s})
		}
	}
	if t.Prune {
		for _, name := range slices.Sorted(maps.Keys(have)) {
			if _, ok := t.Scenes[name]; !ok {
				d.Scenes = append(d.Scenes, SceneChange{Op: OpRemove, Name: name, Why: "not in the profile"})
			}
		}
	}
	return nil
}

// settingChanges lists the managed settings that differ.
func settingChanges(want *Settings, have boardSettings) []FieldChange {
	if want == nil {
		return nil
	}
	var out []FieldChange
	if bs := want.BootScene; bs != nil {
		var w *string
		if !bs.Null {
			w = &bs.Value
		}
		if (w == nil) != (have.BootScene == nil) || (w != nil && *w != *have.BootScene) {
			out = append(out, FieldChange{"settings.boot_scene", js(have.BootScene), js(w)})
		}
	}
	if want.Screen != nil && want.Screen.Backlight != nil && *want.Screen.Backlight != have.Screen.Backlight {
		out = append(out, FieldChange{"settings.screen.backlight", js(have.Screen.Backlight), js(*want.Screen.Backlight)})
	}
	if want.LEDs != nil && want.LEDs.Brightness != nil && *want.LEDs.Brightness != have.LEDs.Brightness {
		out = append(out, FieldChange{"settings.leds.brightness", js(have.LEDs.Brightness), js(*want.LEDs.Brightness)})
	}
	if want.LEDs != nil && want.LEDs.Count != nil && *want.LEDs.Count != have.LEDs.Count {
		out = append(out, FieldChange{"settings.leds.count", js(have.LEDs.Count), js(*want.LEDs.Count)})
	}
	return out
}

func servoChanges(want map[string]Servo, have []boardServo) []FieldChange {
	var out []FieldChange
	for _, id := range slices.Sorted(maps.Keys(want)) {
		w := want[id]
		var h *boardServo
		for i := range have {
			if have[i].ID == id {
				h = &have[i]
			}
		}
		if w.Calibration != nil {
			var from any
			if h != nil && h.Calibrated {
				from = Calibration{MinUS: h.MinUS, MaxUS: h.MaxUS}
			}
			if h == nil || !h.Calibrated || h.MinUS != w.Calibration.MinUS || h.MaxUS != w.Calibration.MaxUS {
				out = append(out, FieldChange{"servos." + id + ".calibration", js(from), js(w.Calibration)})
			}
		}
		if w.Policy != nil && (h == nil || h.Policy != *w.Policy) {
			var from any
			if h != nil {
				from = h.Policy
			}
			out = append(out, FieldChange{"servos." + id + ".policy", js(from), js(w.Policy)})
		}
	}
	return out
}

func linkChanges(want *Link, have boardapi.LinkSettings) []FieldChange {
	if want == nil {
		return nil
	}
	var out []FieldChange
	if want.Address != nil && *want.Address != have.Address {
		out = append(out, FieldChange{"link.address", js(have.Address), js(*want.Address)})
	}
	if want.Groups != nil {
		w, h := slices.Sorted(slices.Values(want.Groups)), slices.Sorted(slices.Values(have.Groups))
		if !slices.Equal(w, h) {
			out = append(out, FieldChange{"link.groups", js(h), js(w)})
		}
	}
	return out
}

func (c *boardClient) planSettings(ctx context.Context, t Target, d *Diff) error {
	if t.Settings != nil {
		var have boardSettings
		if err := c.state(ctx, "settings", "/settings", &have, func() bool { return len(settingChanges(t.Settings, have)) == 0 }); err != nil {
			return fmt.Errorf("reading settings: %w", err)
		}
		d.Settings = append(d.Settings, settingChanges(t.Settings, have)...)
	}
	if len(t.Servos) > 0 && !d.FilesNeedLAN {
		var have struct {
			Servos []boardServo `json:"servos"`
		}
		b, err := c.call(ctx, http.MethodGet, "/servos", nil)
		if err != nil {
			return fmt.Errorf("reading servos: %w", err)
		}
		if err := json.Unmarshal(b, &have); err != nil {
			return fmt.Errorf("%w: GET /servos: %v", ErrBoard, err)
		}
		d.Settings = append(d.Settings, servoChanges(t.Servos, have.Servos)...)
	}
	if t.Link != nil {
		var have boardapi.LinkState
		if err := c.state(ctx, "link", "/link", &have, func() bool { return len(linkChanges(t.Link, have.Saved)) == 0 }); err != nil {
			return fmt.Errorf("reading link settings: %w", err)
		}
		d.Settings = append(d.Settings, linkChanges(t.Link, have.Saved)...)
	}
	return nil
}
