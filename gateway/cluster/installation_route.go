package cluster

// The installation's plans and exports over the whole cluster: the
// gateway a plan or an export came in on asks each other gateway, by the
// routed request path (route.go), for its own boards, as the gateway's
// own request (the caller was decided where it came in: a viewer plans,
// an admin exports).

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/installation"
)

// exportTimeout bounds another gateway's export when the caller set no
// deadline: it reads every file of its boards.
const exportTimeout = 5 * time.Minute

// Serve implements installation.Shared.
func (i *Installation) Serve(l installation.Local) {
	i.c.mu.Lock()
	i.c.install = l
	i.c.mu.Unlock()
}

// installExport is an export's routed reply.
type installExport struct {
	Description json.RawMessage `json:"description,omitempty"`
	Warnings    []string        `json:"warnings,omitempty"`
}

// installRouted answers another gateway's plan or export of its own
// boards.
func (c *Cluster) installRouted(ctx context.Context, req rpcRequest) (json.RawMessage, error) {
	c.mu.Lock()
	l := c.install
	c.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("%w: gateway %s keeps no installation", installation.ErrNotFound, c.name)
	}
	var v any
	var err error
	switch req.Op {
	case opInstallPlan:
		v, err = l.PlanOwn(ctx, req.Body)
	default:
		var x installExport
		x.Description, x.Warnings, err = l.ExportOwn(ctx)
		v = x
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// others lists the boards of every other gateway of the cluster, by
// gateway.
func (i *Installation) others() map[string][]fleet.BoardView {
	out := map[string][]fleet.BoardView{}
	for _, v := range i.c.all(fleet.Filter{}) {
		if v.Gateway != "" && v.Gateway != i.c.name {
			out[v.Gateway] = append(out[v.Gateway], v)
		}
	}
	return out
}

// askOthers sends op with body to every other gateway that has boards,
// at once, and hands each answer (or error) to got.
func (i *Installation) askOthers(ctx context.Context, op string, body []byte, got func(gw string, boards []fleet.BoardView, reply json.RawMessage, err error)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for gw, boards := range i.others() {
		wg.Go(func() {
			rep, err := i.c.rpc(ctx, gw, "", rpcRequest{Op: op, Body: body})
			mu.Lock()
			defer mu.Unlock()
			got(gw, boards, rep.Install, err)
		})
	}
	wg.Wait()
}

// PlanOthers implements installation.Shared.
func (i *Installation) PlanOthers(ctx context.Context, desc []byte) ([]installation.BoardPlan, error) {
	d, err := installation.FromJSON("plan", desc)
	if err != nil {
		return nil, err
	}
	var out []installation.BoardPlan
	i.askOthers(ctx, opInstallPlan, desc, func(gw string, boards []fleet.BoardView, reply json.RawMessage, err error) {
		var plans []installation.BoardPlan
		if err == nil {
			err = json.Unmarshal(reply, &plans)
		}
		if err != nil {
			for _, v := range boards {
				if t, ok, rerr := d.Resolve(v); rerr == nil && ok {
					why := fmt.Sprintf("gateway %s did not plan it: %v", gw, err)
					out = append(out, installation.BoardPlan{Board: v.ID, Profile: t.Profile, State: installation.StateUnreachable,
						Summary: why, Error: why, Gateway: gw})
				}
			}
			return
		}
		for _, bp := range plans {
			bp.Gateway = gw
			out = append(out, bp)
		}
	})
	return out, nil
}

// ExportOthers implements installation.Shared.
func (i *Installation) ExportOthers(ctx context.Context) ([][]byte, []string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, exportTimeout)
		defer cancel()
	}
	var descs [][]byte
	var warnings []string
	i.askOthers(ctx, opInstallExport, nil, func(gw string, boards []fleet.BoardView, reply json.RawMessage, err error) {
		var x installExport
		if err == nil {
			err = json.Unmarshal(reply, &x)
		}
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("gateway %s: its %d boards not exported: %v", gw, len(boards), err))
			return
		}
		warnings = append(warnings, x.Warnings...)
		if len(x.Description) > 0 {
			descs = append(descs, x.Description)
		}
	})
	return descs, warnings, nil
}
