package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const auditUsage = `holoctl audit [flags]   (needs an admin token)
Lists the gateway's audit log, newest first: every change let in and every
request refused, on every surface (REST, gRPC, MQTT, OSC, the console).
TIME is an RFC 3339 time (2026-05-01T12:00:00Z) or an age: 90s, 15m, 2h, 7d.
flags:`

// auditEntry is a record as GET /v1/audit lists it.
type auditEntry struct {
	Time      string   `json:"time"`
	Token     string   `json:"token"`
	Role      string   `json:"role"`
	Client    string   `json:"client"`
	Surface   string   `json:"surface"`
	Agent     string   `json:"agent"`
	Operation string   `json:"operation"`
	Verb      string   `json:"verb"`
	Resource  string   `json:"resource"`
	Boards    []string `json:"boards"`
	Selector  string   `json:"selector"`
	Kind      string   `json:"kind"`
	Call      string   `json:"call"`
	Name      string   `json:"name"`
	Outcome   string   `json:"outcome"`
	Code      string   `json:"code"`
	Reason    string   `json:"reason"`
	RequestID string   `json:"request_id"`
}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	since := fs.String("since", "", "records at or after TIME")
	until := fs.String("until", "", "records before TIME")
	who := fs.String("who", "", "only this identity (a token's name, loopback, insecure-lab)")
	board := fs.String("board", "", "only records naming this board")
	outcome := fs.String("outcome", "", "allowed, denied or dropped")
	limit := fs.Int("limit", 0, "at most this many records (gateway default 100, at most 1000)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, auditUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if c.output != "table" && c.output != "json" {
		return fmt.Errorf("%w: -o table or -o json", errUsage)
	}
	q := url.Values{}
	now := time.Now()
	for name, v := range map[string]string{"since": *since, "until": *until} {
		if v == "" {
			continue
		}
		t, err := parseWhen(v, now)
		if err != nil {
			return fmt.Errorf("%w: --%s: %v", errUsage, name, err)
		}
		q.Set(name, t.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range map[string]string{"token": *who, "board": *board, "outcome": *outcome} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *limit != 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	path := "/v1/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var entries []auditEntry
	raw, err := c.call(ctx, "GET", path, nil, &entries)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWHO\tSURFACE\tCLIENT\tOPERATION\tTARGET\tOUTCOME\tCODE")
	for _, e := range entries {
		who := e.Token
		switch {
		case who == "":
			who = "-"
		case e.Role != "":
			who += " (" + e.Role + ")"
		}
		op := e.Operation
		if e.Agent != "" && strings.HasPrefix(e.Agent, "holoctl/") {
			op += " [holoctl]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time, who, e.Surface, dash(e.Client), dash(op),
			dash(target(e)), e.Outcome, e.Code)
	}
	return tw.Flush()
}

// target sums up what a record names.
func target(e auditEntry) string {
	var parts []string
	if e.Call != "" {
		parts = append(parts, e.Call)
	}
	if e.Kind != "" {
		parts = append(parts, e.Kind)
	}
	if len(e.Boards) > 0 {
		parts = append(parts, "boards="+strings.Join(e.Boards, ","))
	}
	if e.Selector != "" {
		parts = append(parts, e.Selector)
	}
	if e.Name != "" {
		parts = append(parts, e.Resource+" "+e.Name)
	}
	return strings.Join(parts, " ")
}

// parseWhen reads an RFC 3339 time or an age before now ("90s", "2h",
// "7d").
func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor an age (90s, 15m, 2h, 7d)", v)
	}
	return now.Add(-d), nil
}
