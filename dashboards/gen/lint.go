package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file checks dashboards against the rules of Grafana's dashboard
// linter (grafana/dashboard-linter), written here from their descriptions
// rather than taken as a dependency:
//
//	uneditable                  the dashboard is not editable
//	template-datasource         a data source variable named datasource, labelled "Data source"
//	template-job, -instance     job and instance variables: Prometheus queries on $datasource,
//	                            labelled Job and Instance, multi-select, "All" meaning .+
//	template-label-promql       query variables are label_values/label_names/metrics/query_result of valid PromQL
//	template-on-time-change     query variables refresh when the time range changes
//	template-unused             every query variable is used by some panel
//	panel-datasource            panels query the templated data source
//	panel-title-description     every panel has a title and a description
//	panel-units                 every panel has a valid unit
//	panel-no-targets            every panel has a query
//	target-promql               every query is valid PromQL
//	target-rate-interval        rate and irate take [$__rate_interval]
//	target-job, target-instance every selector has job=~"$job" and instance=~"$instance"
//	target-counter-agg          a _total counter is read through rate, irate or increase
//
// Where the linter checks a rule for some panel types only (units and
// descriptions on graphs, stats, tables and time series), this check
// holds every panel but rows to it.

// lintDashboard is the part of a dashboard the rules read.
type lintDashboard struct {
	Title      string      `json:"title"`
	Editable   *bool       `json:"editable"`
	Panels     []lintPanel `json:"panels"`
	Templating struct {
		List []lintVar `json:"list"`
	} `json:"templating"`
}

type lintVar struct {
	Name       string          `json:"name"`
	Label      string          `json:"label"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *lintDS         `json:"datasource"`
	Multi      bool            `json:"multi"`
	AllValue   string          `json:"allValue"`
	Refresh    int             `json:"refresh"`
}

type lintDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type lintPanel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *lintDS     `json:"datasource"`
	Panels      []lintPanel `json:"panels"`
	Targets     []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// query returns a variable's query: a string, or the query field of an
// object.
func (v lintVar) query() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var m struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &m)
	return m.Query
}

// validUnits are Grafana's unit ids a holofleet panel may use.
var validUnits = []string{
	"none", "short", "percent", "percentunit", "string", "bool", "bool_yes_no", "bool_on_off",
	"bytes", "decbytes", "bits", "Bps", "bps", "binBps", "pps",
	"ns", "µs", "ms", "s", "m", "h", "d", "dtdurations", "dtdurationms", "dateTimeAsIso", "dateTimeFromNow",
	"hertz", "ops", "reqps", "rps", "wps", "iops", "cps", "opm", "rpm",
	"dB", "dBm", "celsius", "volt", "amp", "watt", "ppm",
}

// Stand-ins for Grafana's variables while a query goes through
// Prometheus's parser; the durations are chosen to appear in no query.
var lintIntervals = map[string]string{
	"$__rate_interval": "7777s", "${__rate_interval}": "7777s",
	"$__interval": "7778s", "${__interval}": "7778s",
	"$__range": "7779s", "${__range}": "7779s",
}

const rateIntervalStandIn = 7777

var bareVariable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

// parseQuery parses a PromQL query with Grafana's variables in it:
// interval variables become durations; other variables may appear only
// inside label values (quoted).
func parseQuery(expr string) (parser.Expr, error) {
	keys := make([]string, 0, len(lintIntervals))
	for k := range lintIntervals {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, k := range keys {
		expr = strings.ReplaceAll(expr, k, lintIntervals[k])
	}
	// Variables inside quotes are label values; outside they are not PromQL.
	var out strings.Builder
	quoted := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '"' && (i == 0 || expr[i-1] != '\\') {
			quoted = !quoted
		}
		if c == '$' && !quoted {
			if m := bareVariable.FindString(expr[i:]); m != "" {
				return nil, fmt.Errorf("variable %s outside a label value", m)
			}
		}
		out.WriteByte(c)
	}
	return parser.ParseExpr(out.String())
}

var templateQuery = regexp.MustCompile(`^\s*(label_values|label_names|metrics|query_result)\((.*)\)\s*$`)

// lint returns the findings for one dashboard, each starting with the
// rule's name.
func lint(raw []byte) []string {
	var d lintDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return []string{"json: " + err.Error()}
	}
	var out []string
	add := func(rule, format string, args ...any) {
		out = append(out, rule+": "+fmt.Sprintf(format, args...))
	}

	if d.Editable == nil || *d.Editable {
		add("uneditable", "the dashboard is editable")
	}

	vars := map[string]lintVar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	var dsVars []lintVar
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			dsVars = append(dsVars, v)
		}
	}
	switch {
	case len(dsVars) == 0:
		add("template-datasource", "no data source variable")
	default:
		for _, v := range dsVars {
			if v.Name != "datasource" {
				add("template-datasource", "data source variable named %q, not datasource", v.Name)
			}
			if v.Label != "Data source" {
				add("template-datasource", "data source variable labelled %q, not \"Data source\"", v.Label)
			}
			if v.query() != "prometheus" {
				add("template-datasource", "data source variable of type %q, not prometheus", v.query())
			}
		}
	}
	for _, name := range []string{"job", "instance"} {
		rule := "template-" + name
		v, ok := vars[name]
		if !ok {
			add(rule, "no %s variable", name)
			continue
		}
		if v.Type != "query" {
			add(rule, "%s variable of type %q, not a query", name, v.Type)
		}
		if v.Datasource == nil || (v.Datasource.UID != "$datasource" && v.Datasource.UID != "${datasource}") {
			add(rule, "%s variable does not query $datasource", name)
		}
		if want := strings.ToUpper(name[:1]) + name[1:]; v.Label != want {
			add(rule, "%s variable labelled %q, not %q", name, v.Label, want)
		}
		if !v.Multi {
			add(rule, "%s variable is not multi-select", name)
		}
		if v.AllValue != ".+" {
			add(rule, "%s variable's All value is %q, not .+", name, v.AllValue)
		}
	}

	// Every panel, rows' panels included.
	var panels []lintPanel
	var walk func([]lintPanel)
	walk = func(ps []lintPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			panels = append(panels, p)
		}
	}
	walk(d.Panels)

	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		qv := v.query()
		m := templateQuery.FindStringSubmatch(qv)
		if m == nil {
			add("template-label-promql", "variable %s: %q is not label_values, label_names, metrics or query_result", v.Name, qv)
		} else {
			arg := m[2]
			if m[1] == "label_values" {
				if i := strings.LastIndex(arg, ","); i >= 0 {
					arg = arg[:i]
				} else {
					arg = ""
				}
			}
			if m[1] != "label_names" && m[1] != "metrics" && arg != "" {
				if _, err := parseQuery(arg); err != nil {
					add("template-label-promql", "variable %s: %q: %v", v.Name, arg, err)
				}
			}
		}
		if v.Refresh != 2 {
			add("template-on-time-change", "variable %s refreshes %d, not on time range change (2)", v.Name, v.Refresh)
		}
		use := regexp.MustCompile(`\$` + regexp.QuoteMeta(v.Name) + `\b|\$\{` + regexp.QuoteMeta(v.Name) + `(:[^}]+)?\}`)
		used := false
		for _, p := range panels {
			for _, t := range p.Targets {
				used = used || use.MatchString(t.Expr)
			}
		}
		if !used {
			add("template-unused", "variable %s is used by no panel", v.Name)
		}
	}

	for _, p := range panels {
		where := fmt.Sprintf("panel %q", p.Title)
		if p.Title == "" || p.Description == "" {
			add("panel-title-description", "%s (id %d) has no title or no description", where, p.ID)
		}
		if !slices.Contains(validUnits, p.FieldConfig.Defaults.Unit) {
			add("panel-units", "%s has no or an unknown unit %q", where, p.FieldConfig.Defaults.Unit)
		}
		if p.Datasource == nil || (p.Datasource.UID != "$datasource" && p.Datasource.UID != "${datasource}") {
			add("panel-datasource", "%s does not use the templated data source", where)
		}
		if len(p.Targets) == 0 {
			add("panel-no-targets", "%s has no query", where)
		}
		for i, t := range p.Targets {
			tw := fmt.Sprintf("%s query %d", where, i)
			e, err := parseQuery(t.Expr)
			if err != nil {
				add("target-promql", "%s: %q: %v", tw, t.Expr, err)
				continue
			}
			for _, sel := range parser.ExtractSelectors(e) {
				for _, name := range []string{"job", "instance"} {
					ok := false
					for _, m := range sel {
						ok = ok || (m.Name == name && m.Type == labels.MatchRegexp && m.Value == "$"+name)
					}
					if !ok {
						add("target-"+name, "%s: a selector lacks %s=~\"$%s\": %q", tw, name, name, t.Expr)
					}
				}
			}
			parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
				switch n := n.(type) {
				case *parser.MatrixSelector:
					if len(path) > 0 {
						if c, ok := path[len(path)-1].(*parser.Call); ok && (c.Func.Name == "rate" || c.Func.Name == "irate") &&
							n.Range.Seconds() != rateIntervalStandIn {
							add("target-rate-interval", "%s: %s over %v, not $__rate_interval", tw, c.Func.Name, n.Range)
						}
					}
				case *parser.VectorSelector:
					if !strings.HasSuffix(n.Name, "_total") {
						return nil
					}
					ok := len(path) >= 2
					if ok {
						_, ok = path[len(path)-1].(*parser.MatrixSelector)
					}
					if ok {
						c, isCall := path[len(path)-2].(*parser.Call)
						ok = isCall && (c.Func.Name == "rate" || c.Func.Name == "irate" || c.Func.Name == "increase")
					}
					if !ok {
						add("target-counter-agg", "%s: counter %s is not read through rate, irate or increase", tw, n.Name)
					}
				}
				return nil
			})
		}
	}
	return out
}
