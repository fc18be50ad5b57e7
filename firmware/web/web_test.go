package web

import (
	"encoding/json"
	"errors"
	"testing"

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

func TestTrustedOrigin(t *testing.T) {
	s, err := Load(memStore{}, "holo-ab12")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(Patch{TrustedSites: json.RawMessage(`["https://*.example.com","http://show.local:8080","https://exact.org"]`)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin string
		want   bool
	}{
		{"https://a.example.com", true},
		{"https://x.y.example.com", true},
		{"https://example.com", false},
		{"https://a.example.com:443", true},
		{"https://a.example.com:8443", false},
		{"http://a.example.com", false},
		{"https://evilexample.com", false},
		{"http://show.local:8080", true},
		{"http://show.local", false},
		{"https://exact.org", true},
		{"https://sub.exact.org", false},
		{"null", false},
		{"", false},
		{"https://*.example.com", false},
	} {
		if got := s.TrustedOrigin(tc.origin); got != tc.want {
			t.Errorf("TrustedOrigin(%q) = %v, want %v", tc.origin, got, tc.want)
		}
	}
}

func TestApplyRefusesAndKeepsState(t *testing.T) {
	st := memStore{}
	s, err := Load(st, "holo-ab12")
	if err != nil {
		t.Fatal(err)
	}
	before := s.State()
	for _, p := range []Patch{
		{Hostname: json.RawMessage(`"-bad"`)},
		{Hostname: json.RawMessage(`"has space"`)},
		{Hostname: json.RawMessage(`""`)},
		{Hostname: json.RawMessage(`42`)},
		{Password: json.RawMessage(`""`)},
		{Password: json.RawMessage(`true`)},
		{TrustedSites: json.RawMessage(`["ftp://x.org"]`)},
		{TrustedSites: json.RawMessage(`["https://x.org/path"]`)},
		{TrustedSites: json.RawMessage(`["https://a.*.org"]`)},
		{TrustedSites: json.RawMessage(`"https://x.org"`)},
	} {
		_, err := s.Apply(p)
		if !errors.Is(err, api.ErrBadRequest) {
			t.Errorf("Apply(%+v) = %v, want bad_request", p, err)
		}
	}
	if after := s.State(); after.Hostname != before.Hostname || len(after.TrustedSites) != len(before.TrustedSites) || after.PasswordSet {
		t.Fatalf("state changed: %+v -> %+v", before, after)
	}
}

func TestPasswordAndDefaults(t *testing.T) {
	st := memStore{}
	s, _ := Load(st, "holo-ab12")
	if _, err := s.Apply(Patch{Password: json.RawMessage(`"pw"`), Hostname: json.RawMessage(`"Stage-Left"`)}); err != nil {
		t.Fatal(err)
	}
	if !s.HasPassword() || !s.CheckPassword("pw") || s.CheckPassword("PW") || s.Hostname() != "stage-left" {
		t.Fatalf("state %+v", s.State())
	}
	if string(st["web"]) == "" || json.Valid(st["web"]) && containsPlain(st["web"], "pw") {
		t.Fatalf("stored document holds the password: %s", st["web"])
	}
	// Reload from the store: kept.
	s2, _ := Load(st, "holo-ab12")
	if !s2.CheckPassword("pw") || s2.Hostname() != "stage-left" {
		t.Fatal("not kept across a reload")
	}
	if _, err := s2.Apply(Patch{Password: json.RawMessage(`null`), Hostname: json.RawMessage(`null`)}); err != nil {
		t.Fatal(err)
	}
	if s2.HasPassword() || s2.Hostname() != "holo-ab12" {
		t.Fatalf("null did not restore defaults: %+v", s2.State())
	}
}

func containsPlain(doc []byte, pw string) bool {
	var m map[string]any
	_ = json.Unmarshal(doc, &m)
	for _, v := range m {
		if s, ok := v.(string); ok && s == pw {
			return true
		}
	}
	return false
}

func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"https://a.example.com", "http://x:80", "https://*.b.c", "", "::", "https://[::1]:8080"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseOrigin(s)
		if err != nil {
			return
		}
		if o.port < 1 || o.port > 65535 || (o.scheme != "http" && o.scheme != "https") {
			t.Fatalf("accepted %q as %+v", s, o)
		}
	})
}
