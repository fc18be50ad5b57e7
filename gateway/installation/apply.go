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
	"time"
)

// ErrNeedsLAN: the board is reached only over a line and lacks files
// that only the LAN can carry; scenes and settings that need none of
// them were applied.
var ErrNeedsLAN = errors.New("installation: files need the LAN")

// StepFunc is told of each step of an apply as it is about to be done
// (for progress, the audit log, and tests that cut a board off).
type StepFunc func(board, step, what string)

// Steps an apply reports.
const (
	StepUpload      = "upload"
	StepSaveScene   = "save_scene"
	StepRemoveScene = "remove_scene"
	StepSettings    = "settings"
	StepServo       = "servo"
	StepLink        = "link"
	StepRemoveFile  = "remove_file"
)

// apply carries out d on the board in the safe order (see the package
// doc). save is called with the written record once the files are up
// (or the first failed), and at the end.
func (c *boardClient) apply(ctx context.Context, t Target, d *Diff, contents *Contents, save func(Written) error, step StepFunc) error {
	if step == nil {
		step = func(string, string, string) {}
	}
	w := Written{Files: maps.Clone(d.seen.Files)}
	if w.Files == nil {
		w.Files = map[string]WrittenFile{}
	}
	missing := map[string]bool{}
	// 1. Files, each whole or not at all.
	for _, f := range d.Files {
		if f.Op == OpRemove {
			continue
		}
		if d.FilesNeedLAN {
			missing[f.Path] = true
			continue
		}
		step(t.Board, StepUpload, f.Path)
		e, err := c.upload(ctx, f, contents)
		if err != nil {
			_ = save(w)
			return fmt.Errorf("uploading %s: %w", f.Path, err)
		}
		w.Files[f.Path] = WrittenFile{Size: e.Size, SHA256: f.SHA256, MTime: e.MTime}
	}
	// One write for every file that landed (a board cut off before this
	// line has its new files hashed by the next plan, then remembered).
	if err := save(w); err != nil {
		return err
	}
	// 2. Scenes, once every file they name is there.
	slots := maps.Clone(d.sceneSlots)
	saving := map[string]*Scene{}
	removing := map[string]bool{}
	for _, s := range d.Scenes {
		if s.Op == OpSave {
			saving[s.Name] = s.Scene
		} else {
			removing[s.Name] = true
		}
	}
	var deferred []string
	for _, s := range d.Scenes {
		if s.Op != OpSave {
			continue
		}
		if s.Scene.Screen != nil && s.Scene.Screen.Path != nil && missing[*s.Scene.Screen.Path] {
			deferred = append(deferred, s.Name)
			continue
		}
		if s.Scene.Slot != nil {
			if holder, ok := slots[*s.Scene.Slot]; ok && holder != s.Name {
				if saving[holder] == nil && !removing[holder] {
					return fmt.Errorf("%w: saving scene %s: slot %d is held by scene %s, which the installation does not manage (remove it, or prune)",
						ErrBoard, s.Name, *s.Scene.Slot, holder)
				}
				// The holder is rewritten or removed anyway: free its slot.
				step(t.Board, StepRemoveScene, holder)
				if _, err := c.call(ctx, http.MethodDelete, "/scenes/scene?name="+url.QueryEscape(holder), nil); err != nil && !isCode(err, "unknown_scene") {
					return fmt.Errorf("freeing slot %d: %w", *s.Scene.Slot, err)
				}
				delete(slots, *s.Scene.Slot)
				removing[holder] = false
			}
		}
		step(t.Board, StepSaveScene, s.Name)
		if _, err := c.call(ctx, http.MethodPut, "/scenes/scene?name="+url.QueryEscape(s.Name), s.Scene); err != nil {
			return fmt.Errorf("saving scene %s: %w", s.Name, err)
		}
		for slot, name := range slots {
			if name == s.Name {
				delete(slots, slot)
			}
		}
		if s.Scene.Slot != nil {
			slots[*s.Scene.Slot] = s.Name
		}
	}
	// 3. Settings, servos, link.
	if err := c.applySettings(ctx, t, d, deferred, step); err != nil {
		return err
	}
	// 4. Removals: scenes first, then the files.
	for _, s := range d.Scenes {
		if s.Op != OpRemove || !removing[s.Name] {
			continue
		}
		step(t.Board, StepRemoveScene, s.Name)
		if _, err := c.call(ctx, http.MethodDelete, "/scenes/scene?name="+url.QueryEscape(s.Name), nil); err != nil && !isCode(err, "unknown_scene") {
			return fmt.Errorf("removing scene %s: %w", s.Name, err)
		}
	}
	for _, f := range d.Files {
		if f.Op != OpRemove {
			continue
		}
		step(t.Board, StepRemoveFile, f.Path)
		if _, err := c.call(ctx, http.MethodDelete, "/fs/entry?path="+url.QueryEscape(f.Path), nil); err != nil && !isCode(err, "not_found") {
			_ = save(w)
			return fmt.Errorf("removing %s: %w", f.Path, err)
		}
		delete(w.Files, f.Path)
	}
	if len(missing) > 0 {
		_ = save(w)
		return fmt.Errorf("%w: %d files missing on a board reached only over a line (scenes waiting: %v)", ErrNeedsLAN, len(missing), deferred)
	}
	return save(w)
}

// upload sends one file with its SHA-256: the board keeps it only whole
// and matching.
func (c *boardClient) upload(ctx context.Context, f FileChange, contents *Contents) (boardEntry, error) {
	path := "/fs/file?overwrite=true&parents=true&sha256=" + f.SHA256 + "&path=" + url.QueryEscape(f.Path)
	for attempt := 0; ; attempt++ {
		fh, size, err := contents.Open(f.SHA256)
		if err != nil {
			return boardEntry{}, err
		}
		c.n++
		rep, err := c.f.CallRaw(ctx, c.id, http.MethodPut, path, "application/octet-stream", fh, size)
		fh.Close()
		if err != nil {
			return boardEntry{}, wrapUnreachable(err)
		}
		if rep.Status >= 400 {
			berr := boardErr(http.MethodPut, "/fs/file", rep)
			if isCode(berr, "busy") && attempt < 20 {
				if err := c.sleep(ctx, time.Duration(50<<min(attempt, 4))*time.Millisecond); err != nil {
					return boardEntry{}, err
				}
				continue
			}
			return boardEntry{}, berr
		}
		var e boardEntry
		if err := json.Unmarshal(rep.Body, &e); err != nil {
			return boardEntry{}, fmt.Errorf("%w: PUT /fs/file: %v", ErrBoard, err)
		}
		return e, nil
	}
}

// applySettings sends the settings, servo and link changes of d. A boot
// scene deferred (its file is missing) is not set yet.
func (c *boardClient) applySettings(ctx context.Context, t Target, d *Diff, deferred []string, step StepFunc) error {
	patch := map[string]any{}
	screen, leds := map[string]any{}, map[string]any{}
	var servoCal, servoPol []string
	link := map[string]any{}
	for _, ch := range d.Settings {
		switch ch.Field {
		case "settings.boot_scene":
			if bs := t.Settings.BootScene; bs != nil && !bs.Null && slices.Contains(deferred, bs.Value) {
				continue
			}
			patch["boot_scene"] = ch.To
		case "settings.screen.backlight":
			screen["backlight"] = ch.To
		case "settings.leds.brightness":
			leds["brightness"] = ch.To
		case "settings.leds.count":
			leds["count"] = ch.To
		case "link.address":
			link["address"] = ch.To
		case "link.groups":
			link["groups"] = ch.To
		default:
			var id, what string
			if n, _ := fmt.Sscanf(splitDots(ch.Field), "servos %s %s", &id, &what); n == 2 {
				if what == "calibration" {
					servoCal = append(servoCal, id)
				} else {
					servoPol = append(servoPol, id)
				}
			}
		}
	}
	if len(screen) > 0 {
		patch["screen"] = screen
	}
	if len(leds) > 0 {
		patch["leds"] = leds
	}
	if len(patch) > 0 {
		step(t.Board, StepSettings, "")
		if _, err := c.call(ctx, http.MethodPatch, "/settings", patch); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
	}
	for _, id := range servoCal {
		step(t.Board, StepServo, id+" calibration")
		if _, err := c.call(ctx, http.MethodPut, "/servos/calibration?id="+url.QueryEscape(id), t.Servos[id].Calibration); err != nil {
			return fmt.Errorf("servo %s calibration: %w", id, err)
		}
	}
	for _, id := range servoPol {
		step(t.Board, StepServo, id+" policy")
		if _, err := c.call(ctx, http.MethodPut, "/servos/policy?id="+url.QueryEscape(id), t.Servos[id].Policy); err != nil {
			return fmt.Errorf("servo %s policy: %w", id, err)
		}
	}
	if len(link) > 0 {
		step(t.Board, StepLink, "")
		if _, err := c.call(ctx, http.MethodPatch, "/link", link); err != nil {
			return fmt.Errorf("link settings: %w", err)
		}
	}
	return nil
}

// splitDots turns "servos.pan.calibration" into "servos pan calibration".
func splitDots(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '.' {
			b[i] = ' '
		}
	}
	return string(b)
}
