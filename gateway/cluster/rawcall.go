package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// imageSHA returns the artifact a PUT /ota/image?sha256=... names.
func imageSHA(method, path string) (string, bool) {
	p := strings.TrimPrefix(path, "/api/v1")
	rest, ok := strings.CutPrefix(p, "/ota/image?")
	if method != http.MethodPut || !ok {
		return "", false
	}
	q, err := url.ParseQuery(rest)
	if err != nil || len(q.Get("sha256")) != 64 {
		return "", false
	}
	return q.Get("sha256"), true
}

// callImage asks gateway gw to send a firmware image to its board id:
// the gateway reads the image from its own store (fetched from the
// cluster when it lacks it), so the image never crosses the engine once
// per board. body is read through (at the pace its reader allows, which
// keeps a rollout's bandwidth limit and byte counts) and dropped.
func (c *Cluster) callImage(ctx context.Context, gw, id, method, path string, body io.Reader) (fleet.Reply, error) {
	sha, ok := imageSHA(method, path)
	if !ok || c.arts == nil {
		return fleet.Reply{}, fmt.Errorf("%w: %s %s: only firmware images are routed to gateway %s (board %s)",
			fleet.ErrTooLarge, method, path, gw, id)
	}
	var wg sync.WaitGroup
	if body != nil {
		wg.Go(func() { _, _ = io.Copy(io.Discard, body) })
	}
	rep, err := c.rpc(ctx, gw, id, rpcRequest{Op: opImage, ID: id, Method: method, Path: path, SHA256: sha})
	wg.Wait()
	return rep.Reply, err
}

// sendImage runs a routed image request: the artifact from this
// gateway's store to its board.
func (c *Cluster) sendImage(ctx context.Context, req rpcRequest) (fleet.Reply, error) {
	if c.arts == nil {
		return fleet.Reply{}, fmt.Errorf("%w: gateway %s keeps no firmware", fleet.ErrUnreachable, c.name)
	}
	f, art, err := c.arts.Open(req.SHA256)
	if err != nil {
		return fleet.Reply{}, err
	}
	defer f.Close()
	return c.o.Local.CallRaw(ctx, req.ID, req.Method, req.Path, "application/octet-stream", io.NewSectionReader(f, 0, art.Size), art.Size)
}

// callers are the routed requests being served, by the asking gateway's
// run ("name/boot"): they end when that run ends (its heartbeat stops or
// comes back with another boot), so a coordinator killed in the middle
// of a step does not leave its request running here.
type callers struct {
	mu sync.Mutex
	m  map[string]map[*int]context.CancelFunc
}

// bindCaller ends ctx when the asking gateway's run ends.
func (c *Cluster) bindCaller(ctx context.Context, from, boot string) (context.Context, func()) {
	if from == "" || from == c.name {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	k, tok := from+"/"+boot, new(int)
	c.callers.mu.Lock()
	if c.callers.m == nil {
		c.callers.m = map[string]map[*int]context.CancelFunc{}
	}
	if c.callers.m[k] == nil {
		c.callers.m[k] = map[*int]context.CancelFunc{}
	}
	c.callers.m[k][tok] = cancel
	c.callers.mu.Unlock()
	return ctx, func() {
		c.callers.mu.Lock()
		delete(c.callers.m[k], tok)
		if len(c.callers.m[k]) == 0 {
			delete(c.callers.m, k)
		}
		c.callers.mu.Unlock()
		cancel()
	}
}

// endCallers cancels the requests of gateway runs that ended.
func (c *Cluster) endCallers() {
	c.callers.mu.Lock()
	defer c.callers.mu.Unlock()
	for k, cancels := range c.callers.m {
		name, boot, _ := strings.Cut(k, "/")
		c.mu.Lock()
		g := c.gateways[name]
		ended := !c.aliveLocked(name) || (g != nil && g.hb.Boot != boot)
		c.mu.Unlock()
		if ended {
			for _, cancel := range cancels {
				cancel()
			}
			delete(c.callers.m, k)
		}
	}
}
