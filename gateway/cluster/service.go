package cluster

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/gateway/fleet"
)

var _ fleet.Service = (*Cluster)(nil)

// unreachable wraps why another gateway's board cannot be reached now.
func unreachable(id string, cause error) error {
	return fmt.Errorf("%w: board %s: %w", fleet.ErrUnreachable, id, cause)
}

// all returns the view of every board of the installation that matches
// f, ordered by id: this gateway's own boards as its fleet core sees them
// now, the others' from their records.
func (c *Cluster) all(f fleet.Filter) []fleet.BoardView {
	local := c.o.Local.Boards(fleet.Filter{})
	partitioned := c.Partitioned()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]fleet.BoardView, 0, len(c.records)+len(local))
	seen := make(map[string]bool, len(local))
	for _, v := range local {
		r := c.records[v.ID]
		if r != nil && !r.gone && r.View.Gateway != c.name {
			continue // another gateway's board this one reaches too
		}
		v.Gateway = c.name
		seen[v.ID] = true
		if f.Matches(v) {
			out = append(out, v)
		}
	}
	for id, r := range c.records {
		if r.gone || seen[id] {
			continue
		}
		if v := c.viewLocked(r, partitioned); f.Matches(v) {
			out = append(out, v)
		}
	}
	return sortByID(out)
}

// sortByID returns views ordered by id. It sorts their positions and
// copies each view once, rather than moving a few hundred bytes at every
// swap of a sort of the views themselves.
func sortByID(views []fleet.BoardView) []fleet.BoardView {
	order := make([]int32, len(views))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(views[a].ID, views[b].ID) })
	out := make([]fleet.BoardView, len(views))
	for i, j := range order {
		out[i] = views[j]
	}
	return out
}

// Boards implements fleet.Service: every board of the installation that
// matches f, ordered by id.
func (c *Cluster) Boards(f fleet.Filter) []fleet.BoardView {
	return c.all(f)
}

// Board implements fleet.Service.
func (c *Cluster) Board(id string) (fleet.BoardView, error) {
	owner := c.owner(id)
	switch owner {
	case "":
		return fleet.BoardView{}, fmt.Errorf("%w: %q", fleet.ErrUnknownBoard, id)
	case c.name:
		v, err := c.o.Local.Board(id)
		v.Gateway = c.name
		return v, err
	}
	partitioned := c.Partitioned()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.records[id]
	if r == nil || r.gone {
		return fleet.BoardView{}, fmt.Errorf("%w: %q", fleet.ErrUnknownBoard, id)
	}
	return c.viewLocked(r, partitioned), nil
}

// SetLabels implements fleet.Service: the owner changes and keeps them.
func (c *Cluster) SetLabels(id string, labels map[string]string) (fleet.BoardView, error) {
	owner := c.owner(id)
	switch owner {
	case "":
		return fleet.BoardView{}, fmt.Errorf("%w: %q", fleet.ErrUnknownBoard, id)
	case c.name:
		v, err := c.o.Local.SetLabels(id, labels)
		if err == nil {
			v.Gateway = c.name
			c.poke()
		}
		return v, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.CallTimeout)
	defer cancel()
	rep, err := c.rpc(ctx, owner, id, rpcRequest{Op: opLabels, ID: id, Labels: labels})
	if err != nil {
		return fleet.BoardView{}, err
	}
	if rep.View == nil {
		return fleet.BoardView{}, fmt.Errorf("%w: no view in the reply of %s", fleet.ErrBadReply, owner)
	}
	return *rep.View, nil
}

// Call implements fleet.Service: the board's owner runs it.
func (c *Cluster) Call(ctx context.Context, id, method, path string, body []byte) (fleet.Reply, error) {
	owner := c.owner(id)
	switch owner {
	case "":
		return fleet.Reply{}, fmt.Errorf("%w: %q", fleet.ErrUnknownBoard, id)
	case c.name:
		return c.o.Local.Call(ctx, id, method, path, body)
	}
	rep, err := c.rpc(ctx, owner, id, rpcRequest{Op: opCall, ID: id, Method: method, Path: path, Body: body})
	if err != nil {
		return fleet.Reply{}, err
	}
	return rep.Reply, nil
}

// CallRaw runs a request with a raw body on board id through its owner.
// Another gateway's board is reached only for firmware images the
// owner can read from the cluster itself (PUT /ota/image?sha256=...,
// see rawcall.go); other raw bodies fail with ErrTooLarge.
func (c *Cluster) CallRaw(ctx context.Context, id, method, path, contentType string, body io.Reader, length int64) (fleet.Reply, error) {
	owner := c.owner(id)
	switch owner {
	case "":
		return fleet.Reply{}, fmt.Errorf("%w: %q", fleet.ErrUnknownBoard, id)
	case c.name:
		return c.o.Local.CallRaw(ctx, id, method, path, contentType, body, length)
	}
	return c.callImage(ctx, owner, id, method, path, body)
}

// Do implements fleet.Service: the selector is split by owner, each
// gateway acts on its own boards (group frames on its lines), and the
// results come back merged, ordered by board id. Boards whose gateway is
// dead or cannot be reached report why in Error.
func (c *Cluster) Do(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	// A lead becomes its moment here, once, so that every gateway's part
	// fires at the same moment however long the routing took (the
	// gateways' clocks are their hosts', kept by NTP; docs/cluster.md).
	p, err := fleet.Prepare(sel, a, c.clk.Now())
	if err != nil {
		return nil, err
	}
	a = p.Resolved()
	if !a.At.IsZero() {
		// The owners answer once their part has fired: the routed calls
		// wait for the moment as well as for the call.
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, a.At.Add(c.o.CallTimeout))
			defer cancel()
		}
	}
	parts, expect, down, err := c.split(sel)
	if err != nil {
		return nil, err
	}
	results := map[string]fleet.Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for gw, sub := range parts {
		wg.Go(func() {
			var rs []fleet.Result
			err := down[gw]
			if err == nil {
				rs, err = c.doOn(ctx, gw, sub, a)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				for _, id := range expect[gw] {
					results[id] = fleet.Result{Board: id, Error: err.Error()}
				}
				return
			}
			for _, r := range rs {
				results[r.Board] = r
			}
		})
	}
	wg.Wait()
	// Exactly one result per board the records put in sel: a gateway
	// that answered for fewer (its fleet core lost a group or a board
	// while ownership moved) leaves the rest with the reason.
	for gw, ids := range expect {
		for _, id := range ids {
			if _, ok := results[id]; !ok {
				results[id] = fleet.Result{Board: id, Error: fmt.Errorf("%w: board %q: gateway %s did not act on it (it no longer reaches it)",
					fleet.ErrUnreachable, id, gw).Error()}
			}
		}
	}
	out := make([]fleet.Result, 0, len(results))
	for _, id := range sortedKeys(results) {
		out = append(out, results[id])
	}
	return out, nil
}

// doOn runs one gateway's part of a Do.
func (c *Cluster) doOn(ctx context.Context, gw string, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	if gw == c.name {
		return c.doLocal(ctx, sel, a)
	}
	rep, err := c.rpc(ctx, gw, "", rpcRequest{Op: opDo, Sel: &sel, Action: &a})
	if err != nil {
		return nil, err
	}
	return rep.Results, nil
}

// doLocal runs an action on this gateway's own boards of sel, leaving
// out the boards it reaches but another owns.
func (c *Cluster) doLocal(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	c.mu.Lock()
	for id := range c.standby {
		sel.Except = append(sel.Except, id)
	}
	c.mu.Unlock()
	rs, err := c.o.Local.Do(ctx, sel, a)
	if err != nil && (errorsIs(err, fleet.ErrUnknownGroup) || errorsIs(err, fleet.ErrUnknownBoard)) {
		// The records said this gateway has members; its fleet core
		// has just lost them. The others' results still count.
		return nil, nil
	}
	return rs, err
}

// split divides sel by owner: each gateway gets the part of sel that
// names its boards. expect lists the boards each part should answer for,
// so a gateway that fails to answer is reported per board; down holds
// why a gateway cannot be asked (dead, or this one is cut off).
func (c *Cluster) split(sel fleet.Selector) (parts map[string]fleet.Selector, expect map[string][]string, down map[string]error, err error) {
	views := c.all(fleet.Filter{})
	partitioned := c.Partitioned()
	parts, expect, down = map[string]fleet.Selector{}, map[string][]string{}, map[string]error{}
	c.mu.Lock()
	for _, v := range views {
		switch {
		case v.Gateway == c.name:
		case partitioned:
			down[v.Gateway] = fmt.Errorf("%w: %w", fleet.ErrUnreachable, ErrPartitioned)
		case !c.aliveLocked(v.Gateway):
			down[v.Gateway] = fmt.Errorf("%w: %w: %s", fleet.ErrUnreachable, ErrGatewayDown, v.Gateway)
		}
	}
	c.mu.Unlock()
	byID := make(map[string]fleet.BoardView, len(views))
	for _, v := range views {
		byID[v.ID] = v
	}
	picked := map[string]bool{}
	pick := func(v fleet.BoardView) {
		if !picked[v.ID] {
			picked[v.ID] = true
			expect[v.Gateway] = append(expect[v.Gateway], v.ID)
		}
	}
	part := func(gw string) fleet.Selector { return parts[gw] }
	if sel.All {
		for _, v := range views {
			p := part(v.Gateway)
			p.All = true
			parts[v.Gateway] = p
			pick(v)
		}
	}
	for _, g := range sel.Groups {
		found := false
		for _, v := range views {
			if !slices.Contains(v.Groups, g) {
				continue
			}
			found = true
			p := part(v.Gateway)
			if !slices.Contains(p.Groups, g) {
				p.Groups = append(p.Groups, g)
			}
			parts[v.Gateway] = p
			pick(v)
		}
		if !found {
			return nil, nil, nil, fmt.Errorf("%w: %d", fleet.ErrUnknownGroup, g)
		}
	}
	for _, id := range sel.Boards {
		v, ok := byID[id]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: %q", fleet.ErrUnknownBoard, id)
		}
		p := part(v.Gateway)
		if !slices.Contains(p.Boards, id) {
			p.Boards = append(p.Boards, id)
		}
		parts[v.Gateway] = p
		pick(v)
	}
	if len(sel.Labels) > 0 {
		f := fleet.Filter{Labels: sel.Labels}
		for _, v := range views {
			if f.Matches(v) {
				p := part(v.Gateway)
				p.Labels = sel.Labels
				parts[v.Gateway] = p
				pick(v)
			}
		}
	}
	return parts, expect, down, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
