package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

func TestClean(t *testing.T) {
	long := strings.Repeat("n", boardapi.MaxName)
	tests := []struct {
		in   string
		want string
		err  error
	}{
		{"/", ".", nil},
		{"/a", "a", nil},
		{"/clips/intro.mov", "clips/intro.mov", nil},
		{"/" + long, long, nil},
		{"/" + long + "x", "", api.ErrBadPath},
		{"/" + strings.Repeat("abcdefg/", 19) + "abcdef", strings.Repeat("abcdefg/", 19) + "abcdef", nil}, // 159 bytes
		{"/" + strings.Repeat("abcdefg/", 19) + "abcdefg", "", api.ErrBadPath},                            // 160 bytes
		{"", "", api.ErrBadPath},
		{"a", "", api.ErrBadPath},
		{"//", "", api.ErrBadPath},
		{"/a//b", "", api.ErrBadPath},
		{"/a/", "", api.ErrBadPath},
		{"/./a", "", api.ErrBadPath},
		{"/a/..", "", api.ErrBadPath},
		{"/../etc/passwd", "", api.ErrBadPath},
		{"/up.part", "", api.ErrBadPath},
		{"/dir.part/x", "", api.ErrBadPath},
		{"/a\x00b", "", api.ErrBadPath},
		{"/a\nb", "", api.ErrBadPath},
		{"/\xff", "", api.ErrBadPath},
		{"/ünïcode ok", "ünïcode ok", nil},
		{"/...", "...", nil},
	}
	for _, tc := range tests {
		got, err := boardapi.CleanPath(tc.in)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("boardapi.CleanPath(%q) error %v, want %v", tc.in, err, tc.err)
		}
		if got != tc.want {
			t.Errorf("boardapi.CleanPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "//", "/a/../b", "/x.part", "/" + strings.Repeat("z", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := boardapi.CleanPath(p)
		if err != nil {
			return
		}
		if volumePath(rel) != p {
			t.Fatalf("boardapi.CleanPath(%q) = %q does not round-trip", p, rel)
		}
		if !filepath.IsLocal(rel) {
			t.Fatalf("boardapi.CleanPath(%q) = %q escapes", p, rel)
		}
	})
}

type guardLog struct {
	mu    sync.Mutex
	paths []string
}

func (g *guardLog) Release(p string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.paths = append(g.paths, p)
}

func (g *guardLog) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.paths
	g.paths = nil
	return p
}

func newVolume(t *testing.T, capacity int64) (*Volume, *guardLog) {
	t.Helper()
	g := &guardLog{}
	v, err := OpenVolume(t.TempDir(), capacity, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, g
}

func put(t *testing.T, v *Volume, p, data string, opt PutOptions) (Entry, bool) {
	t.Helper()
	e, created, err := v.Put(context.Background(), p, strings.NewReader(data), int64(len(data)), opt)
	if err != nil {
		t.Fatalf("Put(%s): %v", p, err)
	}
	return e, created
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func TestVolumeOperations(t *testing.T) {
	v, g := newVolume(t, 0)
	ctx := context.Background()
	if u := v.Usage(); u != (Usage{Root: "/", Total: DefaultCapacity, Used: 0, Free: DefaultCapacity}) {
		t.Fatalf("empty usage %+v", u)
	}
	e, created := put(t, v, "/clips/a.txt", "hello", PutOptions{Parents: true})
	if !created || e.Name != "a.txt" || e.Path != "/clips/a.txt" || e.Type != TypeFile || e.Size != 5 || !strings.HasSuffix(e.MTime, "Z") {
		t.Fatalf("put: %+v %v", e, created)
	}
	if u := v.Usage(); u.Used != 2*BlockSize {
		t.Errorf("used %d, want two blocks (dir + file)", u.Used)
	}
	_, _, err := v.Put(ctx, "/clips/a.txt", strings.NewReader("x"), 1, PutOptions{})
	wantErr(t, err, api.ErrExists)
	_, _, err = v.Put(ctx, "/other/a.txt", strings.NewReader("x"), 1, PutOptions{})
	wantErr(t, err, api.ErrNotFound)
	_, _, err = v.Put(ctx, "/clips", strings.NewReader("x"), 1, PutOptions{Overwrite: true})
	wantErr(t, err, api.ErrIsADirectory)
	_, _, err = v.Put(ctx, "/clips/a.txt/b", strings.NewReader("x"), 1, PutOptions{Parents: true})
	wantErr(t, err, api.ErrNotADirectory)
	if _, created := put(t, v, "/clips/a.txt", "hello again", PutOptions{Overwrite: true}); created {
		t.Error("replacing reported created")
	}
	if diff := cmp.Diff(g.take(), []string{"/clips/a.txt"}); diff != "" {
		t.Errorf("guard (-got +want):\n%s", diff)
	}

	sum := sha256.Sum256([]byte("hello again"))
	e, err = v.Stat(ctx, "/clips/a.txt", true)
	if err != nil || e.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("stat: %+v %v", e, err)
	}
	l, err := v.List("/")
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Type != TypeDir || l.Entries[0].Size != 0 {
		t.Fatalf("list: %+v %v", l, err)
	}
	_, err = v.List("/clips/a.txt")
	wantErr(t, err, api.ErrNotADirectory)
	_, err = v.List("/nope")
	wantErr(t, err, api.ErrNotFound)

	_, err = v.Mkdir("/clips", false)
	wantErr(t, err, api.ErrExists)
	_, err = v.Mkdir("/x/y", false)
	wantErr(t, err, api.ErrNotFound)
	if e, err := v.Mkdir("/x/y", true); err != nil || e.Type != TypeDir || e.Path != "/x/y" {
		t.Fatalf("mkdir: %+v %v", e, err)
	}

	_, err = v.Copy(ctx, "/clips", "/c2", false)
	wantErr(t, err, api.ErrIsADirectory)
	if e, err := v.Copy(ctx, "/clips/a.txt", "/x/b.txt", false); err != nil || e.Size != 11 {
		t.Fatalf("copy: %+v %v", e, err)
	}
	_, err = v.Copy(ctx, "/clips/a.txt", "/x/b.txt", false)
	wantErr(t, err, api.ErrExists)
	_, err = v.Copy(ctx, "/clips/a.txt", "/x", true)
	wantErr(t, err, api.ErrIsADirectory)

	_, err = v.Move("/clips", "/clips/inner", false)
	wantErr(t, err, api.ErrBadPath)
	_, err = v.Move("/clips/a.txt", "/x", true)
	wantErr(t, err, api.ErrExists)
	_, err = v.Move("/clips/a.txt", "/x/b.txt", false)
	wantErr(t, err, api.ErrExists)
	_, err = v.Move("/", "/r", false)
	wantErr(t, err, api.ErrBadPath)
	g.take()
	if e, err := v.Move("/clips/a.txt", "/x/b.txt", true); err != nil || e.Path != "/x/b.txt" || e.Size != 11 {
		t.Fatalf("move over a file: %+v %v", e, err)
	}
	if diff := cmp.Diff(g.take(), []string{"/x/b.txt", "/clips/a.txt"}); diff != "" {
		t.Errorf("guard (-got +want):\n%s", diff)
	}
	if e, err := v.Move("/x", "/clips/moved", false); err != nil || e.Type != TypeDir {
		t.Fatalf("move dir: %+v %v", e, err)
	}
	if _, err := v.Stat(ctx, "/clips/moved/y", false); err != nil {
		t.Errorf("contents did not move: %v", err)
	}

	wantErr(t, v.Remove("/", true), api.ErrBadPath)
	wantErr(t, v.Remove("/clips", false), api.ErrNotEmpty)
	wantErr(t, v.Remove("/none", false), api.ErrNotFound)
	g.take()
	if err := v.Remove("/clips", true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(g.take(), []string{"/clips"}); diff != "" {
		t.Errorf("guard (-got +want):\n%s", diff)
	}
	if u := v.Usage(); u.Used != 0 {
		t.Errorf("used %d after deleting everything", u.Used)
	}
}

// cutReader gives n bytes then fails, as a dropped connection does.
type cutReader struct {
	r io.Reader
	n int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	p = p[:min(len(p), c.n)]
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}

func TestFailedUploadsChangeNothing(t *testing.T) {
	v, _ := newVolume(t, 0)
	ctx := context.Background()
	put(t, v, "/f.bin", "original", PutOptions{})
	check := func() {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(v.Dir(), "f.bin"))
		if err != nil || string(b) != "original" {
			t.Fatalf("old file: %q %v", b, err)
		}
		if m, _ := filepath.Glob(filepath.Join(v.Dir(), "*.part")); len(m) != 0 {
			t.Fatalf("part files left: %v", m)
		}
	}
	data := bytes.Repeat([]byte("x"), 10000)
	_, _, err := v.Put(ctx, "/f.bin", &cutReader{bytes.NewReader(data), 5000}, int64(len(data)), PutOptions{Overwrite: true})
	wantErr(t, err, api.ErrBadRequest)
	check()
	_, _, err = v.Put(ctx, "/f.bin", bytes.NewReader(data[:100]), int64(len(data)), PutOptions{Overwrite: true})
	wantErr(t, err, api.ErrBadRequest)
	check()
	_, _, err = v.Put(ctx, "/f.bin", bytes.NewReader(data), int64(len(data)), PutOptions{Overwrite: true, SHA256: make([]byte, 32)})
	wantErr(t, err, api.ErrSHA256Mismatch)
	check()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = v.Put(cctx, "/f.bin", bytes.NewReader(data), int64(len(data)), PutOptions{Overwrite: true})
	if err == nil {
		t.Fatal("cancelled upload succeeded")
	}
	check()
	sum := sha256.Sum256(data)
	put(t, v, "/f.bin", string(data), PutOptions{Overwrite: true, SHA256: sum[:]})
}

func TestNoSpace(t *testing.T) {
	const capacity = 64 << 10 // 32 KiB usable with the margin
	v, _ := newVolume(t, capacity)
	ctx := context.Background()
	put(t, v, "/a", strings.Repeat("a", 20<<10), PutOptions{}) // 5 blocks
	_, _, err := v.Put(ctx, "/b", strings.NewReader(strings.Repeat("b", 13<<10)), 13<<10, PutOptions{})
	wantErr(t, err, api.ErrNoSpace)
	put(t, v, "/b", strings.Repeat("b", 12<<10), PutOptions{}) // 3 blocks: exactly the margin left
	if u := v.Usage(); u.Free != Margin {
		t.Errorf("free %d, want the margin %d", u.Free, Margin)
	}
	_, err = v.Mkdir("/d", false)
	wantErr(t, err, api.ErrNoSpace)
	_, err = v.Copy(ctx, "/b", "/c", false)
	wantErr(t, err, api.ErrNoSpace)
	// A source longer than announced is cut at the announced length.
	if err := v.Remove("/b", false); err != nil {
		t.Fatal(err)
	}
	e, _, err := v.Put(ctx, "/b", strings.NewReader(strings.Repeat("b", 100<<10)), 10, PutOptions{})
	if err != nil || e.Size != 10 {
		t.Fatalf("long source: %+v %v", e, err)
	}
}

func TestLinksRefused(t *testing.T) {
	v, _ := newVolume(t, 0)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(v.Dir(), "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(v.Dir(), "s")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := v.Stat(ctx, "/out/secret", false)
	wantErr(t, err, api.ErrBadPath)
	_, _, err = v.Open("/s")
	wantErr(t, err, api.ErrBadPath)
	_, _, err = v.Put(ctx, "/out/new", strings.NewReader("x"), 1, PutOptions{})
	wantErr(t, err, api.ErrBadPath)
	_, err = v.Resolve("/s")
	wantErr(t, err, api.ErrBadPath)
	if l, err := v.List("/"); err != nil || len(l.Entries) != 0 {
		t.Errorf("links listed: %+v %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("wrote outside the volume")
	}
}

func TestLeftoverPartsRemoved(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "clips"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.mov.part", "clips/b.mov.part", "clips/b.mov"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v, err := OpenVolume(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	m1, _ := filepath.Glob(filepath.Join(dir, "*.part"))
	m2, _ := filepath.Glob(filepath.Join(dir, "clips", "*"))
	if len(m1) != 0 || len(m2) != 1 {
		t.Errorf("after open: %v %v", m1, m2)
	}
}

func BenchmarkPut64K(b *testing.B) {
	v, err := OpenVolume(b.TempDir(), 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	data := bytes.Repeat([]byte("m"), 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := v.Put(context.Background(), "/f", bytes.NewReader(data), int64(len(data)), PutOptions{Overwrite: true}); err != nil {
			b.Fatal(err)
		}
	}
}
