package main

import (
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// monitoringDir is the repository's deploy/monitoring/, from this package.
// The test that the alerts fire in a demo run lives there
// (deploy/monitoring/demo_test.go).
const monitoringDir = "../../deploy/monitoring"

// TestAlertRulesNameExportedMetrics parses every rule's expression and
// checks that each metric it reads is one the gateway exports (or a
// recording rule of the mixin, or Prometheus's own up): a metric renamed
// in code fails here, not silently in production.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	type rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	recorded := map[string]bool{"up": true}
	var all []rules
	for _, f := range []string{"rules.yml", "alerts.yml"} {
		raw, err := os.ReadFile(filepath.Join(monitoringDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var r rules
		if err := yaml.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				if rule.Record != "" {
					recorded[rule.Record] = true
				}
			}
		}
		all = append(all, r)
	}
	for _, r := range all {
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				names, err := queryNames(rule.Expr)
				if err != nil {
					t.Errorf("%s%s: %v", rule.Alert, rule.Record, err)
					continue
				}
				for _, n := range names {
					if !exported[n] && !recorded[n] {
						t.Errorf("%s%s reads %s, which the gateway does not export", rule.Alert, rule.Record, n)
					}
				}
			}
		}
	}
}
