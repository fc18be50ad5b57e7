package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// gwCluster is GET /v1/cluster's answer.
type gwCluster struct {
	Name        string `json:"name"`
	Partitioned bool   `json:"partitioned"`
	Reason      string `json:"reason"`
	Coordinator string `json:"coordinator"`
	Boards      int    `json:"boards"`
	Gateways    []struct {
		Name          string     `json:"name"`
		Alive         bool       `json:"alive"`
		LastHeartbeat *time.Time `json:"last_heartbeat"`
		HeardMs       string     `json:"heard_ms"` // int64 in proto JSON
		Boards        int        `json:"boards"`
		Lines         int        `json:"lines"`
		Coordinator   bool       `json:"coordinator"`
		API           string     `json:"api"`
	} `json:"gateways"`
}

// cluster runs `gw cluster` (the cluster of gateways as the gateway asked
// sees it) and `gw cluster remove NAME` (forget a stopped gateway).
func (c *gwClient) cluster(ctx context.Context, args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
	case len(args) == 2 && args[0] == "remove":
		var rm struct {
			Name   string   `json:"name"`
			Boards []string `json:"boards"`
		}
		raw, err := c.call(ctx, "DELETE", "/v1/cluster/gateways/"+url.PathEscape(args[1]), nil, &rm)
		if err != nil {
			return err
		}
		if c.output == "json" {
			return writeJSON(stdout, raw)
		}
		fmt.Fprintf(stdout, "gateway %s removed, with the records of %d boards", rm.Name, len(rm.Boards))
		if len(rm.Boards) > 0 {
			fmt.Fprintf(stdout, ": %v", rm.Boards)
		}
		fmt.Fprintln(stdout)
		return nil
	default:
		return fmt.Errorf("%w: gw cluster [remove NAME]", errUsage)
	}
	var cl gwCluster
	raw, err := c.call(ctx, "GET", "/v1/cluster", nil, &cl)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(stdout, raw)
	}
	state := "joined"
	if cl.Partitioned {
		state = "PARTITIONED: " + cl.Reason
	}
	coord := cl.Coordinator
	if coord == "" {
		coord = "none"
	}
	fmt.Fprintf(stdout, "gateway %s: %s; rollout coordinator %s; %d boards\n", cl.Name, state, coord, cl.Boards)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GATEWAY\tALIVE\tLAST HEARTBEAT\tHEARD\tBOARDS\tLINES\tCOORDINATOR\tAPI")
	for _, g := range cl.Gateways {
		alive, last, heard, coordinator := "yes", "-", "-", ""
		if !g.Alive {
			alive = "NO"
		}
		if g.LastHeartbeat != nil {
			last = g.LastHeartbeat.Local().Format(time.RFC3339)
		}
		if ms, err := strconv.ParseInt(g.HeardMs, 10, 64); err == nil && ms > 0 {
			heard = (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String() + " ago"
		}
		if g.Name == cl.Name {
			heard = "(this gateway)"
		}
		if g.Coordinator {
			coordinator = "yes"
		}
		api := g.API
		if api == "" {
			api = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", g.Name, alive, last, heard, g.Boards, g.Lines, coordinator, api)
	}
	return tw.Flush()
}
