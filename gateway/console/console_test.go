package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHandler(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, hh := range h.Routes() {
		mux.Handle(p, hh)
	}
	// What the API serves beside it must stay the API's.
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "api", http.StatusTeapot) })

	for _, tc := range []struct {
		method, path string
		status       int
		ctype        string
		body         string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", `<script type="module" src="/console/js/app.js">`},
		{"HEAD", "/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/console/app.css", 200, "text/css; charset=utf-8", "--bg"},
		{"GET", "/console/js/app.js", 200, "text/javascript; charset=utf-8", "import"},
		{"GET", "/console/js/views/fleet.js", 200, "text/javascript; charset=utf-8", "export function mount"},
		{"GET", "/console/icon.svg", 200, "image/svg+xml", "<svg"},
		{"GET", "/favicon.ico", 200, "image/svg+xml", "<svg"},
		{"GET", "/console/", 404, "", ""},
		{"GET", "/console/nope.js", 404, "", ""},
		{"GET", "/index.html", 418, "", "api"},
		{"GET", "/v1/boards", 418, "", "api"},
		{"GET", "/metrics", 418, "", "api"},
		{"POST", "/", 418, "", "api"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 418 {
				return
			}
			if got := rec.Header().Get("Content-Security-Policy"); got != CSP {
				t.Errorf("CSP %q", got)
			}
			for _, hd := range []string{"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
				if rec.Header().Get(hd) == "" {
					t.Errorf("no %s", hd)
				}
			}
			if tc.status != 200 {
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			if rec.Header().Get("Cache-Control") != "no-cache" || rec.Header().Get("ETag") == "" {
				t.Errorf("caching headers: %v", rec.Header())
			}
			if !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("body lacks %q", tc.body)
			}
		})
	}
}

// Paths with dot segments never reach a file (a mux cleans them first;
// the handler refuses them anyway).
func TestHandlerDotSegments(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console/../go.mod", "/console/js/../index.html", "/console/..", "/console/./app.css"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = p
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, rec.Code)
		}
	}
}

func TestHandlerRevalidates(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/js/app.js", nil))
	etag := rec.Header().Get("ETag")
	req := httptest.NewRequest("GET", "/console/js/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidation: %d with %d bytes, want 304 and none", rec.Code, rec.Body.Len())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/console/js/app.js", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestNewNeedsIndex(t *testing.T) {
	_, err := newFrom(fstest.MapFS{"static/app.css": {Data: []byte("x")}}, "static")
	if err != ErrNoIndex {
		t.Errorf("err %v, want ErrNoIndex", err)
	}
}

// The page's safety rules, checked on the files themselves: no way to
// turn text into markup, no inline script or style, nothing from another
// origin, and the token never in localStorage.
func TestStaticSafety(t *testing.T) {
	forbidden := []struct{ re, why string }{
		{`\.innerHTML\b`, "innerHTML parses markup"},
		{`\.outerHTML\b`, "outerHTML parses markup"},
		{`insertAdjacentHTML`, "insertAdjacentHTML parses markup"},
		{`document\.write`, "document.write parses markup"},
		{`\beval\s*\(`, "eval runs text"},
		{`new Function\b`, "new Function runs text"},
		{`createContextualFragment`, "parses markup"},
		{`DOMParser`, "parses markup"},
		{`setTimeout\(\s*['"]`, "a string timer runs text"},
		{`localStorage\.setItem\([^)]*token`, "the token belongs in sessionStorage"},
		{`https?://(?:[a-z0-9-]+\.)+[a-z]{2,}`, "nothing is fetched from elsewhere"},
	}
	inline := []struct{ re, why string }{
		{`<script(?:\s[^>]*)?>\s*[^<\s]`, "inline script"},
		{`<style`, "inline style sheet"},
		{`\sstyle=`, "inline style attribute"},
		{`\son[a-z]+=`, "inline event handler"},
		{`javascript:`, "javascript: URL"},
	}
	files := 0
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := fs.ReadFile(staticFS, p)
		if err != nil {
			return err
		}
		src := string(b)
		if strings.HasSuffix(p, ".js") {
			for _, f := range forbidden {
				if loc := regexp.MustCompile(f.re).FindStringIndex(src); loc != nil {
					t.Errorf("%s: %q: %s", p, src[loc[0]:loc[1]], f.why)
				}
			}
		}
		if strings.HasSuffix(p, ".html") {
			for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(src, -1) {
				if !strings.Contains(tag, " src=") {
					t.Errorf("%s: %s has no src (the CSP forbids inline script)", p, tag)
				}
			}
			for _, f := range inline {
				if loc := regexp.MustCompile(f.re).FindStringIndex(src); loc != nil {
					t.Errorf("%s: %q: %s (the CSP forbids it)", p, src[loc[0]:loc[1]], f.why)
				}
			}
		}
		if strings.HasSuffix(p, ".css") && regexp.MustCompile(`url\(\s*['"]?(https?:|//)`).MatchString(src) {
			t.Errorf("%s loads from another origin", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Errorf("only %d embedded files", files)
	}
}

// Every module the page loads is preloaded by index.html (one round of
// requests, not a waterfall), and every preloaded module exists.
func TestModulesPreloaded(t *testing.T) {
	index, err := fs.ReadFile(staticFS, "static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	pre := map[string]bool{}
	for _, m := range regexp.MustCompile(`rel="modulepreload" href="/console/([^"]+)"`).FindAllStringSubmatch(string(index), -1) {
		pre[m[1]] = true
		if _, err := fs.Stat(staticFS, "static/"+m[1]); err != nil {
			t.Errorf("index.html preloads %s, which does not exist", m[1])
		}
	}
	_ = fs.WalkDir(staticFS, "static/js", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		if name != "js/app.js" && !pre[name] {
			t.Errorf("%s is not preloaded by index.html", name)
		}
		return nil
	})
}
