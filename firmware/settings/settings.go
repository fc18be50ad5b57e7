// Package settings keeps the board's saved settings: the boot scene, the
// backlight and LED brightness applied at start, and the LED count.
//
// Saved settings describe how the board starts; they do not change what it
// is doing now (PATCH /screen and PATCH /leds do that). A new LED count
// waits for a restart, which the reply flags with restart_required.
package settings

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/holofleet/holofleet/firmware/api"
)

// Limits of the settings' values.
const (
	MaxLEDCount = 300
)

// Settings is the saved document and the reply of GET /settings.
type Settings struct {
	BootScene *string `json:"boot_scene"`
	Screen    Screen  `json:"screen"`
	LEDs      LEDs    `json:"leds"`
	// RestartRequired is true while a saved LED count differs from the
	// count the board runs with.
	RestartRequired bool `json:"restart_required,omitempty"`
}

// Screen holds the backlight applied at start, in percent.
type Screen struct {
	Backlight int `json:"backlight"`
}

// LEDs holds the LED brightness applied at start and the strip length.
type LEDs struct {
	Brightness int `json:"brightness"`
	Count      int `json:"count"`
}

// Defaults are the firmware defaults (DELETE /settings restores them).
func Defaults() Settings {
	return Settings{Screen: Screen{Backlight: 80}, LEDs: LEDs{Brightness: 30, Count: 24}}
}

// Patch is the body of PATCH /settings; absent fields are left alone.
type Patch struct {
	BootScene json.RawMessage `json:"boot_scene,omitempty"`
	Screen    *struct {
		Backlight *int `json:"backlight"`
	} `json:"screen,omitempty"`
	LEDs *struct {
		Brightness *int `json:"brightness"`
		Count      *int `json:"count"`
	} `json:"leds,omitempty"`
}

// Store keeps the saved document (a store.Bucket).
type Store interface {
	Get(key string, v any) (bool, error)
	Put(key string, v any) error
}

// Publisher receives state changes (the event hub).
type Publisher interface{ SetState(kind string, state any) }

// SceneChecker tells whether a scene name exists; boot_scene must name one.
type SceneChecker func(name string) bool

// Service serves and saves the settings.
type Service struct {
	store        Store
	pub          Publisher
	runningCount int
	sceneExists  SceneChecker

	mu  sync.RWMutex
	cur Settings
}

const storeKey = "settings"

// Load reads the saved settings (or the defaults). runningCount is filled
// in from the result by the board: the LED count it starts with.
func Load(st Store, pub Publisher) (*Service, error) {
	s := &Service{store: st, pub: pub, cur: Defaults()}
	if _, err := st.Get(storeKey, &s.cur); err != nil {
		return nil, fmt.Errorf("settings: load: %w", err)
	}
	s.cur.RestartRequired = false
	s.runningCount = s.cur.LEDs.Count
	return s, nil
}

// SetSceneChecker installs the check used for boot_scene.
func (s *Service) SetSceneChecker(f SceneChecker) { s.sceneExists = f }

// Get returns the saved settings with restart_required filled in.
func (s *Service) Get() Settings {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := s.cur
	out.RestartRequired = out.LEDs.Count != s.runningCount
	return out
}

// Apply validates and saves a patch; on error nothing changes.
func (s *Service) Apply(p Patch) (Settings, error) {
	s.mu.Lock()
	next := s.cur
	if p.BootScene != nil {
		if string(p.BootScene) == "null" {
			next.BootScene = nil
		} else {
			var name string
			if err := json.Unmarshal(p.BootScene, &name); err != nil {
				s.mu.Unlock()
				return Settings{}, api.Errorf(api.ErrBadRequest, "boot_scene must be a scene name or null")
			}
			if name == "" || (s.sceneExists != nil && !s.sceneExists(name)) {
				s.mu.Unlock()
				return Settings{}, api.Errorf(api.ErrBadRequest, "boot_scene %q is not a saved scene", name)
			}
			next.BootScene = &name
		}
	}
	if p.Screen != nil && p.Screen.Backlight != nil {
		if v := *p.Screen.Backlight; v < 0 || v > 100 {
			s.mu.Unlock()
			return Settings{}, api.Errorf(api.ErrBadRequest, "screen.backlight must be 0-100, not %d", v)
		}
		next.Screen.Backlight = *p.Screen.Backlight
	}
	if p.LEDs != nil && p.LEDs.Brightness != nil {
		if v := *p.LEDs.Brightness; v < 1 || v > 100 {
			s.mu.Unlock()
			return Settings{}, api.Errorf(api.ErrBadRequest, "leds.brightness must be 1-100, not %d", v)
		}
		next.LEDs.Brightness = *p.LEDs.Brightness
	}
	if p.LEDs != nil && p.LEDs.Count != nil {
		if v := *p.LEDs.Count; v < 1 || v > MaxLEDCount {
			s.mu.Unlock()
			return Settings{}, api.Errorf(api.ErrBadRequest, "leds.count must be 1-%d, not %d", MaxLEDCount, v)
		}
		next.LEDs.Count = *p.LEDs.Count
	}
	return s.commit(next)
}

// Reset restores the firmware defaults.
func (s *Service) Reset() (Settings, error) {
	s.mu.Lock()
	return s.commit(Defaults())
}

// commit saves next; s.mu is held and released here.
func (s *Service) commit(next Settings) (Settings, error) {
	next.RestartRequired = false
	if err := s.store.Put(storeKey, next); err != nil {
		s.mu.Unlock()
		return Settings{}, fmt.Errorf("settings: save: %w", err)
	}
	s.cur = next
	s.mu.Unlock()
	out := s.Get()
	if s.pub != nil {
		s.pub.SetState("settings", out)
	}
	return out, nil
}

// ClearBootScene forgets the boot scene when the scene it names is deleted.
func (s *Service) ClearBootScene(name string) error {
	s.mu.Lock()
	if s.cur.BootScene == nil || *s.cur.BootScene != name {
		s.mu.Unlock()
		return nil
	}
	next := s.cur
	next.BootScene = nil
	_, err := s.commit(next)
	return err
}

// Routes returns GET, PATCH and DELETE /settings.
func (s *Service) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/settings", Link: true, Summary: "Saved settings", Response: Settings{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, http.StatusOK, s.Get()) })},
		{Method: http.MethodPatch, Path: "/settings", Link: true, Summary: "Change saved settings", Request: Patch{}, Response: Settings{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var p Patch
				if err := api.Decode(r, &p, false); err != nil {
					api.WriteError(w, err)
					return
				}
				st, err := s.Apply(p)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, st)
			})},
		{Method: http.MethodDelete, Path: "/settings", Link: true, Summary: "Restore firmware defaults (scenes, calibration and networks are kept)", Response: Settings{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				st, err := s.Reset()
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, st)
			})},
	}
}
