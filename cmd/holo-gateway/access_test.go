package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "1MiB": 1 << 20, "512KiB": 512 << 10, "2M": 2 << 20, "10 B": 10, "1GiB": 1 << 30} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1TiB", "3GiB", "1.5MiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestParseBoards(t *testing.T) {
	in := "# stage left\n\nhttp://10.0.0.21 s3cret pass\nhttp://10.0.0.22:8080\nhttp://:inurl@10.0.0.23\nhttp://10.0.0.24\tTabbed\n"
	got, err := parseBoards(strings.NewReader(in), "boards")
	if err != nil {
		t.Fatal(err)
	}
	want := []lanBoard{{"http://10.0.0.21", "s3cret pass"}, {"http://10.0.0.22:8080", ""}, {"http://10.0.0.23", "inurl"}, {"http://10.0.0.24", "Tabbed"}}
	if diff := cmp.Diff(got, want, cmp.AllowUnexported(lanBoard{})); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	for _, bad := range []string{"10.0.0.21 pw\n", "ftp://x pw\n", "http:// pw\n"} {
		_, err := parseBoards(strings.NewReader(bad), "boards")
		if !errors.Is(err, errBoardsFileLine) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: %v (the error must not show the password)", bad, err)
		}
	}
}

func TestBoardsFileMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "boards")
	if err := os.WriteFile(path, []byte("http://10.0.0.21 pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if bs, err := readBoardsFile(path); err != nil || len(bs) != 1 {
		t.Fatalf("0600: %v %v", bs, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o660, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := readBoardsFile(path)
		if !errors.Is(err, errBoardsFileMode) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
	// The gateway refuses to start with such a file, saying why.
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--data", dir, "--listen", "127.0.0.1:0", "--no-mqtt", "--boards-file", path}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "chmod 600") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}

// fakeBoard records the Authorization its requests carry.
type fakeBoard struct {
	mu    sync.Mutex
	seen  map[string]bool
	calls chan struct{}
}

func (f *fakeBoard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen[r.Header.Get("Authorization")] = true
	f.mu.Unlock()
	select {
	case f.calls <- struct{}{}:
	default:
	}
	http.NotFound(w, r)
}

func (f *fakeBoard) waitFor(t *testing.T, authz string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok := f.seen[authz]
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.calls:
		case <-deadline:
			t.Fatalf("the board never saw %q (saw %v)", authz, f.seen)
		}
	}
}

// TestBoardPasswordsWithoutArgv: passwords come from the boards file and
// the environment, never from the command line.
func TestBoardPasswordsWithoutArgv(t *testing.T) {
	fromFile := &fakeBoard{seen: map[string]bool{}, calls: make(chan struct{}, 1)}
	fromEnv := &fakeBoard{seen: map[string]bool{}, calls: make(chan struct{}, 1)}
	s1, s2 := httptest.NewServer(fromFile), httptest.NewServer(fromEnv)
	defer s1.Close()
	defer s2.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "boards")
	if err := os.WriteFile(path, []byte("# boards\n"+s1.URL+" file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(boardPasswordEnv, "env-secret")
	args := []string{"--data", dir, "--listen", "127.0.0.1:0", "--no-mqtt", "--boards-file", path, "--board", s2.URL}
	for _, a := range args {
		if strings.Contains(a, "secret") {
			t.Fatalf("argv carries a password: %v", args)
		}
	}
	_, banner := start(t, args...)
	fromFile.waitFor(t, "Bearer file-secret")
	fromEnv.waitFor(t, "Bearer env-secret")
	if strings.Contains(banner.String(), "secret") {
		t.Errorf("the banner shows a password:\n%s", banner.String())
	}
}

// TestBoardsFileFromCredential: under systemd, LoadCredential=boards:...
// hands the file over without any flag.
func TestBoardsFileFromCredential(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "boards"), []byte("http://10.0.0.30 cred-pw\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CREDENTIALS_DIRECTORY", dir)
	t.Setenv(boardPasswordEnv, "")
	bs, _, err := lanBoards(options{boards: listFlag{"http://10.0.0.31"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []lanBoard{{"http://10.0.0.31", ""}, {"http://10.0.0.30", "cred-pw"}}
	if diff := cmp.Diff(bs, want, cmp.AllowUnexported(lanBoard{})); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// FuzzParseBoards: a boards file never crashes the parser, and an error
// never shows a password.
func FuzzParseBoards(f *testing.F) {
	f.Add("http://10.0.0.21 s3cret\n# c\n\nhttp://h:8080\n")
	f.Add("ftp://x s3cret\n")
	f.Add("http://[::1 s3cret\n")
	f.Add("http://:s3cret@10.0.0.1\n")
	f.Fuzz(func(t *testing.T, in string) {
		bs, err := parseBoards(strings.NewReader(in), "boards")
		if err != nil {
			if strings.Contains(in, "s3cret") && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the password: %v", err)
			}
			return
		}
		for _, b := range bs {
			if !strings.HasPrefix(b.url, "http://") && !strings.HasPrefix(b.url, "https://") {
				t.Errorf("board URL %q", b.url)
			}
			if u, err := url.Parse(b.url); err != nil || u.User != nil {
				t.Errorf("password left in URL %q (%v)", b.url, err)
			}
		}
	})
}
