package cluster

// This gateway's own boards, for the parts of the gateway that speak for
// its boards only: the MQTT bridge mirrors them under the shared base
// topic, the per-board metrics export them. A board this gateway reaches
// but another owns (standby) is left out, so that each board of the
// installation is mirrored and exported by exactly one gateway.

import (
	"context"
	"fmt"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// Own is this gateway's own boards as a fleet.Service: the boards of its
// fleet core that no other gateway owns. A board whose ownership is not
// settled yet (no record names an owner, or the records are not read
// yet) counts as this gateway's when it is on one of its RS485 lines,
// which no other gateway masters; a LAN board counts once this gateway's
// record of it is written. Make it with Cluster.Own.
type Own struct{ c *Cluster }

var _ fleet.Service = (*Own)(nil)

// Own returns this gateway's own boards.
func (c *Cluster) Own() *Own { return &Own{c: c} }

// Name is this gateway's name.
func (o *Own) Name() string { return o.c.name }

// Partitioned reports whether this gateway is cut off from the engine.
func (o *Own) Partitioned() bool { return o.c.Partitioned() }

// Alive reports whether gateway name is heard alive by its heartbeats
// (this gateway always is).
func (o *Own) Alive(name string) bool {
	o.c.mu.Lock()
	defer o.c.mu.Unlock()
	return o.c.aliveLocked(name)
}

// Changed is signalled (without blocking; one signal may stand for
// several changes) when the boards this gateway owns may have changed: a
// board taken over by it or from it, a new record, the records read at
// joining. It is meant for one reader (the MQTT bridge).
func (o *Own) Changed() <-chan struct{} { return o.c.ownChanged }

// owns reports whether this gateway owns board v of its fleet core.
func (c *Cluster) owns(v fleet.BoardView) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownsLocked(v)
}

func (c *Cluster) ownsLocked(v fleet.BoardView) bool {
	if c.standby[v.ID] {
		return false
	}
	r := c.records[v.ID]
	if !c.loaded || r == nil || r.gone {
		return v.Line != ""
	}
	return r.View.Gateway == c.name
}

// signalOwn tells Own's reader that ownership may have changed.
func (c *Cluster) signalOwn() {
	select {
	case c.ownChanged <- struct{}{}:
	default:
	}
}

// Boards implements fleet.Service: this gateway's own boards matching f.
func (o *Own) Boards(f fleet.Filter) []fleet.BoardView {
	vs := o.c.o.Local.Boards(f)
	out := vs[:0]
	o.c.mu.Lock()
	defer o.c.mu.Unlock()
	for _, v := range vs {
		if o.c.ownsLocked(v) {
			v.Gateway = o.c.name
			out = append(out, v)
		}
	}
	return out
}

// Board implements fleet.Service; a board another gateway owns is
// unknown here.
func (o *Own) Board(id string) (fleet.BoardView, error) {
	v, err := o.c.o.Local.Board(id)
	if err != nil {
		return v, err
	}
	if !o.c.owns(v) {
		return fleet.BoardView{}, fmt.Errorf("%w: %q is owned by another gateway", fleet.ErrUnknownBoard, id)
	}
	v.Gateway = o.c.name
	return v, nil
}

// SetLabels implements fleet.Service for this gateway's own boards.
func (o *Own) SetLabels(id string, labels map[string]string) (fleet.BoardView, error) {
	if _, err := o.Board(id); err != nil {
		return fleet.BoardView{}, err
	}
	return o.c.SetLabels(id, labels)
}

// Call implements fleet.Service for this gateway's own boards.
func (o *Own) Call(ctx context.Context, id, method, path string, body []byte) (fleet.Reply, error) {
	if _, err := o.Board(id); err != nil {
		return fleet.Reply{}, err
	}
	return o.c.o.Local.Call(ctx, id, method, path, body)
}

// Do implements fleet.Service: the action on this gateway's own boards
// of sel (group frames on its lines), leaving out the boards it reaches
// but does not own. Boards of sel owned elsewhere are unknown here.
func (o *Own) Do(ctx context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	for _, v := range o.c.o.Local.Boards(fleet.Filter{}) {
		if !o.c.owns(v) {
			sel.Except = append(sel.Except, v.ID)
		}
	}
	return o.c.o.Local.Do(ctx, sel, a)
}

// Watch implements fleet.Service: the fleet core's events of the boards
// this gateway owns when each event comes.
func (o *Own) Watch(ctx context.Context, f fleet.Filter, after uint64) *fleet.Watcher {
	src := o.c.o.Local.Watch(ctx, f, after)
	ch := make(chan fleet.Event, cap(src.C)+1)
	go func() {
		defer close(ch)
		for ev := range src.C {
			v, err := o.c.o.Local.Board(ev.Board)
			if err == nil && !o.c.owns(v) {
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return &fleet.Watcher{C: ch, Dropped: src.Dropped}
}
