package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
)

var boardURL = regexp.MustCompile(`(?m)^\s+board \d+.*\s(http://127\.0\.0\.1:\d+)$`)

// waitOut waits until the gateway's output holds want.
func waitOut(t *testing.T, out *syncBuffer, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out.String()
}

func post(t *testing.T, url, ctype string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestTrustedKeyFlag: with --trusted-key (and a --revoked-key) the
// gateway refuses, before storing anything, what the trusted key did not
// sign, and its demo boards burn the key that is not revoked.
func TestTrustedKeyFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	t.Parallel()
	ks := sigtest.NewKeys(t)
	dir := t.TempDir()
	pub := ks.Trusted.WritePub(t, dir, "release.pem.pub")
	old := ks.Revoked.WritePub(t, dir, "old.pem.pub")
	base, out := start(t, "demo", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--demo-boards", "1", "--demo-groups", "1",
		"--trusted-key", pub, "--trusted-key", old, "--revoked-key", old)
	waitOut(t, out, "firmware: uploads must be signed by "+ks.Trusted.Digest.Short()+" ("+pub+"), "+ks.Revoked.Digest.Short()+" ("+old+") revoked")
	banner := waitOut(t, out, "secure boot: new boards burn "+ks.Trusted.Digest.Short())
	for _, c := range sigtest.Cases(t, ks, "2.0.0") {
		code, body := post(t, base+"/v1/artifacts?name="+c.Name, "application/octet-stream", c.Image)
		switch {
		case c.Structural:
			if code != 400 || !strings.Contains(body, "invalid image") {
				t.Errorf("%s: %d %s", c.Name, code, body)
			}
		case c.Want != nil:
			if code != 400 || !strings.Contains(body, "image not trusted: "+c.Want.Error()) {
				t.Errorf("%s: %d %s", c.Name, code, body)
			}
		default:
			if code != 200 || !strings.Contains(body, `"trust":"trusted"`) {
				t.Errorf("%s: %d %s", c.Name, code, body)
			}
		}
	}
	if code, body := get(t, base+"/v1/artifacts", ""); code != 200 || strings.Count(body, `"trust":"trusted"`) != 2 || strings.Count(body, `"sha256"`) != 2 {
		t.Errorf("stored: %s", body)
	}
	m := boardURL.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no board URL in the banner:\n%s", banner)
	}
	code, body := get(t, m[1]+"/api/v1/ota", "")
	var st boardapi.OTAStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || !st.SecureBoot.Enabled ||
		len(st.SecureBoot.Keys) != 1 || st.SecureBoot.Keys[0].Digest != ks.Trusted.Digest.String() {
		t.Fatalf("demo board's GET /ota: %d %s", code, body)
	}
}

// TestDemoDevKeyChain is `make run`, `make image` and `holoctl fw upload`
// plus a rollout: holo-gateway demo started where the development key is
// trusts it without a flag, its boards burn it, and an image signed with
// it uploads trusted and rolls out to every board.
func TestDemoDevKeyChain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	dev := sigtest.NewKey(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	dev.WritePub(t, filepath.Join(dir, ".keys"), "dev-signing.pem.pub")
	t.Chdir(dir)
	base, out := start(t, "demo", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--demo-boards", "2", "--demo-groups", "1")
	waitOut(t, out, "uploads must be signed by "+dev.Digest.Short()+" ("+DemoKeyFile+"); the development key")
	waitOnline(t, base, 2, nil)
	code, body := post(t, base+"/v1/artifacts?name=holo-board-2.0.0.bin", "application/octet-stream", sigtest.Image(t, "2.0.0", 4000))
	if code != 400 || !strings.Contains(body, "not signed") {
		t.Fatalf("unsigned upload: %d %s", code, body)
	}
	code, body = post(t, base+"/v1/artifacts?name=holo-board-2.0.0.bin", "application/octet-stream",
		sigtest.Sign(t, sigtest.Image(t, "2.0.0", 4000), dev))
	var up struct {
		Artifact struct{ SHA256, Trust string }
	}
	if err := json.Unmarshal([]byte(body), &up); code != 200 || err != nil || up.Artifact.Trust != "trusted" {
		t.Fatalf("signed upload: %d %s", code, body)
	}
	plan := `{"artifact":"` + up.Artifact.SHA256 + `","target":{"all":true},"timeouts":{"restart":"30s"}}`
	code, body = post(t, base+"/v1/rollouts/dry-run", "application/json", []byte(plan))
	if code != 200 || !strings.Contains(body, `"boards":2`) || strings.Contains(body, `"board":`) {
		t.Fatalf("dry run: %d %s", code, body)
	}
	code, body = post(t, base+"/v1/rollouts", "application/json", []byte(plan))
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, body := get(t, base+"/v1/rollouts/"+r.ID, "")
		if strings.Contains(body, `"finished":true`) {
			if !strings.Contains(body, `"state":"done"`) || !strings.Contains(body, `"succeeded":2`) {
				t.Fatalf("rollout: %s", body)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rollout did not finish: %s", body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestKeyUsage: key flags are checked before anything starts.
func TestKeyUsage(t *testing.T) {
	ks := sigtest.NewKeys(t)
	dir := t.TempDir()
	pub := ks.Trusted.WritePub(t, dir, "k.pub")
	priv := ks.Trusted.WritePriv(t, dir, "k.pem")
	junk := filepath.Join(dir, "junk.pub")
	os.WriteFile(junk, []byte("not a key"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", dir, "--trusted-key", filepath.Join(dir, "nope.pub")}, "no such file"},
		{[]string{"--data", dir, "--trusted-key", priv}, "not a public key"},
		{[]string{"--data", dir, "--trusted-key", junk}, "unusable key"},
		{[]string{"--data", dir, "--trusted-key", pub, "--trusted-key", pub}, "given twice"},
		{[]string{"--data", dir, "--revoked-key", pub}, "--revoked-key needs --trusted-key"},
		{[]string{"--data", dir, "--trusted-key", pub, "--revoked-key", pub}, "every --trusted-key is revoked"},
		{[]string{"--data", dir, "--trusted-key", "none"}, "for demo mode"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d %q, want 2 with %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
