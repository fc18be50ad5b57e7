package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFlagsRemoved: secrets on argv are refused with the forms to
// use instead.
func TestSecretFlagsRemoved(t *testing.T) {
	for _, args := range [][]string{
		{"--board", "http://:s3cret@127.0.0.1:1"},
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-password", "s3cret"},
		{"--mqtt", "tcp://holo:s3cret@127.0.0.1:1"},
	} {
		_, err := parseServe(append([]string{"--data", t.TempDir()}, args...), false, &syncBuffer{})
		if err == nil || !strings.Contains(err.Error(), "not taken on the command line") {
			t.Errorf("%v: %v", args, err)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: the refusal repeats the secret: %v", args, err)
		}
	}
}

// TestWriteSecretFile: 0600 also over an existing looser file; a symbolic
// link is refused.
func TestWriteSecretFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSecretFile(p, "holo_x"); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	raw, _ := os.ReadFile(p)
	if fi.Mode().Perm() != 0o600 || string(raw) != "holo_x\n" {
		t.Errorf("mode %v, %q", fi.Mode().Perm(), raw)
	}
	l := filepath.Join(dir, "l")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), l); err != nil {
		t.Fatal(err)
	}
	if err := writeSecretFile(l, "holo_x"); err == nil {
		t.Error("wrote through a symbolic link")
	}
}
