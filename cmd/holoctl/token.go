package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
)

const tokenUsage = `holoctl token [flags] COMMAND ...   (needs an admin token)
  create NAME ROLE      make a token (ROLE: viewer, operator, admin); prints its secret once
  list                  list the tokens (names, roles, creation times)
  revoke NAME           delete a token
flags (before COMMAND):`

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := gwFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, tokenUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: a token command is needed", errUsage)
	}
	switch rest[0] {
	case "create":
		if len(rest) != 3 {
			return fmt.Errorf("%w: token create NAME ROLE", errUsage)
		}
		var reply struct {
			Secret string `json:"secret"`
		}
		raw, err := c.call(ctx, "POST", "/v1/tokens", map[string]string{"name": rest[1], "role": rest[2]}, &reply)
		if err != nil {
			return err
		}
		if c.output == "json" {
			return writeJSON(stdout, raw)
		}
		fmt.Fprintf(stderr, "token %q (%s) created; the secret is shown only now:\n", rest[1], rest[2])
		fmt.Fprintln(stdout, reply.Secret)
		return nil
	case "list":
		var toks []struct {
			Name    string `json:"name"`
			Role    string `json:"role"`
			Created string `json:"created"`
		}
		raw, err := c.call(ctx, "GET", "/v1/tokens", nil, &toks)
		if err != nil {
			return err
		}
		if c.output == "json" {
			return writeJSON(stdout, raw)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED")
		for _, t := range toks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Role, t.Created)
		}
		return tw.Flush()
	case "revoke":
		if len(rest) != 2 {
			return fmt.Errorf("%w: token revoke NAME", errUsage)
		}
		if _, err := c.call(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(rest[1]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token %q revoked\n", rest[1])
		return nil
	}
	return fmt.Errorf("%w: unknown token command %q", errUsage, rest[0])
}
