package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/holofleet/holofleet/bus/buildinfo"
)

// gwClient talks to a holo-gateway's REST API (/v1/...).
type gwClient struct {
	base   string
	token  string
	output string // "table" or "json"
	http   *http.Client
}

// gwFlags adds the flags every gateway command shares.
func gwFlags(fs *flag.FlagSet) *gwClient {
	c := &gwClient{http: &http.Client{}}
	def := os.Getenv("HOLO_GATEWAY")
	if def == "" {
		def = "http://127.0.0.1:8480"
	}
	fs.StringVar(&c.base, "gateway", def, "gateway base URL (env HOLO_GATEWAY)")
	c.token = os.Getenv("HOLO_TOKEN")
	fs.Func("token-file", "file holding the bearer token (mode 0600, one line; default: env HOLO_TOKEN)", func(path string) error {
		tok, err := readSecretFile(path)
		if err != nil {
			return err
		}
		c.token = tok
		return nil
	})
	fs.Func("token", "removed: a token on the command line shows in ps and shell history; use --token-file FILE or env HOLO_TOKEN", func(string) error {
		return errors.New("secrets are not taken on the command line (ps and shell history show them): use --token-file FILE or env HOLO_TOKEN")
	})
	fs.StringVar(&c.output, "o", "table", "output: table or json")
	return c
}

// readSecretFile reads a one-line secret (a trailing newline is
// ignored). A file others may read is refused: the secret is no longer
// one.
func readSecretFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by others (mode %v): chmod 0600 it", path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(raw), "\r\n")
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("%s: want one line holding the secret", path)
	}
	return s, nil
}

// userAgent names holoctl in the gateway's audit log and request log.
func userAgent() string { return "holoctl/" + buildinfo.Version }

// gwError is an error the gateway answered: {"error","message"} and the
// HTTP status.
type gwError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *gwError) Error() string {
	return fmt.Sprintf("gateway: %d %s: %s", e.Status, e.Code, e.Message)
}

// do sends a request and returns the response; a status of 400 or more
// becomes a *gwError.
func (c *gwClient) do(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		// Changing requests are JSON even without a body: a gateway in
		// demo mode refuses other types (a web page's cross-site posts).
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", userAgent())
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		e := &gwError{Status: resp.StatusCode}
		if json.Unmarshal(raw, e) != nil || e.Code == "" {
			e.Code, e.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(raw))
		}
		return nil, e
	}
	return resp, nil
}

// call sends a request and decodes the JSON reply into out (raw keeps the
// bytes as well).
func (c *gwClient) call(ctx context.Context, method, path string, body, out any) ([]byte, error) {
	resp, err := c.do(ctx, method, path, body, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("gateway: bad reply: %w", err)
		}
	}
	return raw, nil
}

// gwBoard is a board as GET /v1/boards lists it.
type gwBoard struct {
	ID            string            `json:"id"`
	Hostname      string            `json:"hostname"`
	Address       int               `json:"address"`
	Line          string            `json:"line"`
	URL           string            `json:"url"`
	Groups        []int             `json:"groups"`
	Labels        map[string]string `json:"labels"`
	Online        bool              `json:"online"`
	OfflineReason string            `json:"offline_reason"`
	Firmware      string            `json:"firmware"`
	LastSeen      *time.Time        `json:"last_seen"`
	Transports    []string          `json:"transports"`
	Gateway       string            `json:"gateway"`
}

const gwUsage = `holoctl gw [flags] COMMAND ...
  boards [--group N] [--selector k=v,...] [--firmware V] [--online|--offline]
  board ID
  labels ID [k=v ...]                      replace the board's labels (none: clear)
  call ID METHOD PATH [JSON]               run a board API request on one board
  do [--in D | --at T] SELECTOR ACTION [JSON]
                                           run an action; SELECTOR: all, group:N[,M],
                                           board:ID[,ID], or k=v[,k=v] labels
                                           ACTION: scene_apply, scene_end, leds,
                                           screen_show, screen_off, holo
                                           --in 500ms / --at RFC3339: a timed fire,
                                           every board changing at that moment
  events [--group N] [--selector ...] [--after N]   follow the event stream
  cluster                                  the cluster of gateways: each gateway's
                                           heartbeat, boards and lines, the coordinator
  cluster remove NAME                      forget a stopped gateway and its boards (admin)
flags (before COMMAND):`

func runGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, gwUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	if c.output != "table" && c.output != "json" {
		return fmt.Errorf("%w: -o table or -o json", errUsage)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: a gw command is needed", errUsage)
	}
	switch rest[0] {
	case "boards":
		return c.boards(ctx, rest[1:], stdout, stderr)
	case "board":
		if len(rest) != 2 {
			return fmt.Errorf("%w: gw board ID", errUsage)
		}
		return c.board(ctx, "GET", "/v1/boards/"+url.PathEscape(rest[1]), nil, stdout)
	case "labels":
		if len(rest) < 2 {
			return fmt.Errorf("%w: gw labels ID [k=v ...]", errUsage)
		}
		labels := map[string]string{}
		for _, kv := range rest[2:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%w: label %q is not k=v", errUsage, kv)
			}
			labels[k] = v
		}
		return c.board(ctx, "PATCH", "/v1/boards/"+url.PathEscape(rest[1])+"/labels", labels, stdout)
	case "call":
		return c.callBoard(ctx, rest[1:], stdout)
	case "do":
		return c.doAction(ctx, rest[1:], stdout)
	case "events":
		return c.events(ctx, rest[1:], stdout, stderr)
	case "cluster":
		return c.cluster(ctx, rest[1:], stdout)
	}
	return fmt.Errorf("%w: unknown gw command %q", errUsage, rest[0])
}

func usageErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// filterQuery parses the filter flags of boards and events.
func filterQuery(name string, args []string, stderr io.Writer, extra func(fs *flag.FlagSet)) (url.Values, error) {
	fs := flag.NewFlagSet("gw "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	group := fs.Int("group", 0, "only members of this group")
	sel := fs.String("selector", "", "label selector k=v,k2=v2")
	fw := fs.String("firmware", "", "only this firmware version")
	on := fs.Bool("online", false, "only online boards")
	off := fs.Bool("offline", false, "only offline boards")
	var after *uint64
	if extra == nil {
		after = fs.Uint64("after", 0, "also replay buffered events after this n")
	} else {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, usageErr(err)
	}
	q := url.Values{}
	if *group != 0 {
		q.Set("group", strconv.Itoa(*group))
	}
	if *sel != "" {
		q.Set("selector", *sel)
	}
	if *fw != "" {
		q.Set("firmware", *fw)
	}
	switch {
	case *on && *off:
		return nil, fmt.Errorf("%w: --online and --offline exclude each other", errUsage)
	case *on:
		q.Set("online", "true")
	case *off:
		q.Set("online", "false")
	}
	for _, id := range fs.Args() {
		q.Add("ids", id)
	}
	if after != nil && *after > 0 {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	return q, nil
}

func (c *gwClient) boards(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	q, err := filterQuery("boards", args, stderr, func(*flag.FlagSet) {})
	if err != nil {
		return err
	}
	path := "/v1/boards"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var bs []gwBoard
	raw, err := c.call(ctx, "GET", path, nil, &bs)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOSTNAME\tADDR\tGROUPS\tONLINE\tFIRMWARE\tVIA\tLABELS")
	for _, b := range bs {
		online := "yes"
		if !b.Online {
			online = "no"
		}
		addr := "-"
		if b.Address != 0 {
			addr = strconv.Itoa(b.Address)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, b.Hostname, addr, ints(b.Groups), online,
			b.Firmware, strings.Join(b.Transports, ","), labelsText(b.Labels))
	}
	return tw.Flush()
}

func (c *gwClient) board(ctx context.Context, method, path string, body any, stdout io.Writer) error {
	var b gwBoard
	raw, err := c.call(ctx, method, path, body, &b)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", b.ID)
	row("hostname", b.Hostname)
	row("address", strconv.Itoa(b.Address))
	row("line", b.Line)
	row("url", b.URL)
	row("groups", ints(b.Groups))
	row("labels", labelsText(b.Labels))
	if b.Online {
		row("online", "yes")
	} else {
		row("online", "no ("+b.OfflineReason+")")
	}
	row("firmware", b.Firmware)
	if b.LastSeen != nil {
		row("last seen", b.LastSeen.Local().Format(time.RFC3339))
	}
	row("via", strings.Join(b.Transports, ", "))
	if b.Gateway != "" {
		row("gateway", b.Gateway)
	}
	return tw.Flush()
}

// jsonArg parses an optional JSON argument.
func jsonArg(args []string, i int) (json.RawMessage, error) {
	if len(args) <= i {
		return nil, nil
	}
	if !json.Valid([]byte(args[i])) {
		return nil, fmt.Errorf("%w: %q is not valid JSON", errUsage, args[i])
	}
	return json.RawMessage(args[i]), nil
}

func (c *gwClient) callBoard(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 3 || len(args) > 4 {
		return fmt.Errorf("%w: gw call ID METHOD PATH [JSON]", errUsage)
	}
	body, err := jsonArg(args, 3)
	if err != nil {
		return err
	}
	req := map[string]any{"method": strings.ToUpper(args[1]), "path": args[2]}
	if body != nil {
		req["body"] = body
	}
	var reply struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	raw, err := c.call(ctx, "POST", "/v1/boards/"+url.PathEscape(args[0])+"/call", req, &reply)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	// The board's reply as it sent it, indented when it is JSON.
	var out bytes.Buffer
	if json.Indent(&out, []byte(reply.Body), "", "  ") != nil {
		out.Reset()
		out.WriteString(reply.Body)
	}
	if out.Len() == 0 {
		fmt.Fprintf(stdout, "%d\n", reply.Status)
		return nil
	}
	_, err = fmt.Fprintln(stdout, out.String())
	return err
}

// parseTarget turns a holoctl selector into the API's selector.
func parseTarget(s string) (map[string]any, error) {
	switch {
	case s == "all":
		return map[string]any{"all": true}, nil
	case strings.HasPrefix(s, "group:"):
		var gs []int
		for g := range strings.SplitSeq(strings.TrimPrefix(s, "group:"), ",") {
			n, err := strconv.Atoi(g)
			if err != nil || n < 1 || n > 31 {
				return nil, fmt.Errorf("%w: group %q (1-31)", errUsage, g)
			}
			gs = append(gs, n)
		}
		return map[string]any{"groups": gs}, nil
	case strings.HasPrefix(s, "board:"):
		return map[string]any{"boards": strings.Split(strings.TrimPrefix(s, "board:"), ",")}, nil
	case strings.Contains(s, "="):
		labels := map[string]string{}
		for kv := range strings.SplitSeq(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%w: label %q is not k=v", errUsage, kv)
			}
			labels[k] = v
		}
		return map[string]any{"labels": labels}, nil
	}
	return nil, fmt.Errorf("%w: selector %q (all, group:N, board:ID or k=v)", errUsage, s)
}

func (c *gwClient) doAction(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gw do", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	in := fs.Duration("in", 0, "fire this long from now, on every board at once (0-60s)")
	at := fs.String("at", "", "fire at this moment (RFC 3339), on every board at once")
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	args = fs.Args()
	if len(args) < 2 || len(args) > 3 {
		return fmt.Errorf("%w: gw do [--in DURATION | --at TIME] SELECTOR ACTION [JSON]", errUsage)
	}
	if *in != 0 && *at != "" {
		return fmt.Errorf("%w: give --in or --at, not both", errUsage)
	}
	if *in < 0 || (*in > 0 && *in < time.Millisecond) {
		return fmt.Errorf("%w: --in %v: a lead of 1ms to 60s", errUsage, *in)
	}
	var fireAt time.Time
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return fmt.Errorf("%w: --at %q: an RFC 3339 time (2026-03-01T20:00:00.5Z)", errUsage, *at)
		}
		fireAt = t
	}
	sel, err := parseTarget(args[0])
	if err != nil {
		return err
	}
	body, err := jsonArg(args, 2)
	if err != nil {
		return err
	}
	req := map[string]any{"selector": sel, "kind": args[1]}
	if body != nil {
		req["body"] = body
	}
	timed := *in != 0 || !fireAt.IsZero()
	if *in != 0 {
		req["lead_ms"] = in.Milliseconds()
	}
	if !fireAt.IsZero() {
		req["fire_at"] = fireAt.Format(time.RFC3339Nano)
	}
	var reply struct {
		Results []struct {
			Board   string    `json:"board"`
			Via     string    `json:"via"`
			Status  int       `json:"status"`
			Error   string    `json:"error"`
			Message string    `json:"message"`
			Fire    string    `json:"fire"`
			FiredAt time.Time `json:"fired_at"`
		} `json:"results"`
	}
	raw, err := c.call(ctx, "POST", "/v1/actions", req, &reply)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOARD\tVIA\tSTATUS\tRESULT")
	failed := 0
	for _, r := range reply.Results {
		st, res := "-", "ok"
		if r.Status != 0 {
			st = strconv.Itoa(r.Status)
		}
		if r.Via == "group" && r.Status == 0 {
			res = "sent (group frame; the next poll confirms)"
		}
		if timed && r.Fire != "" {
			res = "fired by " + r.Fire
			if !r.FiredAt.IsZero() {
				res += " at " + r.FiredAt.Format("15:04:05.000000")
			}
		}
		if r.Error != "" {
			failed++
			res = strings.TrimSpace(r.Error + ": " + r.Message)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Board, r.Via, st, res)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("the action failed on %d of %d boards", failed, len(reply.Results))
	}
	return nil
}

func (c *gwClient) events(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	q, err := filterQuery("events", args, stderr, nil)
	if err != nil {
		return err
	}
	path := "/v1/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, "GET", path, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Result *struct {
				N      string `json:"n"`
				Board  string `json:"board"`
				Type   string `json:"type"`
				Kind   string `json:"kind"`
				Seq    int    `json:"seq"`
				Data   string `json:"data"`
				Reason string `json:"reason"`
				Time   string `json:"time"`
			} `json:"result"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("gateway: bad event line: %w", err)
		}
		if line.Error != nil {
			return fmt.Errorf("gateway: event stream ended: %s", line.Error.Message)
		}
		if line.Result == nil {
			continue
		}
		if c.output == "json" {
			b, _ := json.Marshal(line.Result)
			fmt.Fprintln(stdout, string(b))
			continue
		}
		e := line.Result
		what := e.Kind
		switch e.Type {
		case "offline":
			what = e.Reason
		case "happening":
			what = fmt.Sprintf("%s #%d", e.Kind, e.Seq)
		}
		fmt.Fprintf(stdout, "%-6s %-30s %-14s %-10s %-20s %s\n", e.N, e.Time, e.Board, e.Type, what, e.Data)
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func writeJSON(w io.Writer, raw []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

func ints(xs []int) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func labelsText(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}
