package settings

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/firmware/api"
)

type memStore map[string][]byte

func (m memStore) Get(key string, v any) (bool, error) {
	b, ok := m[key]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (m memStore) Put(key string, v any) error {
	b, err := json.Marshal(v)
	m[key] = b
	return err
}

type pubRec struct{ kinds []string }

func (p *pubRec) SetState(kind string, _ any) { p.kinds = append(p.kinds, kind) }

func patch(t *testing.T, body string) Patch {
	t.Helper()
	var p Patch
	if err := api.DecodeBytes([]byte(body), &p, false); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

func TestApply(t *testing.T) {
	tests := []struct {
		name string
		body string
		want error
	}{
		{"backlight", `{"screen":{"backlight":0}}`, nil},
		{"backlight high", `{"screen":{"backlight":101}}`, api.ErrBadRequest},
		{"brightness zero", `{"leds":{"brightness":0}}`, api.ErrBadRequest},
		{"brightness", `{"leds":{"brightness":100}}`, nil},
		{"count zero", `{"leds":{"count":0}}`, api.ErrBadRequest},
		{"count max", `{"leds":{"count":300}}`, nil},
		{"count over", `{"leds":{"count":301}}`, api.ErrBadRequest},
		{"boot scene unknown", `{"boot_scene":"nope"}`, api.ErrBadRequest},
		{"boot scene known", `{"boot_scene":"intro"}`, nil},
		{"boot scene empty", `{"boot_scene":""}`, api.ErrBadRequest},
		{"boot scene number", `{"boot_scene":3}`, api.ErrBadRequest},
		{"boot scene null", `{"boot_scene":null}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := memStore{}
			s, err := Load(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.SetSceneChecker(func(n string) bool { return n == "intro" })
			before := s.Get()
			_, err = s.Apply(patch(t, tt.body))
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Apply(%s) = %v, want %v", tt.body, err, tt.want)
			}
			if err != nil {
				if diff := cmp.Diff(s.Get(), before); diff != "" {
					t.Errorf("refused patch changed state (-got +want)\n%s", diff)
				}
				if _, saved := st["settings"]; saved {
					t.Error("refused patch was saved")
				}
			}
		})
	}
}

func TestRestartRequiredAndReset(t *testing.T) {
	st := memStore{}
	pub := &pubRec{}
	s, _ := Load(st, pub)
	got, err := s.Apply(patch(t, `{"leds":{"count":60},"screen":{"backlight":10}}`))
	if err != nil || !got.RestartRequired {
		t.Fatalf("count change: %+v %v", got, err)
	}
	// A new start runs with the saved count: no restart required.
	s2, _ := Load(st, nil)
	if g := s2.Get(); g.RestartRequired || g.LEDs.Count != 60 || g.Screen.Backlight != 10 {
		t.Fatalf("after restart: %+v", g)
	}
	got, err = s2.Reset()
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.RestartRequired = true // the running count is still 60
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("reset (-got +want)\n%s", diff)
	}
	if len(pub.kinds) != 1 || pub.kinds[0] != "settings" {
		t.Errorf("published %v", pub.kinds)
	}
	name := "x"
	s3, _ := Load(memStore{}, nil)
	s3.SetSceneChecker(func(string) bool { return true })
	if _, err := s3.Apply(Patch{BootScene: json.RawMessage(`"x"`)}); err != nil {
		t.Fatal(err)
	}
	if err := s3.ClearBootScene(name); err != nil || s3.Get().BootScene != nil {
		t.Fatalf("ClearBootScene: %v %+v", err, s3.Get())
	}
}
