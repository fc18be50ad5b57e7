package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommittedDashboardsAreGenerated fails when dashboards/*.json differ
// from what the generator writes (run make dashboards), or when a
// dashboard there was not written by it.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		w, ok := want[name]
		if !ok {
			t.Errorf("dashboards/%s is not generated: add it to boards.go or remove it", name)
			continue
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Errorf("dashboards/%s differs from the generator's output: run make dashboards", name)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("dashboards/%s is not committed: run make dashboards", name)
	}
}

// TestDashboardsPassLint holds the committed dashboards to the linter's
// rules.
func TestDashboardsPassLint(t *testing.T) {
	var out strings.Builder
	n, err := lintDir("..", &out)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("%d findings:\n%s", n, out.String())
	}
}

// mutate returns a generated dashboard changed by fn.
func mutate(t *testing.T, fn func(d map[string]any)) []byte {
	t.Helper()
	raw, err := fleetOverview.build()
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	fn(d)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// firstPanel returns the first panel that is not a row.
func firstPanel(d map[string]any) map[string]any {
	for _, p := range d["panels"].([]any) {
		if pm := p.(map[string]any); pm["type"] != "row" {
			return pm
		}
	}
	return nil
}

func variable(d map[string]any, name string) map[string]any {
	for _, v := range d["templating"].(map[string]any)["list"].([]any) {
		if vm := v.(map[string]any); vm["name"] == name {
			return vm
		}
	}
	return nil
}

func setExpr(expr string) func(d map[string]any) {
	return func(d map[string]any) {
		firstPanel(d)["targets"].([]any)[0].(map[string]any)["expr"] = expr
	}
}

// TestLintCatches shows each rule finding what it is about, in a
// generated dashboard broken in one way.
func TestLintCatches(t *testing.T) {
	if got := lint(mutate(t, func(map[string]any) {})); len(got) != 0 {
		t.Fatalf("the unbroken dashboard has findings: %v", got)
	}
	const scope = `job=~"$job", instance=~"$instance"`
	for _, tc := range []struct {
		rule string
		fn   func(d map[string]any)
	}{
		{"uneditable", func(d map[string]any) { d["editable"] = true }},
		{"uneditable", func(d map[string]any) { delete(d, "editable") }},
		{"template-datasource", func(d map[string]any) { variable(d, "datasource")["name"] = "ds" }},
		{"template-datasource", func(d map[string]any) { variable(d, "datasource")["label"] = "Prometheus" }},
		{"template-job", func(d map[string]any) { variable(d, "job")["name"] = "jobs" }},
		{"template-job", func(d map[string]any) { variable(d, "job")["multi"] = false }},
		{"template-instance", func(d map[string]any) { variable(d, "instance")["allValue"] = ".*" }},
		{"template-instance", func(d map[string]any) { variable(d, "instance")["label"] = "Gateway" }},
		{"template-instance", func(d map[string]any) {
			variable(d, "instance")["datasource"] = map[string]any{"type": "prometheus", "uid": "prometheus"}
		}},
		{"template-label-promql", func(d map[string]any) { variable(d, "group")["query"] = "label_values(foo{, group)" }},
		{"template-label-promql", func(d map[string]any) { variable(d, "group")["query"] = "groups()" }},
		{"template-on-time-change", func(d map[string]any) { variable(d, "board")["refresh"] = 1 }},
		{"template-unused", func(d map[string]any) {
			list := d["templating"].(map[string]any)["list"].([]any)
			d["templating"].(map[string]any)["list"] = append(list, map[string]any{"name": "spare", "type": "query",
				"query": "label_values(up, spare)", "refresh": 2})
		}},
		{"panel-title-description", func(d map[string]any) { delete(firstPanel(d), "description") }},
		{"panel-units", func(d map[string]any) {
			firstPanel(d)["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unit"] = "furlongs"
		}},
		{"panel-units", func(d map[string]any) {
			delete(firstPanel(d)["fieldConfig"].(map[string]any)["defaults"].(map[string]any), "unit")
		}},
		{"panel-datasource", func(d map[string]any) {
			firstPanel(d)["datasource"] = map[string]any{"type": "prometheus", "uid": "prometheus"}
		}},
		{"panel-no-targets", func(d map[string]any) { firstPanel(d)["targets"] = []any{} }},
		{"target-promql", setExpr(`sum(up{` + scope + `}`)},
		{"target-promql", setExpr(`up{` + scope + `} offset $gap`)},
		{"target-job", setExpr(`up{instance=~"$instance"}`)},
		{"target-job", setExpr(`up{job="holo", instance=~"$instance"}`)},
		{"target-instance", setExpr(`up{` + scope + `} / on () group_left () count(up{job=~"$job"})`)},
		{"target-rate-interval", setExpr(`rate(x_total{` + scope + `}[5m])`)},
		{"target-rate-interval", setExpr(`irate(x_total{` + scope + `}[$__interval])`)},
		{"target-counter-agg", setExpr(`x_total{` + scope + `}`)},
		{"target-counter-agg", setExpr(`delta(x_total{` + scope + `}[$__rate_interval])`)},
	} {
		got := lint(mutate(t, tc.fn))
		if !slices.ContainsFunc(got, func(f string) bool { return strings.HasPrefix(f, tc.rule+":") }) {
			t.Errorf("%s: not found in %v", tc.rule, got)
		}
	}
}

// TestScoped adds job and instance to every selector and keeps Grafana's
// interval variables.
func TestScoped(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`up`, `up{instance=~"$instance",job=~"$job"}`},
		{`sum by (le) (rate(a_bucket{x="1"}[$__rate_interval]))`, `sum by (le) (rate(a_bucket{instance=~"$instance",job=~"$job",x="1"}[$__rate_interval]))`},
		{`increase(a_total[$__range])`, `increase(a_total{instance=~"$instance",job=~"$job"}[$__range])`},
		{`a{job="fixed"} / b`, `a{instance=~"$instance",job="fixed"} / b{instance=~"$instance",job=~"$job"}`},
		{`count(a == 0) or vector(0)`, `count(a{instance=~"$instance",job=~"$job"} == 0) or vector(0)`},
	} {
		got, err := scoped(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("scoped(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := scoped(`sum(`); err == nil {
		t.Error("a broken query was taken")
	}
}
