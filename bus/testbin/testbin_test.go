package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuild builds a small command of the module twice: the second
// answer is the same cached file, and it runs. The first build is begun
// by Start, and Build takes its result.
func TestBuild(t *testing.T) {
	// A cache of its own for the executables, the machine's for the
	// compiled packages (it lives under the same directory by default).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const pkg = "./bus/testbin/testdata/hello"
	Start(pkg, false)
	bin := Build(t, pkg, false)
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	// A second process would find the file: run build again directly.
	again, err := build(pkg, false)
	if err != nil || again != bin {
		t.Fatalf("second build: %q %v, want %q", again, err, bin)
	}
	if st2, err := os.Stat(again); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("the cached executable was rebuilt: %v", err)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil || string(out) != "hello from testbin\n" {
		t.Errorf("the built command says %q (%v)", out, err)
	}
}

// TestPrune: entries unused for MaxAge go, the one in use and recent ones
// stay.
func TestPrune(t *testing.T) {
	base := t.TempDir()
	now := time.Now()
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old, recent, keep := mk("old", 2*MaxAge), mk("recent", time.Hour), mk("keep", 3*MaxAge)
	prune(base, keep, now)
	for p, want := range map[string]bool{old: false, recent: true, keep: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}
