// Package tmpfs lets a test run against a real full disk: a small tmpfs
// mounted in a private mount namespace (so nothing outside the test sees
// it) and filled to its last byte. Making the namespace needs root and
// unshare(1); where either is missing the test is skipped.
package tmpfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// insideEnv is set in the copy of the test binary that runs inside its
// own mount namespace.
const insideEnv = "HOLO_TMPFS_MOUNT_NS"

// Isolate runs the calling top-level test again in a copy of the test
// binary inside a private mount namespace (unshare -m), with env added to
// its environment, and fails t if that copy fails. It returns true in the
// copy, where the test goes on; false where it was started, where the
// test is then done. It skips t where the namespace cannot be made.
func Isolate(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(insideEnv) != "" {
		return true
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) to make a mount namespace:", err)
	}
	if err := exec.Command(unshare, "-m", "true").Run(); err != nil {
		t.Skip("cannot make a mount namespace (needs root):", err)
	}
	cmd := exec.Command(unshare, "-m", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), insideEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("in its mount namespace: %v\n%s", err, out)
	}
	t.Logf("in its mount namespace:\n%s", out)
	return false
}

// Mount mounts a tmpfs of size (as mount(8) takes it: "2m") on a new
// temporary directory, which it returns, until the test ends. Call it
// where Isolate returned true.
func Mount(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatal("mount a tmpfs:", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// Fill writes a file in dir until its file system has no byte left and
// returns the file's path: removing it makes room again.
func Fill(t *testing.T, dir string) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal("filling the disk:", err)
			}
			break
		}
	}
	for n := len(chunk) / 2; n > 0; n /= 2 { // the last partial pages too
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return filler
}
