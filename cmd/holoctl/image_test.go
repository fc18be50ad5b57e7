package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/bus/imagedelta"
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

func holoctl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

// TestImageSigning: keygen, sign twice with two keys, verify with and
// without a key, inspect, and the refusals.
func TestImageSigning(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "fw")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "fw.bin")
	if code, out := holoctl(t, "image", "pack", "--version", "3.2.1", "--exe", exe, "-o", img); code != 0 {
		t.Fatal(out)
	}
	keyA, keyB := filepath.Join(dir, "a.pem"), filepath.Join(dir, "b.pem")
	for _, k := range []string{keyA, keyB} {
		if code, out := holoctl(t, "image", "keygen", "-o", k); code != 0 {
			t.Fatal(out)
		}
	}
	if fi, err := os.Stat(keyA); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(keyA + ".pub"); err != nil {
		t.Fatal(err)
	}
	if code, out := holoctl(t, "image", "keygen", "-o", keyA); code != 1 || !strings.Contains(out, "exists") {
		t.Fatalf("keygen over an existing key: %d %s", code, out)
	}
	_, digestA := holoctl(t, "image", "pubkey", keyA+".pub")
	_, digestB := holoctl(t, "image", "pubkey", keyB)
	digestA, digestB = strings.TrimSpace(digestA), strings.TrimSpace(digestB)
	if len(digestA) != 64 || digestA == digestB {
		t.Fatalf("digests %q %q", digestA, digestB)
	}
	if code, out := holoctl(t, "image", "verify", img); code != 1 || !strings.Contains(out, "none (unsigned)") {
		t.Fatalf("verify unsigned: %d %s", code, out)
	}
	signed := filepath.Join(dir, "fw-signed.bin")
	if code, out := holoctl(t, "image", "sign", "--key", keyA, img, "-o", signed); code != 0 || !strings.Contains(out, "block 0 of 1") {
		t.Fatalf("sign: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "sign", "--key", keyB, signed); code != 0 || !strings.Contains(out, "block 1 of 2") {
		t.Fatalf("second signature in place: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "sign", "--key", keyB, signed); code != 1 || !strings.Contains(out, "already signed") {
		t.Fatalf("same key twice: %d %s", code, out)
	}
	code, out := holoctl(t, "image", "verify", signed)
	if code != 0 || !strings.Contains(out, "block 0     key "+digestA+"  signature ok") || !strings.Contains(out, "block 1     key "+digestB+"  signature ok") {
		t.Fatalf("verify: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "verify", "--key", keyB+".pub", signed); code != 0 || !strings.Contains(out, "key "+digestB+"  signature ok, key trusted") {
		t.Fatalf("verify --key: %d %s", code, out)
	}
	keyC := filepath.Join(dir, "c.pem")
	holoctl(t, "image", "keygen", "-o", keyC)
	if code, out := holoctl(t, "image", "verify", "--key", keyC+".pub", signed); code != 1 || !strings.Contains(out, "not trusted") {
		t.Fatalf("verify with an absent key: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "inspect", signed); code != 0 || !strings.Contains(out, "2 block(s)") || !strings.Contains(out, digestB) {
		t.Fatalf("inspect: %d %s", code, out)
	}
	// A flipped bit in the signature (CRC no longer matching) fails.
	b, _ := os.ReadFile(signed)
	b[len(b)-4096+120] ^= 1
	bad := filepath.Join(dir, "bad.bin")
	_ = os.WriteFile(bad, b, 0o644)
	if code, out := holoctl(t, "image", "verify", "--key", keyA, bad); code != 1 || !strings.Contains(out, "CRC") {
		t.Fatalf("verify a bad block: %d %s", code, out)
	}
	// Revocations go in before the first signature.
	rev := filepath.Join(dir, "rev.bin")
	if code, out := holoctl(t, "image", "sign", "--key", keyB, "--revoke", keyA+".pub", img, "-o", rev); code != 0 {
		t.Fatalf("sign --revoke: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "inspect", rev); code != 0 || !strings.Contains(out, "revokes     "+digestA) {
		t.Fatalf("inspect revokes: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "sign", "--key", keyC, "--revoke", keyA+".pub", rev); code != 1 || !strings.Contains(out, "signed already") {
		t.Fatalf("revoke on a signed image: %d %s", code, out)
	}
	if code, out := holoctl(t, "image", "pubkey", "--link", keyA); code != 0 || strings.Contains(out, "-----") || len(strings.TrimSpace(out)) < 80 {
		t.Fatalf("pubkey --link: %d %s", code, out)
	}
	if code, _ := holoctl(t, "image", "sign", img); code != 2 {
		t.Fatalf("sign without a key: %d", code)
	}
}

// TestImageDelta: holoctl image delta makes a delta that rebuilds the new
// image from the old; a file that is no image is refused.
func TestImageDelta(t *testing.T) {
	dir := t.TempDir()
	var imgs []string
	for i, v := range []string{"1.0.0", "1.0.1"} {
		exe := filepath.Join(dir, "fw"+v)
		body := bytes.Repeat([]byte("a firmware body that barely changes "), 3000)
		body[1000] = byte(i)
		if err := os.WriteFile(exe, body, 0o755); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, v+".bin")
		if code, msg := holoctl(t, "image", "pack", "--version", v, "--exe", exe, "-o", out); code != 0 {
			t.Fatalf("pack: %s", msg)
		}
		imgs = append(imgs, out)
	}
	patch := filepath.Join(dir, "p.delta")
	if code, msg := holoctl(t, "image", "delta", imgs[0], imgs[1], "-o", patch); code != 0 || !strings.Contains(msg, "delta of") {
		t.Fatalf("delta: %d %s", code, msg)
	}
	old, _ := os.ReadFile(imgs[0])
	want, _ := os.ReadFile(imgs[1])
	d, _ := os.ReadFile(patch)
	got, err := imagedelta.Apply(old, d)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("apply: %v", err)
	}
	if len(d) > len(want)/10 {
		t.Errorf("delta %d bytes for %d", len(d), len(want))
	}
	if code, _ := holoctl(t, "image", "delta", imgs[0], patch, "-o", filepath.Join(dir, "x")); code != 1 {
		t.Errorf("a delta as NEW: exit %d, want 1", code)
	}
	if code, _ := holoctl(t, "image", "delta", imgs[0]); code != 2 {
		t.Errorf("one file: exit %d, want 2", code)
	}
}
