package cluster_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/holofleet/holofleet/gateway/cluster"
)

// How test gateways log in to the engines the tests start: engine URLs
// carry no credentials, so each joining gateway gets a credentials file
// (--cluster-credentials). engines maps an engine's host:port (or a
// proxy's in front of it) to what a gateway needs to join it.
var engines sync.Map // host:port -> engineRef

type engineRef struct {
	// data is the --data of the gateway running the embedded engine:
	// each joining gateway gets its own user minted there.
	data string
	// creds is the credentials file of an external engine (the cluster
	// secret; the test nats-servers want no login).
	creds string
}

func hostsOf(rawURL string) []string {
	var out []string
	for u := range strings.SplitSeq(rawURL, ",") {
		if p, err := url.Parse(strings.TrimSpace(u)); err == nil && p.Host != "" {
			out = append(out, p.Host)
		}
	}
	return out
}

// registerEmbedded records the join URL a gateway's embedded engine
// printed (the harness calls it when it reads the banner).
func registerEmbedded(joinURL, data string) {
	for _, h := range hostsOf(joinURL) {
		engines.Store(h, engineRef{data: data})
	}
}

// registerExternal records the nodes of an external engine and its
// credentials file.
func registerExternal(rawURL, creds string) {
	for _, h := range hostsOf(rawURL) {
		engines.Store(h, engineRef{creds: creds})
	}
}

// registerAlias records a proxy (host:port) in front of target.
func registerAlias(alias, target string) {
	if ref, ok := engines.Load(target); ok {
		engines.Store(alias, ref)
	}
}

// externalCreds writes a credentials file holding a new cluster secret
// (and no login) in dir.
func externalCreds(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "cluster.creds")
	if err := (cluster.Credentials{Secret: "test-secret-" + strings.ReplaceAll(t.Name(), "/", "-")}).Write(path, "test engine"); err != nil {
		t.Fatal(err)
	}
	return path
}

// joinArgs are the flags gateway name needs to join the engine at
// rawURL: --cluster-credentials with a file made for it ("embedded" and
// unknown engines need none).
func joinArgs(t testing.TB, name, rawURL string) []string {
	t.Helper()
	if rawURL == cluster.Embedded {
		return nil
	}
	for _, h := range hostsOf(rawURL) {
		v, ok := engines.Load(h)
		if !ok {
			continue
		}
		ref := v.(engineRef)
		if ref.creds != "" {
			return []string{"--cluster-credentials", ref.creds}
		}
		dir, err := os.MkdirTemp("", "holo-creds")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path, err := cluster.MintCredentials(filepath.Join(ref.data, "engine"), name, filepath.Join(dir, name+".creds"))
		if err != nil {
			t.Fatal(err)
		}
		return []string{"--cluster-credentials", path}
	}
	return nil
}
