package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holofleet/holofleet/gateway/cluster"
)

// TestClusterURLWithCredentialsRefused: an engine URL with credentials is
// refused before anything starts, with an error that names the file flag
// and the environment variable and does not repeat the secret.
func TestClusterURLWithCredentialsRefused(t *testing.T) {
	for _, u := range []string{"nats://s3cr3t-token@127.0.0.1:4222", "nats://127.0.0.1:4222,nats://holo:s3cr3t-token@127.0.0.1:4223"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"--data", t.TempDir(), "--name", "gw2", "--cluster", u}, &out, &errb)
		if code != 2 {
			t.Fatalf("%s: exit %d, want 2 (%s)", u, code, errb.String())
		}
		msg := errb.String()
		if !strings.Contains(msg, "--cluster-credentials") || !strings.Contains(msg, cluster.CredentialsEnv) || strings.Contains(msg, "s3cr3t") {
			t.Errorf("%s: %s", u, msg)
		}
	}
}

// TestClusterFlagsUsage: joining an engine needs a credentials file; the
// embedded engine makes its own, listens on loopback unless told, and
// takes a certificate with its key.
func TestClusterFlagsUsage(t *testing.T) {
	t.Setenv(cluster.CredentialsEnv, "")
	for _, args := range [][]string{
		{"--name", "gw2", "--cluster", "nats://127.0.0.1:4222"},
		{"--name", "gw1", "--cluster", "embedded", "--cluster-credentials", "f"},
		{"--name", "gw1", "--cluster", "embedded", "--cluster-cert", "c.pem"},
		{"--name", "gw2", "--cluster", "nats://127.0.0.1:4222", "--cluster-credentials", "f", "--cluster-key", "k.pem"},
		{"cluster"},
		{"cluster", "credentials", "--data", t.TempDir()},
		{"cluster", "credentials", "--data", t.TempDir(), "bad.name"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"--data", t.TempDir()}, args...), &out, &errb); args[0] != "cluster" && code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
		if args[0] == "cluster" {
			if code := run(context.Background(), args, &out, &errb); code != 2 {
				t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
			}
		}
	}
	if !loopbackListen(cluster.DefaultListen) {
		t.Errorf("the embedded engine listens on %s by default", cluster.DefaultListen)
	}
}

// TestClusterCredentialsCommand: holo-gateway cluster credentials makes a
// 0600 file with a login and the cluster secret, users lists it, revoke
// removes it.
func TestClusterCredentialsCommand(t *testing.T) {
	data := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"cluster", "credentials", "--data", data, "gw2"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	path := strings.TrimSpace(out.String())
	if path != filepath.Join(data, "engine", "creds", "gw2.creds") {
		t.Fatalf("path %q", path)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", st, err)
	}
	c, err := cluster.ReadCredentials(path)
	if err != nil || c.User != "gw2" || c.Password == "" || c.Secret == "" {
		t.Fatalf("%+v %v", c, err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"cluster", "users", "--data", data}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != "gw2" {
		t.Fatalf("users: %d %q", code, out.String())
	}
	if code := run(context.Background(), []string{"cluster", "revoke", "--data", data, "gw2"}, &out, &errb); code != 0 {
		t.Fatalf("revoke: %d %s", code, errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"cluster", "users", "--data", data}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != "" {
		t.Fatalf("users after revoke: %d %q", code, out.String())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the revoked credentials file is still there: %v", err)
	}
}
