package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/piechart"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/holofleet/holofleet/gateway/metricname"
)

// A board is one dashboard as data: its rows of panels, and the variables
// beyond the ones every dashboard has (datasource, job, instance).
type board struct {
	file, uid, title, desc string
	vars                   []string // of variables below, in order
	rows                   []row
}

type row struct {
	title  string
	panels []panel
}

// Panel kinds.
const (
	kindTimeSeries = "timeseries"
	kindStat       = "stat"
	kindTable      = "table"
	kindPie        = "piechart"
	kindBarGauge   = "bargauge"
)

// A panel: a kind, a title, a description (what it shows and what to do
// about it), a unit (one of Grafana's unit ids), a width and a height on
// the 24-column grid, and its queries.
type panel struct {
	kind, title, desc, unit string
	w, h                    int
	queries                 []query
	stack                   bool // time series stacked (parts of a whole)
	// alarm, for a stat, colours it red from this value up (green below);
	// alarmBelow colours it red below the value instead.
	alarm      *float64
	alarmBelow bool
}

// redFrom marks a stat red from v up: a count of something wrong.
func (p panel) redFrom(v float64) panel { p.alarm = &v; return p }

// redBelow marks a stat red below v: a state that should hold.
func (p panel) redBelow(v float64) panel { p.alarm, p.alarmBelow = &v, true; return p }

// thresholds are the colour steps of a stat with an alarm value.
func (p panel) thresholds() *dashboard.ThresholdsConfigBuilder {
	low, high := "green", "red"
	if p.alarmBelow {
		low, high = "red", "green"
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).
		Steps([]dashboard.Threshold{{Color: low}, {Value: p.alarm, Color: high}})
}

// A query is PromQL written without job and instance: scoped() adds
// job=~"$job" and instance=~"$instance" to every selector.
type query struct {
	expr, legend string
	instant      bool
}

func q(expr, legend string) query { return query{expr: expr, legend: legend} }

// now is an instant query (stats and tables show the current value).
func now(expr, legend string) query { return query{expr: expr, legend: legend, instant: true} }

func ts(title, unit string, w, h int, desc string, qs ...query) panel {
	return panel{kind: kindTimeSeries, title: title, unit: unit, w: w, h: h, desc: desc, queries: qs}
}

func single(title, unit string, w, h int, desc string, qs ...query) panel {
	return panel{kind: kindStat, title: title, unit: unit, w: w, h: h, desc: desc, queries: qs}
}

func tab(title, unit string, w, h int, desc string, qs ...query) panel {
	return panel{kind: kindTable, title: title, unit: unit, w: w, h: h, desc: desc, queries: qs}
}

// The template variables a dashboard may add; each lists its values from
// the series the gateways export, within the chosen job and instance.
var variables = map[string]struct {
	label, metric string
	within        string // a further matcher (the board list follows the group)
}{
	"group":   {label: "Group", metric: metricname.GatewayBoardGroup},
	"board":   {label: "Board", metric: metricname.GatewayBoardGroup, within: `group=~"$group"`},
	"line":    {label: "Line", metric: metricname.GatewayLineBoards},
	"rollout": {label: "Rollout", metric: metricname.GatewayRolloutState},
}

// Stand-ins for Grafana's interval variables while a query goes through
// Prometheus's parser, which does not know them; each prints back as the
// duration given here.
var intervalVars = []struct{ variable, stand, printed string }{
	{"$__rate_interval", "7777s", "2h9m37s"},
	{"$__interval", "7778s", "2h9m38s"},
	{"$__range", "7779s", "2h9m39s"},
}

// scoped parses expr, adds the job and instance matchers to each selector
// that lacks them, and prints it in Prometheus's canonical form.
func scoped(expr string) (string, error) {
	for _, v := range intervalVars {
		expr = strings.ReplaceAll(expr, v.variable, v.stand)
	}
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return "", fmt.Errorf("%q: %w", expr, err)
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		var extra []*labels.Matcher
		for _, name := range []string{"job", "instance"} {
			have := false
			for _, m := range vs.LabelMatchers {
				have = have || m.Name == name
			}
			if !have {
				extra = append(extra, labels.MustNewMatcher(labels.MatchRegexp, name, "$"+name))
			}
		}
		// After the name matcher, before the query's own matchers.
		var out []*labels.Matcher
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				out = append(out, m)
			}
		}
		out = append(out, extra...)
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				out = append(out, m)
			}
		}
		vs.LabelMatchers = out
		return nil
	})
	s := e.String()
	for _, v := range intervalVars {
		s = strings.ReplaceAll(s, "["+v.printed+"]", "["+v.variable+"]")
		s = strings.ReplaceAll(s, "["+v.printed+":", "["+v.variable+":")
	}
	for _, v := range intervalVars {
		if strings.Contains(s, v.printed) {
			return "", fmt.Errorf("%q: %s printed back in an unexpected place", expr, v.variable)
		}
	}
	return s, nil
}

func ptr[T any](v T) *T { return &v }

var dsRef = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

func queryVar(name, label, def string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(dsRef).
		Query(dashboard.StringOrMap{String: ptr(def)}).Definition(def).
		Multi(true).IncludeAll(true).AllValue(".+").
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
}

// build turns a board into Grafana's dashboard JSON.
func (b board) build() ([]byte, error) {
	// The classic dashboard JSON (schema v1), not dashboardv2: file
	// provisioning, Grafana's import and the dashboard linter read it.
	//lint:ignore SA1019 see above
	d := dashboard.NewDashboardBuilder(b.title).Uid(b.uid).Description(b.desc).
		Tags([]string{"holofleet"}).Readonly().Timezone("browser").Refresh("30s").Time("now-6h", "now").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("holofleet").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"holofleet"}).AsDropdown(true).IncludeVars(true).KeepTime(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(queryVar("job", "Job", "label_values("+metricname.GatewayBuildInfo+", job)")).
		WithVariable(queryVar("instance", "Instance", `label_values(`+metricname.GatewayBuildInfo+`{job=~"$job"}, instance)`))
	for _, name := range b.vars {
		v, ok := variables[name]
		if !ok {
			return nil, fmt.Errorf("%s: no variable %q", b.file, name)
		}
		sel := `job=~"$job", instance=~"$instance"`
		if v.within != "" && slices.Contains(b.vars, "group") {
			sel += ", " + v.within
		}
		d.WithVariable(queryVar(name, v.label, fmt.Sprintf("label_values(%s{%s}, %s)", v.metric, sel, name)))
	}
	id := uint32(1)
	for _, r := range b.rows {
		d.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		id++
		for _, p := range r.panels {
			pb, err := p.builder(id)
			if err != nil {
				return nil, fmt.Errorf("%s: panel %q: %w", b.file, p.title, err)
			}
			d.WithPanel(pb)
			id++
		}
	}
	built, err := d.Build()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.file, err)
	}
	out, err := json.MarshalIndent(built, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func (p panel) targets() ([]cog.Builder[variants.Dataquery], error) {
	var out []cog.Builder[variants.Dataquery]
	for i, qu := range p.queries {
		expr, err := scoped(qu.expr)
		if err != nil {
			return nil, err
		}
		t := prometheus.NewDataqueryBuilder().Expr(expr).Datasource(dsRef).RefId(string(rune('A' + i)))
		if qu.legend != "" {
			t.LegendFormat(qu.legend)
		}
		if qu.instant {
			t.Instant()
		}
		if p.kind == kindTable {
			t.Format(prometheus.PromQueryFormatTable)
		}
		out = append(out, t)
	}
	return out, nil
}

func (p panel) builder(id uint32) (cog.Builder[dashboard.Panel], error) {
	if p.desc == "" || p.unit == "" || len(p.queries) == 0 {
		return nil, fmt.Errorf("a panel needs a description, a unit and a query")
	}
	tgs, err := p.targets()
	if err != nil {
		return nil, err
	}
	legend := common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)
	tooltip := common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
	reduce := common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})
	switch p.kind {
	case kindTimeSeries:
		b := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Unit(p.unit).Datasource(dsRef).
			Span(uint32(p.w)).Height(uint32(p.h)).Targets(tgs).Legend(legend).Tooltip(tooltip).FillOpacity(10).ShowPoints(common.VisibilityModeNever)
		if p.stack {
			b.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
		}
		return b, nil
	case kindStat:
		b := stat.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Unit(p.unit).Datasource(dsRef).
			Span(uint32(p.w)).Height(uint32(p.h)).Targets(tgs).ReduceOptions(reduce).GraphMode(common.BigValueGraphModeNone)
		if p.alarm != nil {
			b.Thresholds(p.thresholds()).ColorMode(common.BigValueColorModeBackground)
		}
		return b, nil
	case kindTable:
		return table.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Unit(p.unit).Datasource(dsRef).
			Span(uint32(p.w)).Height(uint32(p.h)).Targets(tgs), nil
	case kindPie:
		return piechart.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Unit(p.unit).Datasource(dsRef).
			Span(uint32(p.w)).Height(uint32(p.h)).Targets(tgs).ReduceOptions(reduce).Legend(piechart.NewPieChartLegendOptionsBuilder().
			ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementRight)), nil
	case kindBarGauge:
		return bargauge.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Unit(p.unit).Datasource(dsRef).
			Span(uint32(p.w)).Height(uint32(p.h)).Targets(tgs).ReduceOptions(reduce).Orientation(common.VizOrientationHorizontal), nil
	}
	return nil, fmt.Errorf("unknown panel kind %q", p.kind)
}
