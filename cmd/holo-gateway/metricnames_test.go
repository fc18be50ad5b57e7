package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// metricToken matches a metric name in Go source, quoted or inside a
// query (a recording rule's level:name:operation is not one).
var metricToken = regexp.MustCompile(`(?:^|[^:a-zA-Z0-9_])(holo_[a-z0-9_]+)`)

// constRef is a use of a gateway/metricname constant.
var constRef = regexp.MustCompile(`\bmetricname\.([A-Z][A-Za-z0-9]*)\b`)

// lineComment is a Go line comment (and, rarely, the rest of a line
// after a URL's //, which names no metric).
var lineComment = regexp.MustCompile(`(?m)//.*$`)

// codeLines returns the lines of a Go source that may name a metric or
// use a metricname constant, their line comments cut. The expressions
// then run over a few lines, not over whole files (which took seconds
// under the race detector).
func codeLines(text string) string {
	var b strings.Builder
	for l := range strings.Lines(text) {
		if !strings.Contains(l, "holo_") && !strings.Contains(l, "metricname.") {
			continue
		}
		b.WriteString(lineComment.ReplaceAllString(l, ""))
		if !strings.HasSuffix(l, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// goSources calls fn with every non-test Go file under dir (from the
// repository's root) and its text.
func goSources(t *testing.T, dir string, fn func(path, text string)) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join("../..", dir), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(strings.TrimPrefix(path, "../../"), string(raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetricNamesHaveOneHome: every metric name lives in
// gateway/metricname alone. Its names are distinct and of holofleet; no
// exporter under gateway/ nor dashboards/gen spells one out (each uses
// the constant, so a rename there reaches them all; comments may name
// them); and each constant is
// registered by some exporter (a name nothing exports would hide a
// broken alert).
func TestMetricNamesHaveOneHome(t *testing.T) {
	t.Parallel()
	home := map[string]bool{}
	for _, n := range metricname.All {
		if !strings.HasPrefix(n, "holo_") || home[n] {
			t.Errorf("metricname.All: %q twice or not holo_", n)
		}
		home[n] = true
	}
	raw, err := os.ReadFile("../../gateway/metricname/metricname.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := regexp.MustCompile(`(?m)^\t([A-Z][A-Za-z0-9]*)\s*=\s*"holo_`).FindAllStringSubmatch(string(raw), -1)
	if len(consts) != len(metricname.All) {
		t.Errorf("metricname declares %d names, All lists %d", len(consts), len(metricname.All))
	}
	used := map[string]bool{}
	for _, dir := range []string{"gateway", "dashboards/gen"} {
		goSources(t, dir, func(path, text string) {
			if strings.HasPrefix(path, "gateway/metricname/") {
				return
			}
			code := codeLines(text) // docs may name metrics
			for _, m := range metricToken.FindAllStringSubmatch(code, -1) {
				n := m[1]
				for _, suf := range []string{metricname.Bucket, metricname.Sum, metricname.Count} {
					if !home[n] && home[strings.TrimSuffix(n, suf)] {
						n = strings.TrimSuffix(n, suf)
					}
				}
				if home[n] {
					t.Errorf("%s spells out %s: use its gateway/metricname constant", path, m[1])
				}
			}
			if strings.HasPrefix(path, "gateway/") {
				for _, m := range constRef.FindAllStringSubmatch(code, -1) {
					used[m[1]] = true
				}
			}
		})
	}
	for _, c := range consts {
		if !used[c[1]] {
			t.Errorf("metricname.%s: no exporter under gateway/ registers it", c[1])
		}
	}
}

// TestAlertRulesReadHomedMetrics: every metric a recording or alerting
// rule of deploy/monitoring reads is a gateway/metricname name (or a
// histogram series of one, a recording rule of the mixin, or Prometheus's
// own up); TestAlertRulesNameExportedMetrics checks that a real gateway
// exports it.
func TestAlertRulesReadHomedMetrics(t *testing.T) {
	home := map[string]bool{"up": true}
	for _, n := range metricname.All {
		home[n] = true
		for _, suf := range []string{metricname.Bucket, metricname.Sum, metricname.Count} {
			home[n+suf] = true
		}
	}
	type rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
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
					home[rule.Record] = true
				}
			}
		}
		all = append(all, r)
	}
	n := 0
	for _, r := range all {
		for _, g := range r.Groups {
			for _, rule := range g.Rules {
				names, err := queryNames(rule.Expr)
				if err != nil {
					t.Errorf("%s%s: %v", rule.Alert, rule.Record, err)
					continue
				}
				for _, name := range names {
					n++
					if !home[name] {
						t.Errorf("%s%s reads %s, which gateway/metricname does not name", rule.Alert, rule.Record, name)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the rules read no metric")
	}
}
