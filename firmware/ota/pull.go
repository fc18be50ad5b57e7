package ota

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// Pulling and checking.
const (
	// CheckTTL is how long a check answer is kept.
	CheckTTL = 5 * time.Minute
	// MaxManifest bounds a release manifest's size.
	MaxManifest = 64 << 10
	// DefaultChannel is the channel GET /ota/check looks at by default.
	DefaultChannel = "latest"
	fetchTimeout   = 30 * time.Second
)

// PullConfig is how the board fetches images and manifests.
type PullConfig struct {
	// BaseURL holds the channels' manifests (<BaseURL>/<channel>.json);
	// empty means the board knows no release channels.
	BaseURL string
	// Client fetches over HTTPS with certificate checks; nil uses one
	// with the system's roots. Its redirect policy is replaced by one
	// that refuses https to http.
	Client *http.Client
	// Online reports whether the station link reaches the internet; nil
	// means always (the simulator's default).
	Online func() bool
	// Current is the running firmware's version, for check's newer.
	Current string
}

// CheckResult is the reply of GET /ota/check.
type CheckResult struct {
	Channel string `json:"channel" doc:"the channel looked at; empty when a url was given"`
	Current string `json:"current"`
	Version string `json:"version"`
	// Newer is null when either version is not a release tag.
	Newer       *bool  `json:"newer"`
	ImageURL    string `json:"image_url"`
	ReleaseURL  string `json:"release_url"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	CheckedSAgo int64  `json:"checked_s_ago"`
}

// PullRequest is the body of POST /ota/pull.
type PullRequest struct {
	Channel  *string `json:"channel,omitempty"`
	URL      *string `json:"url,omitempty" doc:"an image or a release manifest (https)"`
	SHA256   *string `json:"sha256,omitempty"`
	Activate *bool   `json:"activate,omitempty"`
	Reboot   *bool   `json:"reboot,omitempty"`
	Force    *bool   `json:"force,omitempty"`
	Base     *string `json:"base,omitempty" doc:"extension ota-delta: url is a delta image from this running image (hex SHA-256, GET /ota's running slot sha256); the board rebuilds the whole image and checks it as a pull of it"`
}

type checkEntry struct {
	m   Manifest
	src string // the manifest's URL
	at  time.Time
}

type checkCache struct {
	mu sync.Mutex
	m  map[string]checkEntry
}

func (s *Service) online() bool {
	return s.cfg.Pull.Online == nil || s.cfg.Pull.Online()
}

func (s *Service) pullInfo() PullInfo {
	return PullInfo{Available: true, Channels: s.cfg.Pull.BaseURL != "", Online: s.online()}
}

// client returns the HTTP client with the redirect rule.
func (s *Service) client() *http.Client {
	c := http.Client{Timeout: 0}
	if s.cfg.Pull.Client != nil {
		c = *s.cfg.Pull.Client
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("too many redirects")
		}
		if req.URL.Scheme != "https" {
			return fmt.Errorf("redirect from %s to %s refused: only https", via[len(via)-1].URL.Redacted(), req.URL.Redacted())
		}
		return nil
	}
	return &c
}

func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, api.Errorf(api.ErrBadRequest, "url %q is not an absolute URL", raw)
	}
	if u.Scheme != "https" {
		return nil, api.Errorf(api.ErrBadRequest, "url %q: only https is fetched", raw)
	}
	return u, nil
}

func (s *Service) channelURL(channel string) (string, error) {
	if s.cfg.Pull.BaseURL == "" {
		return "", api.Errorf(api.ErrNoFirmware, "this board knows no release channels")
	}
	if channel == "" || strings.ContainsAny(channel, "/?#%\\") || channel == "." || channel == ".." {
		return "", api.Errorf(api.ErrBadRequest, "bad channel name %q", channel)
	}
	return strings.TrimSuffix(s.cfg.Pull.BaseURL, "/") + "/" + url.PathEscape(channel) + ".json", nil
}

// get fetches u; an unreachable site is 503 unreachable, a 404 is
// notFound.
func (s *Service) get(ctx context.Context, u string, notFound *api.Error) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, api.Errorf(api.ErrBadRequest, "%v", err)
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return nil, api.Errorf(api.ErrUnreachable, "%v", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		resp.Body.Close()
		return nil, api.Errorf(notFound, "%s answered %s", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		return nil, api.Errorf(api.ErrUnreachable, "%s answered %s", u, resp.Status)
	}
	return resp, nil
}

// parseManifest decodes and checks a manifest fetched from src.
func parseManifest(b []byte, src string) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, api.Errorf(api.ErrUnreachable, "%s is not a release manifest: %v", src, err)
	}
	if m.Version == "" {
		return m, api.Errorf(api.ErrNoFirmware, "%s publishes no firmware", src)
	}
	if err := checkSHA(m.SHA256); err != nil || m.SHA256 == "" || m.ImageURL == "" || m.Size <= 0 {
		return m, api.Errorf(api.ErrUnreachable, "%s: manifest needs image_url, size and a 64-digit sha256", src)
	}
	base, _ := url.Parse(src)
	iu, err := base.Parse(m.ImageURL)
	if err != nil {
		return m, api.Errorf(api.ErrUnreachable, "%s: bad image_url: %v", src, err)
	}
	m.ImageURL = iu.String()
	m.SHA256 = strings.ToLower(m.SHA256)
	return m, nil
}

// manifest returns the manifest at src, from the cache when younger than
// CheckTTL unless refresh.
func (s *Service) manifest(ctx context.Context, key, src string, refresh bool) (checkEntry, error) {
	now := s.cfg.Clock.Now()
	s.checks.mu.Lock()
	e, ok := s.checks.m[key]
	s.checks.mu.Unlock()
	if ok && !refresh && now.Sub(e.at) < CheckTTL {
		return e, nil
	}
	if !s.online() {
		return e, api.Errorf(api.ErrOffline, "the station link is down")
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	resp, err := s.get(ctx, src, api.ErrNoFirmware)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifest+1))
	if err != nil {
		return e, api.Errorf(api.ErrUnreachable, "reading %s: %v", src, err)
	}
	if len(b) > MaxManifest {
		return e, api.Errorf(api.ErrUnreachable, "%s: manifest over %d bytes", src, MaxManifest)
	}
	m, err := parseManifest(b, src)
	if err != nil {
		return e, err
	}
	e = checkEntry{m: m, src: src, at: now}
	s.checks.mu.Lock()
	if s.checks.m == nil {
		s.checks.m = map[string]checkEntry{}
	}
	s.checks.m[key] = e
	s.checks.mu.Unlock()
	return e, nil
}

// Check is GET /ota/check.
func (s *Service) Check(ctx context.Context, channel, rawURL string, refresh bool) (CheckResult, error) {
	var key, src string
	if rawURL != "" {
		if _, err := checkURL(rawURL); err != nil {
			return CheckResult{}, err
		}
		key, src, channel = "url:"+rawURL, rawURL, ""
	} else {
		if channel == "" {
			channel = DefaultChannel
		}
		u, err := s.channelURL(channel)
		if err != nil {
			return CheckResult{}, err
		}
		key, src = "channel:"+channel, u
	}
	e, err := s.manifest(ctx, key, src, refresh)
	if err != nil {
		return CheckResult{}, err
	}
	return CheckResult{Channel: channel, Current: s.cfg.Pull.Current, Version: e.m.Version,
		Newer: newer(e.m.Version, s.cfg.Pull.Current), ImageURL: e.m.ImageURL, ReleaseURL: e.m.ReleaseURL,
		Size: e.m.Size, SHA256: e.m.SHA256, CheckedSAgo: int64(s.cfg.Clock.Since(e.at) / time.Second)}, nil
}

// newer compares release tags (1.2.3 or v1.2.3); nil when either is not
// one.
func newer(avail, cur string) *bool {
	a, okA := releaseTag(avail)
	c, okC := releaseTag(cur)
	if !okA || !okC {
		return nil
	}
	for i := range a {
		if a[i] != c[i] {
			r := a[i] > c[i]
			return &r
		}
	}
	r := false
	return &r
}

func releaseTag(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// Pull is POST /ota/pull: it resolves the channel or URL, starts the
// download into the slot that is not running, and returns the session as
// the download starts. Progress and the outcome are in the session.
func (s *Service) Pull(ctx context.Context, req PullRequest) (Session, error) {
	if (req.Channel == nil) == (req.URL == nil) {
		return Session{}, api.Errorf(api.ErrBadRequest, "give exactly one of channel and url")
	}
	opt := Options{Activate: req.Activate != nil && *req.Activate, Reboot: req.Reboot == nil || *req.Reboot,
		Force: req.Force != nil && *req.Force}
	if req.SHA256 != nil {
		if err := checkSHA(*req.SHA256); err != nil {
			return Session{}, err
		}
		opt.SHA256 = strings.ToLower(*req.SHA256)
	}
	if req.Base != nil {
		if req.URL == nil {
			return Session{}, api.Errorf(api.ErrBadRequest, "base needs url (a delta's URL), not a channel")
		}
		if err := s.checkBase(*req.Base); err != nil {
			return Session{}, err
		}
	}
	if !s.online() {
		return Session{}, api.Errorf(api.ErrOffline, "the station link is down")
	}
	var src string
	if req.Channel != nil {
		u, err := s.channelURL(*req.Channel)
		if err != nil {
			return Session{}, err
		}
		src = u
	} else {
		if _, err := checkURL(*req.URL); err != nil {
			return Session{}, err
		}
		src = *req.URL
	}
	fctx, cancelFetch := context.WithCancel(s.ctx)
	resp, err := s.get(fctx, src, api.ErrNoFirmware)
	if err != nil {
		cancelFetch()
		return Session{}, err
	}
	if req.Base != nil {
		return s.pullDelta(resp, src, strings.ToLower(*req.Base), opt, cancelFetch)
	}
	body := bufio.NewReaderSize(resp.Body, 4096)
	total := resp.ContentLength
	imageURL := src
	if first, _ := body.Peek(1); len(first) == 1 && first[0] == '{' {
		// A release manifest: enforce its SHA-256 and fetch its image.
		b, err := io.ReadAll(io.LimitReader(body, MaxManifest+1))
		resp.Body.Close()
		if err == nil && len(b) > MaxManifest {
			err = api.Errorf(api.ErrUnreachable, "%s: manifest over %d bytes", src, MaxManifest)
		}
		var m Manifest
		if err == nil {
			m, err = parseManifest(b, src)
		}
		if err == nil && opt.SHA256 != "" && opt.SHA256 != m.SHA256 {
			err = api.Errorf(api.ErrSHA256Mismatch, "sha256 %s differs from the manifest's %s", opt.SHA256, m.SHA256)
		}
		if err == nil && m.Size > flash.SlotSize {
			err = api.Errorf(api.ErrTooLarge, "the image of %d bytes does not fit the %d-byte slot", m.Size, flash.SlotSize)
		}
		if err == nil {
			opt.SHA256 = m.SHA256
			imageURL = m.ImageURL
			resp, err = s.get(fctx, m.ImageURL, api.ErrNoFirmware)
		}
		if err != nil {
			cancelFetch()
			return Session{}, err
		}
		if resp.ContentLength >= 0 && resp.ContentLength != m.Size {
			resp.Body.Close()
			cancelFetch()
			return Session{}, api.Errorf(api.ErrUnreachable, "%s is %d bytes, the manifest says %d", m.ImageURL, resp.ContentLength, m.Size)
		}
		total = m.Size
		body = bufio.NewReaderSize(resp.Body, 4096)
	}
	if total < 0 {
		resp.Body.Close()
		cancelFetch()
		return Session{}, api.Errorf(api.ErrUnreachable, "%s does not say its length", imageURL)
	}
	if total > flash.SlotSize {
		resp.Body.Close()
		cancelFetch()
		return Session{}, api.Errorf(api.ErrTooLarge, "%d bytes do not fit the %d-byte slot", total, flash.SlotSize)
	}
	w, wctx, slot, release, err := s.begin(SourcePull, strp(imageURL), total, cancelFetch)
	if err != nil {
		resp.Body.Close()
		cancelFetch()
		return Session{}, err
	}
	sess := s.Session()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancelFetch()
		defer resp.Body.Close()
		// A release site that stops sending is cut after the
		// long-operation lock's idle timeout.
		err := s.receive(wctx, w.gen, slot, s.cfg.Long.WatchN(body, "firmware pull", total, cancelFetch), total, opt)
		s.finished(w)
		release()
		if err == nil && opt.Activate {
			_, _ = s.activate(nil, opt.Reboot, UpdateRestartDelay)
		}
	}()
	return sess, nil
}
