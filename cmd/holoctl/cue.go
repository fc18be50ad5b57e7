package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"text/tabwriter"
	"time"

	"github.com/holofleet/holofleet/gateway/cue"
)

const cueUsage = `holoctl cue [flags] COMMAND ...
  go                  GO: fire the standby cue (operator)
  stop                STOP every wait and follow of the list (operator)
  back                move the standby one cue back (operator)
  jump N              fire cue N now; the standby moves past it (operator)
  standby N           put the standby on cue N without firing it (operator)
  state               the list's standby, running cues, last fired, timecode
  list                the cue lists (with --list: that list's cues)
  put FILE            save a cue list from a JSON file ("-": stdin; admin)
  delete              delete the list (admin)
The list is --list NAME, else the gateway's current one (the one last run).
flags (before COMMAND):`

func runCue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	list := fs.String("list", "", "the cue list (default: the gateway's current list)")
	asap := fs.Bool("asap", false, "go and jump fire at once rather than at the next moment every board can make")
	fs.Usage = func() {
		fmt.Fprintln(stderr, cueUsage)
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
		return fmt.Errorf("%w: a cue command is needed", errUsage)
	}
	name := *list
	if name == "" {
		name = "-"
	}
	base := "/v1/cuelists/" + url.PathEscape(name)
	q := ""
	if *asap {
		q = "?asap=true"
	}
	want := func(n int, form string) error {
		if len(rest) != n+1 {
			return fmt.Errorf("%w: cue %s", errUsage, form)
		}
		return nil
	}
	var method, path string
	var body any
	switch rest[0] {
	case "go", "stop", "back":
		if err := want(0, rest[0]); err != nil {
			return err
		}
		method, path = "POST", base+"/"+rest[0]
		if rest[0] == "go" {
			path += q
		}
	case "jump":
		if err := want(1, "jump N"); err != nil {
			return err
		}
		method, path = "POST", base+"/cues/"+url.PathEscape(rest[1])+"/start"+q
	case "standby":
		if err := want(1, "standby N"); err != nil {
			return err
		}
		method, path, body = "POST", base+"/standby", map[string]string{"cue": rest[1]}
	case "state":
		if err := want(0, "state"); err != nil {
			return err
		}
		method, path = "GET", base+"/state"
	case "list":
		if err := want(0, "list"); err != nil {
			return err
		}
		if *list != "" {
			return c.cueList(ctx, base, stdout)
		}
		return c.cueLists(ctx, stdout)
	case "put":
		if err := want(1, "put FILE"); err != nil {
			return err
		}
		if *list == "" {
			return fmt.Errorf("%w: cue put needs --list NAME", errUsage)
		}
		raw, err := readFileOrStdin(rest[1])
		if err != nil {
			return err
		}
		var l json.RawMessage
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("%w: %s: %v", errUsage, rest[1], err)
		}
		method, path, body = "PUT", base, l
	case "delete":
		if err := want(0, "delete"); err != nil {
			return err
		}
		method, path = "DELETE", base
	default:
		return fmt.Errorf("%w: unknown cue command %q", errUsage, rest[0])
	}
	var st cue.State
	var out any = &st
	if method == "PUT" || method == "DELETE" {
		out = nil
	}
	raw, err := c.call(ctx, method, path, body, out)
	if err != nil {
		return err
	}
	if c.output == "json" || out == nil {
		return writeJSON(stdout, raw)
	}
	return printCueState(stdout, st)
}

func readFileOrStdin(p string) ([]byte, error) {
	if p == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 8<<20))
	}
	return os.ReadFile(p)
}

// printCueState writes a list's state for people.
func printCueState(w io.Writer, st cue.State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	standby := string(st.Standby)
	if standby == "" {
		standby = "(end of list)"
	} else if st.StandbyName != "" {
		standby += "  " + st.StandbyName
	}
	fmt.Fprintf(tw, "list:\t%s\n", st.List)
	fmt.Fprintf(tw, "standby:\t%s\n", standby)
	if st.StandbyNotes != "" {
		fmt.Fprintf(tw, "notes:\t%s\n", st.StandbyNotes)
	}
	for _, r := range st.Running {
		fmt.Fprintf(tw, "running:\t%s %s\t%s\t%v left\n", r.Cue, r.Name, r.Phase, time.Duration(r.RemainingMS)*time.Millisecond)
	}
	if l := st.Last; l != nil {
		fmt.Fprintf(tw, "last fired:\t%s %s\t%d boards, %d failed\n", l.Cue, l.Name, l.Boards, l.Failed)
		for _, e := range l.Errors {
			fmt.Fprintf(tw, "\t%s\n", e)
		}
	}
	if tc := st.Timecode; tc != nil {
		fmt.Fprintf(tw, "timecode:\t%s at %s fps from %s, %s\n", tc.Position, tc.Rate, tc.Source, tc.Status)
	}
	return tw.Flush()
}

func (c *gwClient) cueLists(ctx context.Context, stdout io.Writer) error {
	var resp struct {
		Lists []cue.List `json:"lists"`
	}
	raw, err := c.call(ctx, "GET", "/v1/cuelists", nil, &resp)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LIST\tCUES")
	for _, l := range resp.Lists {
		fmt.Fprintf(tw, "%s\t%d\n", l.Name, len(l.Cues))
	}
	return tw.Flush()
}

func (c *gwClient) cueList(ctx context.Context, path string, stdout io.Writer) error {
	var l struct {
		cue.List
		State cue.State `json:"state"`
	}
	raw, err := c.call(ctx, "GET", path, nil, &l)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tCUE\tNAME\tACTIONS\tPRE-WAIT\tFOLLOW\tTIMECODE\tNOTES")
	for _, q := range l.Cues {
		mark := ""
		if q.Number == l.State.Standby {
			mark = ">"
		}
		follow := string(q.Follow)
		if q.Follow == cue.FollowAfter {
			follow += " " + (time.Duration(q.FollowMS) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\t%s\t%s\t%s\n", mark, q.Number, dash(q.Name), len(q.Actions), q.PreWait(), follow, dash(q.Timecode), dash(q.Notes))
	}
	return tw.Flush()
}
