// Package web keeps the board's web settings: its .local hostname, the
// optional password that guards changes, and the list of trusted sites
// whose pages may call the API from a browser (CORS). They are saved and
// survive restarts; it implements httpapi.Access for the HTTP server.
//
// The password is never returned; it is kept as an argon2id record (see
// KDF) so the settings file does not hold it in the clear nor anything a
// guessing rig can test fast. A record of the old format (one salted
// SHA-256, boards before issue 25) still verifies and is rewritten as
// argon2id at its next good login.
package web

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/firmware/api"
)

// DefaultTrustedSites is the list a new board starts with: the holofleet
// web tools and their subdomains.
var DefaultTrustedSites = []string{"https://holofleet.dev", "https://*.holofleet.dev"}

// Store keeps saved documents (the board passes a store.Bucket).
type Store interface {
	Get(key string, v any) (bool, error)
	Put(key string, v any) error
}

// Publisher receives state changes (the board's event hub).
type Publisher interface{ SetState(kind string, state any) }

// saved is the stored document. PasswordHash is an argon2id PHC string
// ($argon2id$v=19$m=..,t=..,p=..$salt$key) with PasswordSalt empty, or,
// in a record from before issue 25, the hex SHA-256 of PasswordSalt, a
// NUL and the password.
type saved struct {
	Hostname     string   `json:"hostname"`
	PasswordSalt string   `json:"password_salt,omitempty"`
	PasswordHash string   `json:"password_hash,omitempty"`
	TrustedSites []string `json:"trusted_sites"`
}

// State is what GET /web and PATCH /web return.
type State struct {
	Hostname     string   `json:"hostname"`
	PasswordSet  bool     `json:"password_set"`
	TrustedSites []string `json:"trusted_sites"`
}

// Patch is the body of PATCH /web. A field left out is left alone; a field
// set to null returns to its default (no password, the default hostname,
// the default trusted sites).
type Patch struct {
	Hostname     json.RawMessage `json:"hostname,omitempty"`
	Password     json.RawMessage `json:"password,omitempty"`
	TrustedSites json.RawMessage `json:"trusted_sites,omitempty"`
}

// Settings holds the current web settings.
type Settings struct {
	store           Store
	defaultHostname string
	onHostname      func(string)
	kdf             KDF

	mu  sync.RWMutex
	cur saved

	verify sync.Mutex // one KDF at a time; guards good
	good   *goodCache
}

const storeKey = "web"

// Load reads the saved web settings or starts from the defaults.
// defaultHostname is holo- plus four characters of the board's identity.
func Load(st Store, defaultHostname string) (*Settings, error) {
	s := &Settings{store: st, defaultHostname: defaultHostname, kdf: DefaultKDF, good: newGoodCache()}
	ok, err := st.Get(storeKey, &s.cur)
	if err != nil {
		return nil, fmt.Errorf("web: load: %w", err)
	}
	if !ok || s.cur.Hostname == "" {
		s.cur.Hostname = defaultHostname
	}
	if !ok {
		s.cur.TrustedSites = append([]string(nil), DefaultTrustedSites...)
	}
	return s, nil
}

// OnHostname registers a function called with the new hostname after it
// changes (mDNS re-announces).
func (s *Settings) OnHostname(f func(string)) { s.onHostname = f }

// Hostname implements httpapi.Access.
func (s *Settings) Hostname() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur.Hostname
}

// HasPassword implements httpapi.Access.
func (s *Settings) HasPassword() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur.PasswordHash != ""
}

// SetKDF sets the cost new passwords are stored with (DefaultKDF from
// Load); tests use a cheap one. Records keep the cost they were made with.
func (s *Settings) SetKDF(k KDF) {
	s.mu.Lock()
	s.kdf = k
	s.mu.Unlock()
}

// CheckPassword reports whether p is the password. A good password in an
// old-format record rewrites the record as argon2id.
func (s *Settings) CheckPassword(p string) bool {
	s.mu.RLock()
	salt, want, kdf := s.cur.PasswordSalt, s.cur.PasswordHash, s.kdf
	s.mu.RUnlock()
	if want == "" {
		return true
	}
	s.verify.Lock()
	defer s.verify.Unlock()
	if g := s.good; g.record == want && g.mac != nil && subtle.ConstantTimeCompare(g.sum(p), g.mac) == 1 {
		return true
	}
	if !verifyRecord(salt, want, p) {
		return false
	}
	s.good.record, s.good.mac = want, s.good.sum(p)
	if isLegacy(want) {
		s.upgrade(want, kdf.hashNew(p))
	}
	return true
}

// upgrade replaces the old-format record old with rec, unless the
// password changed meanwhile. A failed save leaves the old record, to be
// upgraded at a later login.
func (s *Settings) upgrade(old, rec string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.PasswordHash != old {
		return
	}
	next := s.cur
	next.PasswordSalt, next.PasswordHash = "", rec
	if err := s.store.Put(storeKey, next); err != nil {
		return
	}
	s.cur = next
	s.good.record = rec
}

// TrustedOrigin implements httpapi.Access.
func (s *Settings) TrustedOrigin(origin string) bool {
	s.mu.RLock()
	sites := s.cur.TrustedSites
	s.mu.RUnlock()
	o, err := parseOrigin(origin)
	if err != nil {
		return false
	}
	for _, site := range sites {
		p, err := parseOrigin(site)
		if err != nil {
			continue
		}
		if p.matches(o) {
			return true
		}
	}
	return false
}

// State returns the settings as GET /web shows them.
func (s *Settings) State() State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return State{
		Hostname:     s.cur.Hostname,
		PasswordSet:  s.cur.PasswordHash != "",
		TrustedSites: append([]string{}, s.cur.TrustedSites...),
	}
}

// Apply validates and saves a patch; nothing changes when it fails.
func (s *Settings) Apply(p Patch) (State, error) {
	// A new password's record is derived before locking: the KDF is slow
	// on purpose and nothing else should wait on it.
	var newRecord string
	if p.Password != nil && !isNull(p.Password) {
		var pw string
		if json.Unmarshal(p.Password, &pw) == nil && validPassword(pw) {
			s.mu.RLock()
			k := s.kdf
			s.mu.RUnlock()
			newRecord = k.hashNew(pw)
		}
	}
	s.mu.Lock()
	next := s.cur
	next.TrustedSites = append([]string(nil), s.cur.TrustedSites...)
	oldHost := s.cur.Hostname
	if p.Hostname != nil {
		if isNull(p.Hostname) {
			next.Hostname = s.defaultHostname
		} else {
			var h string
			if err := json.Unmarshal(p.Hostname, &h); err != nil {
				s.mu.Unlock()
				return State{}, api.Errorf(api.ErrBadRequest, "hostname must be a string or null")
			}
			h = strings.ToLower(h)
			if err := ValidHostname(h); err != nil {
				s.mu.Unlock()
				return State{}, err
			}
			next.Hostname = h
		}
	}
	if p.Password != nil {
		if isNull(p.Password) {
			next.PasswordHash, next.PasswordSalt = "", ""
		} else {
			var pw string
			if err := json.Unmarshal(p.Password, &pw); err != nil {
				s.mu.Unlock()
				return State{}, api.Errorf(api.ErrBadRequest, "password must be a string or null")
			}
			if !validPassword(pw) || newRecord == "" {
				s.mu.Unlock()
				return State{}, api.Errorf(api.ErrBadRequest, "password must be 1-128 bytes without control line breaks; null clears it")
			}
			next.PasswordSalt = ""
			next.PasswordHash = newRecord
		}
	}
	if p.TrustedSites != nil {
		if isNull(p.TrustedSites) {
			next.TrustedSites = append([]string(nil), DefaultTrustedSites...)
		} else {
			var list []string
			if err := json.Unmarshal(p.TrustedSites, &list); err != nil {
				s.mu.Unlock()
				return State{}, api.Errorf(api.ErrBadRequest, "trusted_sites must be an array of origins or null")
			}
			if len(list) > MaxTrustedSites {
				s.mu.Unlock()
				return State{}, api.Errorf(api.ErrBadRequest, "at most %d trusted sites", MaxTrustedSites)
			}
			for i, site := range list {
				if _, err := parseOrigin(site); err != nil {
					s.mu.Unlock()
					return State{}, api.Errorf(api.ErrBadRequest, "trusted_sites[%d]: %v", i, err)
				}
			}
			next.TrustedSites = list
		}
	}
	if err := s.store.Put(storeKey, next); err != nil {
		s.mu.Unlock()
		return State{}, fmt.Errorf("web: save: %w", err)
	}
	s.cur = next
	s.mu.Unlock()
	if next.Hostname != oldHost && s.onHostname != nil {
		s.onHostname(next.Hostname)
	}
	return s.State(), nil
}

func validPassword(pw string) bool {
	return len(pw) >= 1 && len(pw) <= 128 && !strings.ContainsAny(pw, "\x00\r\n")
}

// MaxTrustedSites bounds the trusted sites list.
const MaxTrustedSites = 16

func isNull(raw json.RawMessage) bool { return strings.TrimSpace(string(raw)) == "null" }

// ValidHostname checks a .local hostname: one DNS label of 1-63 letters,
// digits and hyphens, not starting or ending with a hyphen.
func ValidHostname(h string) error {
	if len(h) < 1 || len(h) > 63 {
		return api.Errorf(api.ErrBadRequest, "hostname must be 1-63 characters")
	}
	for i, c := range h {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
		if !ok {
			return api.Errorf(api.ErrBadRequest, "hostname may hold only a-z, 0-9 and '-'")
		}
		if c == '-' && (i == 0 || i == len(h)-1) {
			return api.Errorf(api.ErrBadRequest, "hostname may not start or end with '-'")
		}
	}
	return nil
}

type origin struct {
	scheme   string
	host     string // lower case; may start with "*." in a site pattern
	port     int
	wildcard bool
}

func parseOrigin(s string) (origin, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return origin{}, fmt.Errorf("%q is not an origin scheme://host[:port]", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return origin{}, fmt.Errorf("%q: scheme must be http or https", s)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return origin{}, fmt.Errorf("%q: an origin has no path, query or user", s)
	}
	o := origin{scheme: u.Scheme, host: strings.ToLower(u.Hostname())}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return origin{}, fmt.Errorf("%q: bad port", s)
		}
		o.port = n
	} else if o.scheme == "https" {
		o.port = 443
	} else {
		o.port = 80
	}
	if rest, ok := strings.CutPrefix(o.host, "*."); ok {
		if rest == "" || strings.Contains(rest, "*") {
			return origin{}, fmt.Errorf("%q: bad wildcard", s)
		}
		o.host, o.wildcard = rest, true
	} else if strings.Contains(o.host, "*") {
		return origin{}, fmt.Errorf("%q: a wildcard may only be the first label", s)
	}
	return o, nil
}

func (p origin) matches(o origin) bool {
	if p.scheme != o.scheme || p.port != o.port || o.wildcard {
		return false
	}
	if p.wildcard {
		return strings.HasSuffix(o.host, "."+p.host)
	}
	return o.host == p.host
}

// Routes returns GET and PATCH /web.
func (s *Settings) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/web", Private: true, Summary: "Web settings: hostname, whether a password is set, trusted sites", Response: State{},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, http.StatusOK, s.State()) })},
		{Method: http.MethodPatch, Path: "/web", Summary: "Change hostname, password or the trusted sites list (null restores a default)", Request: Patch{}, Response: State{},
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
	}
}
