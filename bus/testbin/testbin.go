// Package testbin builds the module's commands for tests that run them as
// processes (holo-board boards, holo-gateway gateways), and keeps the
// executables between runs.
//
// Linking an executable costs seconds, tens of seconds on a loaded
// machine, and every test package that runs a command used to pay it on
// every run (and leave a copy in /tmp). [Build] keeps each executable in
// the user's cache directory (holofleet/testbin/<key>/), keyed by the
// compiled form of every package it is made of (go list -export: the
// build cache names each compiled package by its content), the toolchain,
// the race flag and the linker flags the environment gives; a change to
// any of them builds afresh, and an unchanged command is not linked again.
// Entries unused for a day are removed.
package testbin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// MaxAge is how long an unused cached executable is kept.
const MaxAge = 24 * time.Hour

type result struct {
	once sync.Once
	path string
	err  error
}

var (
	mu    sync.Mutex
	built = map[string]*result{}
)

// Build returns the path of pkg (an import path or a ./ path from the
// module root, such as "./cmd/holo-board") built with the race detector
// when race is true. It builds at most once per test process and reuses
// an executable cached by an earlier run when nothing it is made of
// changed. A failed build fails tb.
func Build(tb testing.TB, pkg string, race bool) string {
	tb.Helper()
	r := resultOf(pkg, race)
	r.once.Do(func() { r.path, r.err = build(pkg, race) })
	if r.err != nil {
		tb.Fatal(r.err)
	}
	return r.path
}

// Start begins building pkg in the background (from TestMain, say), so
// that the tests that do not run it go on meanwhile; the first [Build]
// of it waits for that build instead of starting another.
func Start(pkg string, race bool) {
	r := resultOf(pkg, race)
	go r.once.Do(func() { r.path, r.err = build(pkg, race) })
}

// resultOf is the one build of pkg (with race) in this process.
func resultOf(pkg string, race bool) *result {
	k := fmt.Sprintf("%s race=%v", pkg, race)
	mu.Lock()
	defer mu.Unlock()
	r, ok := built[k]
	if !ok {
		r = &result{}
		built[k] = r
	}
	return r
}

func build(pkg string, race bool) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	flags := []string{}
	if race {
		flags = append(flags, "-race")
	}
	list := exec.Command("go", append(append([]string{"list"}, flags...), "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", pkg)...)
	list.Dir = root
	var stderr bytes.Buffer
	list.Stderr = &stderr
	deps, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	// What reaches the link but not the compiled packages: the
	// toolchain, the race flag and linker flags from the environment.
	link := fmt.Sprintf("%s\nrace=%v\nGOFLAGS=%s\nCGO_LDFLAGS=%s\n", runtime.Version(), race, os.Getenv("GOFLAGS"), os.Getenv("CGO_LDFLAGS"))
	key := sha256.Sum256(append([]byte(link), deps...))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	base := filepath.Join(cache, "holofleet", "testbin")
	dir := filepath.Join(base, hex.EncodeToString(key[:12]))
	bin := filepath.Join(dir, path.Base(pkg))
	now := time.Now()
	if _, err := os.Stat(bin); err == nil {
		_ = os.Chtimes(dir, now, now) // in use: kept by prune
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built beside and renamed into place: test processes building at
	// once never run a half-written file.
	tmp, err := os.CreateTemp(dir, "build-*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", tmp.Name(), pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	prune(base, dir, now)
	return bin, nil
}

// prune removes the cached executables, other than keep, unused for
// MaxAge.
func prune(base, keep string, now time.Time) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(base, e.Name())
		if info, err := e.Info(); err == nil && p != keep && now.Sub(info.ModTime()) > MaxAge {
			_ = os.RemoveAll(p)
		}
	}
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above %s", dir)
		}
		dir = parent
	}
}
