package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

const dmxUsage = `holoctl dmx [flags] COMMAND
  patch                the gateway's DMX patch (fixtures, profiles' widths) and the sources heard now
  patch set FILE       replace the patch with FILE (JSON, docs/dmx.md; admin): refused whole, with
                       the reasons, when a fixture overlaps another or does not fit its universe
flags (before COMMAND):`

// dmxFixture and dmxView are GET /v1/dmx/patch as holoctl reads it.
type dmxFixture struct {
	Name        string `json:"name"`
	Universe    int    `json:"universe"`
	Address     int    `json:"address"`
	Profile     string `json:"profile"`
	Group       int    `json:"group"`
	Board       string `json:"board"`
	Line        string `json:"line"`
	LineAddress int    `json:"line_address"`
	Label       string `json:"label"`
}

func (f dmxFixture) target() string {
	switch {
	case f.Group != 0:
		return fmt.Sprintf("group %d", f.Group)
	case f.Board != "":
		return "board " + f.Board
	case f.Line != "":
		return fmt.Sprintf("line %s address %d", f.Line, f.LineAddress)
	}
	return "label " + f.Label
}

type dmxView struct {
	Patch struct {
		Fixtures  []dmxFixture `json:"fixtures"`
		Universes []struct {
			Universe int    `json:"universe"`
			Loss     string `json:"loss"`
		} `json:"universes"`
	} `json:"patch"`
	Profiles map[string]struct {
		Channels []string `json:"channels"`
	} `json:"profiles"`
	Sources []struct {
		Universe int     `json:"universe"`
		Protocol string  `json:"protocol"`
		Name     string  `json:"name"`
		Address  string  `json:"address"`
		Priority int     `json:"priority"`
		Rate     float64 `json:"rate_hz"`
		Winning  bool    `json:"winning"`
	} `json:"sources"`
	Inputs []string `json:"inputs"`
}

func runDMX(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dmx", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, dmxUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	if c.output != "table" && c.output != "json" {
		return fmt.Errorf("%w: -o table or -o json", errUsage)
	}
	rest := fs.Args()
	switch {
	case len(rest) == 1 && rest[0] == "patch":
		var v dmxView
		raw, err := c.call(ctx, "GET", "/v1/dmx/patch", nil, &v)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		return v.print(stdout)
	case len(rest) == 3 && rest[0] == "patch" && rest[1] == "set":
		b, err := os.ReadFile(rest[2])
		if err != nil {
			return err
		}
		if !json.Valid(b) {
			return fmt.Errorf("%w: %s is not JSON", errUsage, rest[2])
		}
		var v dmxView
		raw, err := c.call(ctx, "PUT", "/v1/dmx/patch", json.RawMessage(b), &v)
		if err != nil || c.output == "json" {
			return jsonOr(stdout, raw, err)
		}
		return v.print(stdout)
	}
	fs.Usage()
	return fmt.Errorf("%w: dmx patch, or dmx patch set FILE", errUsage)
}

func (v dmxView) print(w io.Writer) error {
	for _, in := range v.Inputs {
		fmt.Fprintln(w, "input:", in)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UNIVERSE\tADDRESS\tPROFILE\tTARGET\tNAME")
	for _, f := range v.Patch.Fixtures {
		last := f.Address + len(v.Profiles[f.Profile].Channels) - 1
		fmt.Fprintf(tw, "%d\t%d-%d\t%s\t%s\t%s\n", f.Universe, f.Address, last, f.Profile, f.target(), f.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range v.Patch.Universes {
		fmt.Fprintf(w, "universe %d: on loss, %s\n", u.Universe, u.Loss)
	}
	if len(v.Sources) == 0 {
		_, err := fmt.Fprintln(w, "sources: none heard")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UNIVERSE\tPROTOCOL\tSOURCE\tADDRESS\tPRIORITY\tRATE\tWINNING")
	for _, s := range v.Sources {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%.1f Hz\t%v\n", s.Universe, s.Protocol, s.Name, s.Address, s.Priority, s.Rate, s.Winning)
	}
	return tw.Flush()
}
