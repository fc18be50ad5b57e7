package mqtt

// Bridges of a cluster of gateways (gateway/cluster) sharing one base
// topic on one broker. Each gateway's bridge mirrors the boards its
// gateway owns, and nothing else, so every board has one publisher:
//
//	bridge/gateway/<gw>/state    retained {"state", "gateway", "partitioned"}; the
//	                             offline one is the gateway's last will
//	bridge/gateway/<gw>/info     retained: as bridge/info, with "gateway"
//	bridge/gateway/<gw>/boards   retained: the boards <gw> owns (with "gateway")
//	bridge/gateway/<gw>/groups   retained: their groups
//	<b>/...                      the board's topics, published by its owner only
//
// The bridges read each other's state and boards topics. The one that
// answers for the whole broker (the leader) is the first by name among
// the bridges online there that are not cut off from the cluster (all of
// them when every one is): every bridge decides it alike from the same
// retained states, and a bridge that goes away hands it on at once (its
// last will says offline). A bridge whose gateway the cluster's
// heartbeats say is dead is passed over even if its state says online. The leader alone
//
//   - answers bridge/request/<verb>, for the whole installation (calls,
//     actions and labels go to each board's gateway through the cluster),
//     except rename, which the board's owner answers;
//   - publishes bridge/boards and bridge/groups (every bridge's boards
//     merged), bridge/rollout/<id> and the rollouts' bridge/event;
//   - reports what is wrong with a group command, and a command for a
//     board no bridge mirrors.
//
// Every bridge takes <b>/set/<resource> for the boards it owns, and
// group/<n>/set/<resource> for its own members of group n (one group
// frame per line, a LAN board each), so a group command reaches every
// member of the installation exactly once, each gateway timing its own
// boards. bridge/request/discovery makes every bridge publish its
// discovery again.
//
// A board changing hands (its owner died or lost it, another reaches it)
// is dropped by the old owner's bridge, which stops publishing its topics
// but does not clear them (the new owner's are the same topics), and
// published again by the new owner's, discovery included, which then
// names the new gateway's bridge in availability and via_device. The new
// owner keeps the name the old one's boards list gave the board.
//
// A gateway cut off from the cluster's engine still mirrors and serves
// its boards; a board another gateway took over meanwhile (a LAN board),
// listed by a bridge that is not cut off, is left to that one.

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// Cluster is what the bridge needs of the cluster its gateway is in
// (*cluster.Own, which is also the bridge's Fleet: the gateway's own
// boards).
type Cluster interface {
	// Name is this gateway's name.
	Name() string
	// Partitioned reports whether this gateway is cut off from the
	// cluster's engine.
	Partitioned() bool
	// Changed is signalled when the boards this gateway owns may have
	// changed.
	Changed() <-chan struct{}
	// Alive reports whether gateway name is alive by the cluster's
	// heartbeats.
	Alive(name string) bool
}

// peer is another gateway's bridge as its retained topics tell.
type peer struct {
	online, partitioned bool
	// boards are its boards list's entries by id, raw and as read.
	boards map[string]peerBoard
}

type peerBoard struct {
	raw    json.RawMessage
	name   string
	groups []int
}

// peers holds the other bridges of a cluster on this broker.
type peers struct {
	mu     sync.Mutex
	by     map[string]*peer
	leader bool // this bridge led when last computed
}

// clustered reports whether the bridge is one of a cluster's.
func (b *Bridge) clustered() bool { return b.o.Cluster != nil }

// inst is the service requests are answered from: the whole
// installation in a cluster, else the fleet.
func (b *Bridge) inst() fleet.Service {
	if b.o.Installation != nil {
		return b.o.Installation
	}
	return b.o.Fleet
}

// partitioned reports whether this gateway is cut off from its cluster.
func (b *Bridge) partitioned() bool { return b.clustered() && b.o.Cluster.Partitioned() }

// statePayload is the bridge's state message.
func (b *Bridge) statePayload(online bool) []byte {
	state := "offline"
	if online {
		state = "online"
	}
	if !b.clustered() {
		return []byte(`{"state":"` + state + `"}`)
	}
	m := map[string]any{"state": state, "gateway": b.t.Gateway}
	if online {
		m["partitioned"] = b.partitioned()
	}
	return mustJSON(m)
}

// leads reports whether this bridge answers for the broker: always when
// alone; in a cluster, when it comes first among the bridges online on
// the broker, those not cut off before the others, by name.
func (b *Bridge) leads() bool {
	if !b.clustered() {
		return true
	}
	return b.computeLeader()
}

func (b *Bridge) computeLeader() bool {
	me, mePart := b.t.Gateway, b.partitioned()
	b.peers.mu.Lock()
	defer b.peers.mu.Unlock()
	lead := true
	for name, p := range b.peers.by {
		// A bridge's state may say online after its gateway died without
		// its last will (a broker restarted): the cluster's heartbeats
		// tell, unless this gateway is cut off from them.
		if name == me || !p.online || (!mePart && !b.o.Cluster.Alive(name)) {
			continue
		}
		switch {
		case p.partitioned && !mePart:
		case !p.partitioned && mePart:
			lead = false
		case name < me:
			lead = false
		}
	}
	return lead
}

// checkLeader recomputes whether this bridge leads and, when it has just
// become the leader, publishes what the leader holds (held back until
// now).
func (b *Bridge) checkLeader() {
	if !b.clustered() {
		return
	}
	lead := b.computeLeader()
	b.peers.mu.Lock()
	was := b.peers.leader
	b.peers.leader = lead
	b.peers.mu.Unlock()
	if lead && !was {
		b.log.Info("mqtt: this bridge now answers for the broker", "gateway", b.t.Gateway)
		b.rmu.Lock()
		for t := range b.retained {
			if b.leaderOnly(t) {
				b.markLocked(t)
			}
		}
		b.rmu.Unlock()
		signal(b.rwake)
	}
}

// leaderOnly reports whether topic is one only the leader publishes.
func (b *Bridge) leaderOnly(topic string) bool {
	if !b.clustered() {
		return false
	}
	return topic == b.t.Bridge("boards") || topic == b.t.Bridge("groups") || strings.HasPrefix(topic, b.t.Bridge("rollout/"))
}

// onPeer takes another bridge's (or this one's own, echoed) state or
// boards message.
func (b *Bridge) onPeer(gw, leaf string, payload []byte) {
	if gw == b.t.Gateway {
		return
	}
	b.peers.mu.Lock()
	p := b.peers.by[gw]
	if p == nil {
		p = &peer{boards: map[string]peerBoard{}}
		b.peers.by[gw] = p
	}
	switch leaf {
	case "state":
		var st struct {
			State       string `json:"state"`
			Partitioned bool   `json:"partitioned"`
		}
		_ = json.Unmarshal(payload, &st)
		p.online, p.partitioned = st.State == "online", st.Partitioned
	case "boards":
		var list []json.RawMessage
		_ = json.Unmarshal(payload, &list)
		p.boards = map[string]peerBoard{}
		for _, raw := range list {
			var e struct {
				ID     string `json:"id"`
				Name   string `json:"name"`
				Groups []int  `json:"groups"`
			}
			if json.Unmarshal(raw, &e) == nil && e.ID != "" {
				p.boards[e.ID] = peerBoard{raw: raw, name: e.Name, groups: e.Groups}
			}
		}
	}
	b.peers.mu.Unlock()
	b.checkLeader()
	if leaf == "boards" {
		b.vmu.Lock()
		b.publishUnionLocked()
		b.vmu.Unlock()
		if b.partitioned() {
			signal(b.resnap) // a board may have gone to a bridge that is not cut off
		}
	}
}

// peerName is the name another bridge's boards list gives board id
// ("" when none lists it).
func (b *Bridge) peerName(id string) string {
	b.peers.mu.Lock()
	defer b.peers.mu.Unlock()
	for _, gw := range slices.Sorted(maps.Keys(b.peers.by)) {
		if pb, ok := b.peers.by[gw].boards[id]; ok && pb.name != "" {
			return pb.name
		}
	}
	return ""
}

// peerID is the board another bridge's boards list names name (or has
// that id), or "".
func (b *Bridge) peerID(name string) string {
	b.peers.mu.Lock()
	defer b.peers.mu.Unlock()
	for _, p := range b.peers.by {
		for id, pb := range p.boards {
			if pb.name == name || id == name {
				return id
			}
		}
	}
	return ""
}

// peerTaken reports whether another bridge's board other than id has
// name.
func (b *Bridge) peerTaken(name, id string) bool {
	other := b.peerID(name)
	return other != "" && other != id
}

// yields reports whether this bridge leaves board id to another: it
// is cut off from the cluster, and a bridge that is not lists the board
// (its gateway took it over meanwhile).
func (b *Bridge) yields(id string) bool {
	if !b.partitioned() {
		return false
	}
	b.peers.mu.Lock()
	defer b.peers.mu.Unlock()
	for _, p := range b.peers.by {
		if _, ok := p.boards[id]; ok && p.online && !p.partitioned {
			return true
		}
	}
	return false
}

// resolve turns a board name (or id) of a request into a board id: this
// bridge's names, the other bridges', or an id the installation knows.
func (b *Bridge) resolve(nameOrID string) (string, bool) {
	if id, ok := b.names.id(nameOrID); ok {
		return id, true
	}
	if !b.clustered() {
		return "", false
	}
	if id := b.peerID(nameOrID); id != "" {
		return id, true
	}
	if _, err := b.inst().Board(nameOrID); err == nil {
		return nameOrID, true
	}
	return "", false
}

// owned reports whether this bridge mirrors board id now.
func (b *Bridge) owned(id string) bool {
	b.vmu.Lock()
	defer b.vmu.Unlock()
	_, ok := b.boards[id]
	return ok
}

// claim decides whether this bridge takes command c, and whether it
// answers it (c.quiet: run it, say nothing: another bridge answers). Alone
// the bridge takes every command.
func (b *Bridge) claim(c *command) bool {
	if !b.clustered() || c.sort == cmdHA {
		return true
	}
	lead := b.leads()
	switch c.sort {
	case cmdSet:
		if id, ok := b.names.id(c.board); ok && b.owned(id) {
			return true
		}
		// Another bridge's board, or no bridge's: the leader says so.
		return lead && b.peerID(c.board) == ""
	case cmdGroup:
		c.quiet = !lead
		return true
	case cmdRequest:
		switch c.verb {
		case VerbRename:
			var r struct {
				Board string `json:"board"`
			}
			_ = json.Unmarshal(c.payload, &r)
			if id, ok := b.names.id(r.Board); ok && b.owned(id) {
				return true
			}
			return lead && b.peerID(r.Board) == ""
		case VerbDiscovery:
			c.quiet = !lead
			return true
		}
		return lead
	}
	return lead
}

// silent reports whether the answer to c (with err) is another bridge's
// to give: a quiet command's refusal, or any answer to a quiet request.
// A group command's own members' failures are every bridge's own to
// report; that a group has no member here is news only when it has none
// in the installation.
func (b *Bridge) silent(c command, err error) bool {
	if !b.clustered() {
		return false
	}
	if c.sort == cmdGroup && errors.Is(err, fleet.ErrUnknownGroup) {
		return c.quiet || b.installationHasGroup(c.group)
	}
	if !c.quiet {
		return false
	}
	if c.sort == cmdRequest {
		return true
	}
	return err == nil || errors.Is(err, ErrBadCommand) || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrBusy) ||
		errors.Is(err, auth.ErrForbidden)
}

// installationHasGroup reports whether any board of the installation is
// in group g.
func (b *Bridge) installationHasGroup(g int) bool {
	return g > 0 && len(b.inst().Boards(fleet.Filter{Group: g})) > 0
}

// publishUnionLocked publishes bridge/boards and bridge/groups for the
// whole broker (held back unless this bridge leads): this bridge's
// boards and every other bridge's. Called with vmu held.
func (b *Bridge) publishUnionLocked() {
	if !b.clustered() {
		return
	}
	entries := map[string]json.RawMessage{}
	groups := map[int][]string{}
	b.peers.mu.Lock()
	for _, p := range b.peers.by {
		if !p.online {
			continue
		}
		for id, pb := range p.boards {
			entries[id] = pb.raw
			for _, g := range pb.groups {
				groups[g] = append(groups[g], pb.name)
			}
		}
	}
	b.peers.mu.Unlock()
	for id, bi := range b.boards {
		entries[id] = mustJSON(b.listEntry(bi))
		for _, g := range bi.view.Groups {
			groups[g] = append(groups[g], bi.name)
		}
	}
	list := make([]json.RawMessage, 0, len(entries))
	for _, id := range slices.Sorted(maps.Keys(entries)) {
		list = append(list, entries[id])
	}
	b.setRetained(b.t.Bridge("boards"), mustJSON(list))
	gl := make([]map[string]any, 0, len(groups))
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		ms := slices.Compact(slices.Sorted(slices.Values(groups[g])))
		gl = append(gl, map[string]any{"id": g, "members": ms})
	}
	b.setRetained(b.t.Bridge("groups"), mustJSON(gl))
}

// listEntry is a board as the bridge's boards lists show it.
func (b *Bridge) listEntry(bi *boardInfo) map[string]any {
	e := boardEntry(bi, false)
	if bi.view.Gateway != "" {
		e["gateway"] = bi.view.Gateway
	}
	return e
}

// dropLocked forgets a board this bridge no longer owns: its topics are
// no longer published (nor cleared: its new owner publishes the same
// ones). Called with vmu held.
func (b *Bridge) dropLocked(id string) {
	bi := b.boards[id]
	if bi == nil {
		return
	}
	delete(b.boards, id)
	b.updates.Delete(id)
	prefix := b.t.Base + "/" + bi.name + "/"
	disc := b.t.Discovery(id)
	b.rmu.Lock()
	for t := range b.retained {
		if strings.HasPrefix(t, prefix) || t == disc {
			delete(b.retained, t)
			delete(b.dirty, t)
		}
	}
	b.rmu.Unlock()
	b.log.Info("mqtt: board no longer this gateway's", "board", id, "name", bi.name)
}

// installationEntry is a board of the installation as a request answers
// it: this bridge's own entry, or one from the installation's view under
// the name another bridge gives it.
func (b *Bridge) installationEntry(v fleet.BoardView) map[string]any {
	b.vmu.Lock()
	if bi, ok := b.boards[v.ID]; ok {
		e := boardEntry(bi, true)
		b.vmu.Unlock()
		return e
	}
	b.vmu.Unlock()
	name := b.peerName(v.ID)
	if name == "" {
		name = v.ID
	}
	return boardEntry(&boardInfo{view: v, name: name}, true)
}

// gatewayDiscoveryPayload is the HA device of this gateway's bridge: its
// connectivity and whether it is cut off from the cluster. Boards name it
// in via_device.
func (b *Bridge) gatewayDiscoveryPayload() []byte {
	uid := layout.GatewayDevice(b.t.Gateway)
	st := b.t.Own("state")
	return mustJSON(map[string]any{
		"dev": map[string]any{"identifiers": []string{uid}, "name": "holo-gateway " + b.t.Gateway, "manufacturer": "holofleet",
			"model": "holo-gateway", "sw_version": b.o.Version},
		"o": map[string]any{"name": "holo-gateway", "sw_version": b.o.Version},
		"cmps": map[string]any{
			"connectivity": map[string]any{"p": "binary_sensor", "name": "Bridge", "unique_id": uid + "_connectivity",
				"device_class": "connectivity", "state_topic": st, "value_template": "{{ value_json.state }}",
				"payload_on": "online", "payload_off": "offline", "entity_category": "diagnostic"},
			"partitioned": map[string]any{"p": "binary_sensor", "name": "Cut off from the cluster", "unique_id": uid + "_partitioned",
				"device_class": "problem", "state_topic": st,
				"value_template": "{{ 'ON' if value_json.partitioned else 'OFF' }}", "entity_category": "diagnostic"},
		},
		"qos": 1,
	})
}
