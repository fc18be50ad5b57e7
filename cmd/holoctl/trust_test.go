package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
)

// TestFirmwareTrustCLI is the signing chain as a user types it: holoctl
// image keygen and sign, then fw upload to a gateway trusting the key
// (the unsigned image refused, the signed one kept "trusted"), fw list
// with its TRUST and SIGNERS columns, and a dry run that names a board
// whose secure boot would refuse an image.
func TestFirmwareTrustCLI(t *testing.T) {
	holoctl := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if code := run(ctx, args, &out, &errb); code != want {
			t.Fatalf("holoctl %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "release.pem")
	holoctl(0, "image", "keygen", "-o", key)
	pubPEM, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := image.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := image.DigestOf(pub)
	other := sigtest.NewKey(t)

	// Board 0 burns the release key; board 1 is open.
	base, admin, _, _ := startFirmwareGatewayKeys(t, 2, func(i int) []image.KeyDigest {
		if i == 0 {
			return []image.KeyDigest{d}
		}
		return nil
	}, []image.KeyDigest{d})
	gw := []string{"--gateway", base, "--token-file", tokenFile(t, admin)}

	plain := filepath.Join(dir, "fw.bin")
	if err := os.WriteFile(plain, sigtest.Image(t, "2.0.0", 4000), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := holoctl(1, append([]string{"fw", "upload", plain}, gw...)...); !strings.Contains(out, "400 invalid_argument") ||
		!strings.Contains(out, "not signed") || !strings.Contains(out, d.Short()) {
		t.Errorf("unsigned upload:\n%s", out)
	}
	signed := filepath.Join(dir, "fw-signed.bin")
	holoctl(0, "image", "sign", "--key", key, plain, "-o", signed)
	out := holoctl(0, append([]string{"fw", "upload", signed}, gw...)...)
	for _, want := range []string{"trust", "trusted", "signer", d.String() + "  verifies, trusted by the gateway"} {
		if !strings.Contains(out, want) {
			t.Errorf("signed upload lacks %q:\n%s", want, out)
		}
	}
	out = holoctl(0, append([]string{"fw", "list"}, gw...)...)
	if !strings.Contains(out, "TRUST") || !strings.Contains(out, "SIGNERS") || !strings.Contains(out, "trusted") || !strings.Contains(out, d.Short()) {
		t.Errorf("fw list:\n%s", out)
	}

	// An open gateway keeps what the other key signed, marked signed,
	// and its dry run refuses the board that trusts only the release key.
	base2, admin2, _, ids2 := startFirmwareGatewayKeys(t, 2, func(i int) []image.KeyDigest {
		if i == 0 {
			return []image.KeyDigest{d}
		}
		return nil
	}, nil)
	gw2 := []string{"--gateway", base2, "--token-file", tokenFile(t, admin2)}
	foreign := filepath.Join(dir, "fw-other.bin")
	if err := os.WriteFile(foreign, sigtest.Sign(t, sigtest.Image(t, "2.0.1", 4000), other), 0o644); err != nil {
		t.Fatal(err)
	}
	var up struct{ Artifact struct{ SHA256 string } }
	if err := json.Unmarshal([]byte(holoctl(0, append([]string{"fw", "upload", foreign, "-o", "json"}, gw2...)...)), &up); err != nil {
		t.Fatal(err)
	}
	holoctl(0, append([]string{"fw", "upload", plain}, gw2...)...)
	out = holoctl(0, append([]string{"fw", "list"}, gw2...)...)
	if !strings.Contains(out, "unsigned") || !strings.Contains(out, "signed  ") || !strings.Contains(out, other.Digest.Short()) {
		t.Errorf("fw list of an open gateway:\n%s", out)
	}
	plan := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, []byte(`{"artifact":"`+up.Artifact.SHA256+`","target":{"all":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out = holoctl(0, append([]string{"rollout", "dry-run", plan}, gw2...)...)
	if !strings.Contains(out, ids2[0]) || !strings.Contains(out, "secure boot would refuse the image") || !strings.Contains(out, "1 boards in 1 waves, 1 refused") {
		t.Errorf("dry run:\n%s", out)
	}
}
