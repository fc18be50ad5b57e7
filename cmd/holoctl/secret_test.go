package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tokenFile writes a bearer token to a 0600 file for --token-file.
func tokenFile(t testing.TB, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTokenNotOnArgv: the token is taken from --token-file or
// $HOLO_TOKEN only; --token is refused (argv is public), and so is a
// token file others may read.
func TestTokenNotOnArgv(t *testing.T) {
	loose := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(loose, []byte("holo_x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gw", "--token", "holo_x", "boards"}, "not taken on the command line"},
		{[]string{"token", "--token", "holo_x", "list"}, "not taken on the command line"},
		{[]string{"gw", "--token-file", loose, "boards"}, "readable by others"},
		{[]string{"gw", "--token-file", filepath.Join(t.TempDir(), "none"), "boards"}, "no such file"},
		{[]string{"board", "--password", "s3cret", "info"}, "not taken on the command line"},
		{[]string{"board", "--password-file", loose, "info"}, "readable by others"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	c := gwFlagsFor(t, "--token-file", tokenFile(t, "holo_from_file"))
	if c.token != "holo_from_file" {
		t.Errorf("--token-file gave %q", c.token)
	}
	t.Setenv("HOLO_TOKEN", "holo_from_env")
	if c := gwFlagsFor(t); c.token != "holo_from_env" {
		t.Errorf("HOLO_TOKEN gave %q", c.token)
	}
}

// gwFlagsFor parses the gateway flags of args.
func gwFlagsFor(t *testing.T, args ...string) *gwClient {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c := gwFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}
