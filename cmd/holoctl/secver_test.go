package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
)

// TestImageSecureVersion: holoctl image pack and sign set the secure
// version (anti-rollback) of the description; out of range is refused.
func TestImageSecureVersion(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "exe")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "a.bin")
	if err := imagePack(context.Background(), []string{"--version", "2.0.0", "--exe", exe, "--secure-version", "3", "-o", out}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	desc := func(p string) image.Desc {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		im, err := image.Inspect(b)
		if err != nil {
			t.Fatal(err)
		}
		return im.Desc
	}
	if d := desc(out); d.SecureVersion != 3 {
		t.Fatalf("packed secure version %d", d.SecureVersion)
	}
	if err := imagePack(context.Background(), []string{"--version", "2.0.0", "--exe", exe, "--secure-version", "256", "-o", out}, io.Discard, io.Discard); err == nil {
		t.Fatal("secure version 256 packed")
	}
	key := filepath.Join(dir, "k.pem")
	if err := imageKeygen([]string{"-o", key}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	signed := filepath.Join(dir, "s.bin")
	if err := imageSign([]string{"--key", key, "--secure-version", "5", "-o", signed, out}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if d := desc(signed); d.SecureVersion != 5 {
		t.Fatalf("signed secure version %d", d.SecureVersion)
	}
	if err := imageSign([]string{"--key", key, "--secure-version", "6", signed}, io.Discard, io.Discard); err == nil {
		t.Fatal("the secure version of a signed image changed")
	}
}
