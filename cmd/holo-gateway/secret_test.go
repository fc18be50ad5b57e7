package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterCredentialForms: the engine URLs with their credential come
// from --cluster-file (0600) or $HOLO_CLUSTER; one form at a time; a
// credential on --cluster itself is marked (warned at start).
func TestClusterCredentialForms(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "join")
	if err := os.WriteFile(good, []byte("nats://tok@127.0.0.1:4222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("nats://tok@127.0.0.1:4222\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := clusterFlags{file: good}
	if err := f.resolve(dir); err != nil || f.url != "nats://tok@127.0.0.1:4222" || f.argvSecret {
		t.Errorf("--cluster-file: %+v %v", f, err)
	}
	if f.joinFile != filepath.Join(dir, ClusterJoinFile) {
		t.Errorf("join file default %q", f.joinFile)
	}
	if err := (&clusterFlags{file: loose}).resolve(dir); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a loose --cluster-file: %v", err)
	}
	f = clusterFlags{url: "nats://tok@127.0.0.1:4222"}
	if err := f.resolve(dir); err != nil || !f.argvSecret {
		t.Errorf("credential on argv not marked: %+v %v", f, err)
	}
	f = clusterFlags{url: "embedded"}
	if err := f.resolve(dir); err != nil || f.argvSecret {
		t.Errorf("embedded: %+v %v", f, err)
	}
	t.Setenv("HOLO_CLUSTER", "nats://tok@10.0.0.1:4222")
	f = clusterFlags{}
	if err := f.resolve(dir); err != nil || f.url != "nats://tok@10.0.0.1:4222" {
		t.Errorf("$HOLO_CLUSTER: %+v %v", f, err)
	}
	if err := (&clusterFlags{file: good}).resolve(dir); err == nil {
		t.Error("--cluster-file with $HOLO_CLUSTER accepted")
	}
}

// TestSecretFlagsRemoved: secrets on argv are refused with the forms to
// use instead.
func TestSecretFlagsRemoved(t *testing.T) {
	for _, args := range [][]string{
		{"--mqtt", "tcp://127.0.0.1:1", "--mqtt-password", "s3cret"},
		{"--mqtt", "tcp://holo:s3cret@127.0.0.1:1"},
	} {
		_, err := parseServe(append([]string{"--data", t.TempDir()}, args...), false, &syncBuffer{})
		if err == nil || !strings.Contains(err.Error(), "not taken on the command line") {
			t.Errorf("%v: %v", args, err)
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
