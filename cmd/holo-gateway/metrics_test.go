package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/dmx"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/store"
)

// dashboardsDir is the repository's dashboards/, from this package.
const dashboardsDir = "../../dashboards"

// noBroker is an MQTT broker URL nothing listens on: gateways in these
// tests start no embedded broker (whose default port may be taken).
const noBroker = "tcp://127.0.0.1:1"

var (
	scrapeOnce sync.Once
	scrapeText string
	scrapeErr  string
)

// demoScrape starts a demo gateway (two boards on the simulated line and
// the LAN), makes it run commands, waits until the board metrics are
// there, and returns one scrape of /metrics. The scrape is taken once per
// test binary.
func demoScrape(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	scrapeOnce.Do(func() { scrapeText, scrapeErr = takeDemoScrape(t) })
	if scrapeErr != "" {
		t.Fatal(scrapeErr)
	}
	return scrapeText
}

func takeDemoScrape(t *testing.T) (string, string) {
	base, _ := start(t, "demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "2", "--demo-groups", "1", "--mqtt", noBroker)
	var ids []string
	deadline := time.Now().Add(30 * time.Second)
	for len(ids) < 2 {
		if time.Now().After(deadline) {
			return "", "demo boards not online"
		}
		time.Sleep(100 * time.Millisecond)
		code, body := get(t, base+"/v1/boards?online=true", "")
		var boards []struct {
			ID string `json:"id"`
		}
		if code == 200 && json.Unmarshal([]byte(body), &boards) == nil && len(boards) == 2 {
			for _, b := range boards {
				ids = append(ids, b.ID)
			}
		}
	}
	post := func(path, body string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	post("/v1/actions", `{"selector":{"all":true},"kind":"scene_end"}`)
	post("/v1/actions", `{"selector":{"boards":["`+ids[0]+`"]},"kind":"screen_off"}`)
	post("/v1/boards/"+ids[1]+"/call", `{"method":"GET","path":"/leds"}`)
	want := []string{
		"holo_gateway_build_info", "holo_gateway_boards", "holo_gateway_board_online",
		"holo_gateway_board_uptime_seconds", "holo_gateway_board_heap_free_bytes",
		"holo_gateway_board_link_receive_bytes_total", "holo_gateway_line_busy_seconds_total",
		"holo_gateway_command_duration_seconds_bucket", "holo_gateway_api_requests_total",
		"holo_gateway_api_request_seconds_bucket", "go_goroutines", "process_cpu_seconds_total",
	}
	var body string
	for {
		_, body = get(t, base+"/metrics", "")
		missing := ""
		for _, w := range want {
			if !regexp.MustCompile(`(?m)^` + w + `[{ ]`).MatchString(body) {
				missing = w
				break
			}
		}
		if missing == "" {
			return body, ""
		}
		if time.Now().After(deadline) {
			return "", fmt.Sprintf("no %s in the scrape:\n%s", missing, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	body := demoScrape(t)
	// Per-board series carry the board id; a board in one group has its
	// group, and command latency is by transport and kind.
	for _, re := range []string{
		`holo_gateway_board_uptime_seconds\{board="[^"]+"\} [0-9]`,
		`holo_gateway_board_group\{board="[^"]+",group="1"\} 1`,
		`holo_gateway_line_boards\{line="demo"\} [12]`,
		// A group frame when the line has identified both boards, else
		// one call each over the LAN (a loaded machine: the LAN is first).
		`holo_gateway_command_duration_seconds_count\{kind="scene_end",transport="(group|lan)"\} [12]`,
		`holo_gateway_command_duration_seconds_count\{kind="GET /leds",transport="(rs485|lan)"\} 1`,
	} {
		if !regexp.MustCompile(`(?m)^` + re).MatchString(body) {
			t.Errorf("scrape lacks %s:\n%s", re, grepLines(body, "holo_gateway_line_boards|command_duration_seconds_count"))
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus; CI installs it)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// captureRegisterer keeps the collectors registered through it.
type captureRegisterer struct {
	prometheus.Registerer
	cs []prometheus.Collector
}

func (c *captureRegisterer) Register(col prometheus.Collector) error {
	c.cs = append(c.cs, col)
	return c.Registerer.Register(col)
}

func (c *captureRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, col := range cs {
		if err := c.Register(col); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describedNames are the metric names the gateway's components declare,
// series or not (a failure counter with no failure yet, a rollout metric
// before any rollout, have none): every component constructor runs on a
// fresh store with a registerer that keeps what they register.
func describedNames(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := &captureRegisterer{Registerer: prometheus.NewRegistry()}
	// An external broker URL: the MQTT component starts no embedded broker
	// (its bridge connects only when run).
	// DMX on (sACN on a free loopback port): its counters by label have
	// no series until a desk sends.
	dmxOn := dmxFlags{sacn: setString{v: "127.0.0.1:0", set: true}, access: "show", lineShare: dmx.DefaultLineShare}
	e := &env{opts: options{data: dir, listen: "127.0.0.1:0", mqtt: noBroker, dmx: dmxOn}, db: db, fleet: fleet.New(fleet.Options{}), wiring: &wiring{},
		log: slog.New(slog.DiscardHandler), registerer: reg, stdout: io.Discard}
	for _, mk := range components {
		if _, err := mk(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// A gateway of a cluster exports the cluster's collector too (its
	// descriptions need no engine).
	reg.cs = append(reg.cs, (&cluster.Cluster{}).Collector())
	var names []string
	for _, c := range reg.cs {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names = append(names, m[1])
			}
		}
	}
	return names
}

// exportedNames are the metric families of a real scrape plus the names
// the metrics component declares, with the series names histograms and
// summaries add.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	add := func(n, typ string) {
		out[n] = true
		if typ == "histogram" || typ == "summary" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[n+s] = true
			}
		}
	}
	sc := bufio.NewScanner(strings.NewReader(demoScrape(t)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			add(f[2], f[3])
		}
	}
	for _, n := range describedNames(t) {
		add(n, "histogram") // harmless for the others: no panel invents _bucket names
	}
	return out
}

// pendingNames reads dashboards/pending-metrics.txt.
func pendingNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dashboardsDir, "pending-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.Lines(string(raw)) {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// grafanaVar matches Grafana's interval variables, which are not PromQL.
var grafanaVar = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)

// labelValues matches label_values(selector, label) of variable queries.
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// queryNames parses one PromQL expression and returns its metric names.
func queryNames(expr string) ([]string, error) {
	expr = grafanaVar.ReplaceAllString(expr, "5m")
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Definition string          `json:"definition"`
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func (p panel) walk(fn func(panel)) {
	fn(p)
	for _, c := range p.Panels {
		c.walk(fn)
	}
}

// prometheusOwn are series Prometheus itself makes, which a panel may
// read beside the gateway's: ALERTS holds the alerts of
// deploy/monitoring/alerts.yml.
var prometheusOwn = map[string]bool{"ALERTS": true, "up": true}

// TestDashboards parses every panel's and variable's query with
// Prometheus's parser and checks each metric it names is one the gateway
// exports, or one the MQTT bridge and rollouts are to export
// (pending-metrics.txt).
func TestDashboards(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) < 7 {
		t.Fatalf("dashboards: %v %v", files, err)
	}
	exported := exportedNames(t)
	pending := pendingNames(t)
	declared := declaredInSource(t)
	for _, p := range pending {
		switch {
		case exported[p]:
			t.Logf("pending %s is exported now: take it off dashboards/pending-metrics.txt", p)
		case declared[p] == "":
			t.Logf("pending %s: declared by no package yet", p)
		default:
			t.Logf("pending %s: declared in %s, not wired into the gateway yet", p, declared[p])
		}
	}
	used := map[string]bool{}
	uids := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		name := filepath.Base(f)
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: no uid or title", name)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share uid %q", name, other, d.UID)
		}
		uids[d.UID] = name
		check := func(where, expr string) {
			names, err := queryNames(expr)
			if err != nil {
				t.Errorf("%s: %s: %q does not parse: %v", name, where, expr, err)
				return
			}
			if len(names) == 0 {
				t.Errorf("%s: %s: %q names no metric", name, where, expr)
			}
			for _, n := range names {
				used[n] = true
				used[strings.TrimSuffix(n, "_bucket")] = true
				if !exported[n] && !prometheusOwn[n] && !slices.Contains(pending, n) && !slices.Contains(pending, strings.TrimSuffix(n, "_bucket")) {
					t.Errorf("%s: %s: %s is not a metric the gateway exports (nor pending)", name, where, n)
				}
			}
		}
		var vars []string
		for _, v := range d.Templating.List {
			vars = append(vars, v.Name)
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("%s: variable %s: %q is not label_values(selector, label)", name, v.Name, v.Definition)
				continue
			}
			check("variable "+v.Name, m[1])
		}
		for _, want := range []string{"datasource", "job", "instance"} {
			if !slices.Contains(vars, want) {
				t.Errorf("%s: no %s variable (has %v)", name, want, vars)
			}
		}
		n := 0
		for _, top := range d.Panels {
			top.walk(func(p panel) {
				if p.Type == "row" {
					return
				}
				n++
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", name, p.Title)
				}
				for _, tg := range p.Targets {
					check(fmt.Sprintf("panel %q", p.Title), tg.Expr)
				}
			})
		}
		if n == 0 {
			t.Errorf("%s: no panels", name)
		}
	}
	for _, p := range pending {
		if !used[p] {
			t.Errorf("pending %s is used by no panel: take it off the list", p)
		}
	}
	var unused []string
	for n := range exported {
		if strings.HasPrefix(n, "holo_gateway_") && !used[n] && !strings.HasSuffix(n, "_sum") && !strings.HasSuffix(n, "_count") && !strings.HasSuffix(n, "_bucket") {
			unused = append(unused, n)
		}
	}
	sort.Strings(unused)
	t.Logf("gateway metrics no panel shows: %v", unused)
}

func TestQueryNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
		bad  bool
	}{
		{expr: `sum by (le) (rate(a_bucket{instance=~"$gateway"}[$__rate_interval]))`, want: []string{"a_bucket"}},
		{expr: `x{board=~"$board"} * on (board) group_left () (y == 0)`, want: []string{"x", "y"}},
		{expr: `{__name__="z"}`, want: []string{"z"}},
		{expr: `rate(a[5m]`, bad: true},
	} {
		got, err := queryNames(tc.expr)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v (bad %v)", tc.expr, got, err, tc.want, tc.bad)
		}
	}
}

func TestLogFormat(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--data", t.TempDir(), "--log-format", "xml"}, &out, &errb); code != 2 {
		t.Errorf("--log-format xml: exit %d, want 2", code)
	}
	if testing.Short() {
		t.Skip("starts a simulated installation")
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--demo-boards", "1",
			"--demo-groups", "1", "--log-format", "json", "--mqtt", noBroker}, io.Discard, logs)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "rs485: board found") && time.Now().Before(deadline) { // the LAN may find the board first
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	found := false
	for l := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("not a JSON log record: %q", l)
			continue
		}
		if rec["msg"] == "rs485: board found" {
			found = true
			if line, _ := rec["line"].(string); !strings.HasSuffix(line, "demo") || rec["addr"] == nil {
				t.Errorf("board found without line and address: %v", rec)
			}
		}
	}
	if !found {
		t.Errorf("no board found record:\n%s", logs.String())
	}
}

// grepLines returns the lines of s matching re.
func grepLines(s, re string) string {
	var out []string
	r := regexp.MustCompile(re)
	for l := range strings.Lines(s) {
		if r.MatchString(l) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}

// metricLiteral matches a quoted metric name in Go source.
var metricLiteral = regexp.MustCompile(`"(holo_[a-z0-9_]+)"`)

// declaredInSource maps the metric names quoted in the gateway's Go
// sources (tests aside) to the file declaring them.
func declaredInSource(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir("../../gateway", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricLiteral.FindAllStringSubmatch(string(raw), -1) {
			out[m[1]] = strings.TrimPrefix(path, "../../")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
