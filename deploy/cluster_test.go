package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestClusterCompose checks deploy/cluster/compose.yaml: three engine
// nodes routed to each other, and three gateways that build from the
// Dockerfile, use flags holo-gateway has, and join all three nodes.
func TestClusterCompose(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("cluster/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	var extra struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Secrets     []string          `yaml:"secrets"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &extra); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"nats1", "nats2", "nats3"}
	for _, n := range nodes {
		s, ok := c.Services[n]
		if !ok {
			t.Fatalf("no %s service", n)
		}
		cmd := strings.Join(s.Command, " ")
		for _, o := range nodes {
			if !strings.Contains(cmd, "nats://"+o+":6222") {
				t.Errorf("%s does not route to %s: %s", n, o, cmd)
			}
		}
		if !slices.Contains(s.Command, "-js") || s.Healthcheck == nil {
			t.Errorf("%s: want JetStream and a health check: %+v", n, s)
		}
	}
	flags := flagsOf(t, "holo-gateway", "demo")
	for _, g := range []string{"gw1", "gw2", "gw3"} {
		s, ok := c.Services[g]
		if !ok {
			t.Fatalf("no %s service", g)
		}
		if s.Build == nil {
			t.Fatalf("%s: no build", g)
		}
		if _, err := os.Stat(filepath.Join("cluster", s.Build.Context, s.Build.Dockerfile)); err != nil {
			t.Errorf("%s: build: %v", g, err)
		}
		if len(s.Command) == 0 || s.Command[0] != "demo" {
			t.Fatalf("%s command %v", g, s.Command)
		}
		checkFlags(t, "cluster compose "+g, "holo-gateway", strings.Join(s.Command[1:], " "), flags)
		i := slices.Index(s.Command, "--cluster")
		if i < 0 || i+1 >= len(s.Command) {
			t.Fatalf("%s does not join a cluster", g)
		}
		for _, n := range nodes {
			if !strings.Contains(s.Command[i+1], "nats://"+n+":4222") {
				t.Errorf("%s does not name engine node %s", g, n)
			}
		}
		// No credentials on the command line: each gateway's come from
		// its own file (a compose secret named by HOLO_CLUSTER_CREDENTIALS).
		if strings.Contains(strings.Join(s.Command, " "), "@") || strings.Contains(strings.Join(s.Command, " "), "PASSWORD") {
			t.Errorf("%s: credentials on the command line: %v", g, s.Command)
		}
		if env := extra.Services[g].Environment["HOLO_CLUSTER_CREDENTIALS"]; env != "/run/secrets/"+g+".creds" || !slices.Contains(extra.Services[g].Secrets, g+".creds") {
			t.Errorf("%s: credentials %q from secrets %v", g, env, extra.Services[g].Secrets)
		}
		if j := slices.Index(s.Command, "--name"); j < 0 || s.Command[j+1] != g {
			t.Errorf("%s: --name %v", g, s.Command)
		}
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); c.Volumes[src] == nil {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s: volume %s not declared", g, src)
				}
			}
		}
	}
}
