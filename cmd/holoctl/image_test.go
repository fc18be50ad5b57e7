package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImagePackInspect(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "fw")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "fw.bin")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"image", "pack", "--version", "3.2.1", "--exe", exe, "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("pack: %d %s", code, stderr.String())
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"image", "inspect", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("inspect: %d %s %s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"version     3.2.1", "project     holo-board", "0x484f (host build)", "verify      ok"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("inspect lacks %q:\n%s", want, stdout.String())
		}
	}
	b, _ := os.ReadFile(out)
	b[len(b)-40] ^= 1
	_ = os.WriteFile(out, b, 0o644)
	stdout.Reset()
	if code := run(context.Background(), []string{"image", "inspect", out}, &stdout, &stderr); code != 1 || !strings.Contains(stdout.String(), "FAILED") {
		t.Fatalf("corrupt image: %d %s", code, stdout.String())
	}
	if code := run(context.Background(), []string{"image", "pack"}, &stdout, &stderr); code != 2 {
		t.Fatalf("pack without version: %d", code)
	}
}
