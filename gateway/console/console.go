package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path under which the page's assets are served.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every console response: the page
// loads scripts, styles, images and connections from its own origin only,
// runs no inline script and cannot be framed.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// ErrNoIndex: the embedded files lack index.html (a broken build).
var ErrNoIndex = errors.New("console: index.html missing from the embedded files")

//go:embed static
var staticFS embed.FS

// asset is one embedded file ready to serve.
type asset struct {
	body  []byte
	etag  string
	ctype string
}

// Handler serves the console: the page at "/" and its assets under
// Prefix. Other paths get 404.
type Handler struct {
	assets map[string]asset // by path under static/ ("index.html", "js/app.js")
	mod    time.Time
}

// New loads the embedded files.
func New() (*Handler, error) {
	return newFrom(staticFS, "static")
}

func newFrom(fsys fs.FS, root string) (*Handler, error) {
	h := &Handler{assets: map[string]asset{}}
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // not left to the host's mime tables
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".svg":
			ctype = "image/svg+xml"
		case ".txt", ".md":
			ctype = "text/plain; charset=utf-8"
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		h.assets[strings.TrimPrefix(p, root+"/")] = asset{body: b, ctype: ctype,
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console: load embedded files: %w", err)
	}
	if _, ok := h.assets["index.html"]; !ok {
		return nil, ErrNoIndex
	}
	return h, nil
}

// Routes returns the console's http.ServeMux patterns and handlers, for a
// server that mounts extra handlers by pattern (api.Config.Extra): the
// page at exactly "/" and the assets under Prefix, GET (and HEAD) only.
func (h *Handler) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /{$}":         h,
		"GET " + Prefix:    h,
		"GET /favicon.ico": h,
	}
}

// ServeHTTP serves the page and its assets.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := ""
	switch {
	case r.URL.Path == "/":
		name = "index.html"
	case r.URL.Path == "/favicon.ico":
		name = "icon.svg"
	case strings.HasPrefix(r.URL.Path, Prefix):
		name = strings.TrimPrefix(r.URL.Path, Prefix)
	}
	hd := w.Header()
	setSecurityHeaders(hd)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.assets[name]
	if !ok || name == "" || strings.Contains(name, "..") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// Revalidate every time: a new gateway serves its own console at once,
	// and an unchanged file costs a 304.
	hd.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, h.mod, bytes.NewReader(a.body))
}

// setSecurityHeaders sets the headers every console response carries.
func setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
}
