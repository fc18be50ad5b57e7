package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promtoolBin finds promtool (Debian package prometheus); absent, the test
// is skipped, except in CI, which installs it.
func promtoolBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("promtool is not installed (CI installs the Debian package prometheus)")
	}
	t.Skip("promtool is not installed (apt-get install prometheus): the rules are not checked")
	return ""
}

// ruleFile is the part of a Prometheus rule file these tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// unitTests is the part of a promtool test file these tests read.
type unitTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

const (
	alertsFile = "monitoring/alerts.yml"
	rulesFile  = "monitoring/rules.yml"
	runbook    = "../docs/alerts.md"
)

// TestAlertRulesPromtool runs promtool check rules on the rule files and
// promtool test rules on every unit test file.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool := promtoolBin(t)
	out, err := exec.Command(promtool, "check", "rules", alertsFile, rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("promtool check rules:\n%s", out)
	tests, err := filepath.Glob("monitoring/tests/*.yml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no unit tests in monitoring/tests: %v", err)
	}
	out, err = exec.Command(promtool, append([]string{"test", "rules"}, tests...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules:\n%s", out)
}

var runbookHeading = regexp.MustCompile(`(?m)^## (Holo[A-Za-z0-9]+)\s*$`)

// TestAlertRulesComplete holds every alert to what an operator needs: a
// severity, a summary, a description, a runbook section in docs/alerts.md
// that exists, and promtool unit tests that see it fire and see it stay
// silent.
func TestAlertRulesComplete(t *testing.T) {
	t.Parallel()
	var alerts ruleFile
	readYAML(t, alertsFile, &alerts)
	raw, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range runbookHeading.FindAllStringSubmatch(string(raw), -1) {
		sections[m[1]] = true
	}

	fires, silent := map[string]int{}, map[string]int{}
	tests, _ := filepath.Glob("monitoring/tests/*.yml")
	for _, f := range tests {
		var u unitTests
		readYAML(t, f, &u)
		for _, rf := range []string{"../rules.yml", "../alerts.yml"} {
			if !slices.Contains(u.RuleFiles, rf) {
				t.Errorf("%s: rule_files lacks %s", f, rf)
			}
		}
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname]++
				} else {
					silent[a.Alertname]++
				}
			}
		}
	}

	var names []string
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("%s: group %s has a recording rule %s: recording rules go in %s", alertsFile, g.Name, r.Record, rulesFile)
				continue
			}
			names = append(names, r.Alert)
			where := fmt.Sprintf("%s: %s", alertsFile, r.Alert)
			if !strings.HasPrefix(r.Alert, "Holo") {
				t.Errorf("%s: alert names start with Holo", where)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q (critical, warning or info)", where, s)
			}
			for _, k := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no %s", where, k)
				}
			}
			if want := "docs/alerts.md#" + strings.ToLower(r.Alert); r.Annotations["runbook"] != want {
				t.Errorf("%s: runbook %q, want %q", where, r.Annotations["runbook"], want)
			}
			if !sections[r.Alert] {
				t.Errorf("%s: docs/alerts.md has no section \"## %s\"", where, r.Alert)
			}
			if fires[r.Alert] == 0 {
				t.Errorf("%s: no promtool test sees it fire", where)
			}
			if silent[r.Alert] == 0 {
				t.Errorf("%s: no promtool test sees it stay silent", where)
			}
		}
	}
	for s := range sections {
		if !slices.Contains(names, s) {
			t.Errorf("docs/alerts.md: section %s names no alert", s)
		}
	}
	for a := range fires {
		if !slices.Contains(names, a) {
			t.Errorf("promtool tests name %s, which is no alert", a)
		}
	}
	if len(names) == 0 {
		t.Fatal("no alerts")
	}
}

// TestPrometheusConfig checks prometheus/prometheus.yml as the compose
// stack runs it, with the rule files where compose mounts them: promtool
// check config then loads and checks the rules too.
func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	promtool := promtoolBin(t)
	dir := t.TempDir()
	copyFile := func(from, to string) {
		raw, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("prometheus/prometheus.yml", filepath.Join(dir, "prometheus.yml"))
	copyFile(alertsFile, filepath.Join(dir, "holofleet", "alerts.yml"))
	copyFile(rulesFile, filepath.Join(dir, "holofleet", "rules.yml"))
	out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	for _, want := range []string{"alerts.yml", "rules.yml"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("promtool check config did not load %s:\n%s", want, out)
		}
	}
}
