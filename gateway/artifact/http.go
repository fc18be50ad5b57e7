package artifact

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/holofleet/holofleet/gateway/rest"
)

// Handler serves the store's public side under prefix (for example
// "/firmware/"):
//
//	GET <prefix>images/<sha256>.bin    the image (Range, If-None-Match)
//	GET <prefix>channels/<name>.json   the channel's release manifest
//
// Images are served from their files with http.ServeContent: ranges and
// conditional requests work and no image is copied into memory. The
// SHA-256 is the ETag; images never change, so they may be cached for
// good. Boards reach these without a token (images are public the way a
// release site is); uploads go through the fleet API.
func (s *Store) Handler(prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			rest.Error(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not served here")
			return
		}
		sub, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			rest.Error(w, http.StatusNotFound, "not_found", "no such path")
			return
		}
		switch {
		case strings.HasPrefix(sub, "images/") && strings.HasSuffix(sub, ".bin"):
			s.serveImage(w, r, strings.TrimSuffix(strings.TrimPrefix(sub, "images/"), ".bin"))
		case strings.HasPrefix(sub, "deltas/") && strings.HasSuffix(sub, ".bin"):
			base, target, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(sub, "deltas/"), ".bin"), "/")
			s.serveDelta(w, r, base, target)
		case strings.HasPrefix(sub, "channels/") && strings.HasSuffix(sub, ".json"):
			m, err := s.Manifest(strings.TrimSuffix(strings.TrimPrefix(sub, "channels/"), ".json"))
			if err != nil {
				writeStoreErr(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-cache")
			json.NewEncoder(w).Encode(m)
		default:
			rest.Error(w, http.StatusNotFound, "not_found", "no such path")
		}
	})
}

func (s *Store) serveImage(w http.ResponseWriter, r *http.Request, sha string) {
	f, a, err := s.Open(sha)
	if err != nil {
		writeStoreErr(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+a.SHA256+`"`)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	http.ServeContent(w, r, "", a.Added, f)
}

// serveDelta serves <prefix>deltas/<base>/<target>.bin: the delta from
// artifact base to artifact target, for boards that pull it (extension
// ota-delta). Only a delta already made is served (a rollout makes it
// before it asks a board to pull it): a request never makes one, so no
// caller can make the gateway spend the time and memory of a delta.
func (s *Store) serveDelta(w http.ResponseWriter, r *http.Request, base, target string) {
	f, n, err := s.MadeDelta(base, target)
	if err != nil {
		writeStoreErr(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeStoreErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+base+"-"+target+`"`)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	http.ServeContent(w, r, "", fi.ModTime(), io.NewSectionReader(f, 0, n))
}

func writeStoreErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNoDelta):
		rest.Error(w, http.StatusNotFound, "no_firmware", err.Error())
	case errors.Is(err, ErrBadName):
		rest.Error(w, http.StatusNotFound, "not_found", err.Error())
	default:
		rest.Error(w, http.StatusInternalServerError, "internal", err.Error())
	}
}
