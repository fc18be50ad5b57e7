package cluster

// The registry: every gateway's heartbeat (holo_gateways) and every
// board's record (holo_boards), written by the board's owner and watched
// by every gateway into memory.
//
// Ownership, decided by each gateway for the boards its fleet core knows,
// and made safe by compare-and-set on the record's revision:
//   - a board no record names yet goes to the first gateway that writes it;
//   - a board stays with its owner while the owner lives, unless the
//     record says it is offline and another gateway reaches it online;
//   - when the owner is dead (no heartbeat for DeadAfter), a gateway that
//     reaches the board online takes it over. Line boards are reached by
//     one gateway only, so in practice only LAN boards change hands.
// A gateway that reaches a board another owns keeps it in standby: it
// neither publishes its record nor its events, nor acts on it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/fleet"
)

// Heartbeat is what a gateway publishes about itself every
// Options.Heartbeat.
type Heartbeat struct {
	Name    string    `json:"name"`
	Boot    string    `json:"boot"`
	API     string    `json:"api,omitempty"`
	Started time.Time `json:"started"`
	Time    time.Time `json:"time"`
	// Boards is how many boards it owns.
	Boards int `json:"boards"`
	// Lines is how many RS485 lines it masters.
	Lines int `json:"lines,omitempty"`
	// Coordinator is set on the gateway running rollouts.
	Coordinator bool `json:"coordinator,omitempty"`
}

// gwState is one gateway as this one sees it.
type gwState struct {
	hb    Heartbeat
	heard time.Time // by this gateway's clock; zero: never heard alive
}

// record is a board's record in the engine.
type record struct {
	View fleet.BoardView `json:"view"` // View.Gateway is the owner
	Boot string          `json:"boot"` // the owner's boot when it wrote it
	rev  uint64
	gone bool // deleted from the bucket
}

// GatewayStatus is one gateway of the cluster as this one sees it.
type GatewayStatus struct {
	Name  string `json:"name"`
	Alive bool   `json:"alive"`
	// Boards is how many boards it owns (by the records).
	Boards int `json:"boards"`
	// Lines is how many RS485 lines it masters (by its heartbeat).
	Lines int `json:"lines"`
	// LastHeartbeat is the time its last heartbeat was sent, by its own
	// clock; Heard how long ago this gateway received it (zero for this
	// gateway itself, and for one never heard since this one started).
	LastHeartbeat time.Time     `json:"last_heartbeat,omitzero"`
	Heard         time.Duration `json:"heard"`
	API           string        `json:"api,omitempty"`
	Boot          string        `json:"boot,omitempty"`
	Started       time.Time     `json:"started,omitzero"`
	// Coordinator is set on the gateway that runs rollouts.
	Coordinator bool `json:"coordinator,omitempty"`
}

// Status is the cluster as this gateway sees it.
type Status struct {
	Name string `json:"name"`
	// Partitioned: this gateway is cut off from the engine (or has not
	// joined it yet); it serves its own boards only.
	Partitioned bool   `json:"partitioned"`
	Reason      string `json:"reason,omitempty"`
	// Coordinator names the gateway that runs rollouts now, as the
	// heartbeats say ("" when none does).
	Coordinator string `json:"coordinator"`
	// Boards counts the installation's boards; Owned those of this
	// gateway; Standby the ones it reaches but another owns.
	Boards, Owned, Standby int
	Gateways               []GatewayStatus `json:"gateways"`
	// Reconnects counts engine connections regained.
	Reconnects uint64
	// Counters.
	RecordWrites, WriteConflicts, RoutedOut, RoutedIn, Takeovers uint64
	EventsPublished, EventsPending                               uint64
}

// stats are counters guarded by Cluster.mu.
type stats struct {
	writes, conflicts, routedOut, routedIn, takeovers uint64
}

// aliveLocked reports whether gateway name is alive by its heartbeats.
func (c *Cluster) aliveLocked(name string) bool {
	if name == c.name {
		return true
	}
	g := c.gateways[name]
	return g != nil && !g.heard.IsZero() && c.clk.Since(g.heard) < c.o.DeadAfter
}

// deadLocked reports whether gateway name may be taken for dead, its
// boards taken over: not heard alive, and this gateway has listened for
// DeadAfter since it started. A gateway that just started may have
// missed a live gateway's heartbeat in the values read at joining (the
// heartbeats are rewritten while the watch starts); its next heartbeat
// comes within DeadAfter. Taking a live gateway's board then
// (TestJoinKeepsLiveOwners, 1 in 3 runs at load 40) made the two publish
// its events. Called with c.mu held.
func (c *Cluster) deadLocked(name string) bool {
	return !c.aliveLocked(name) && c.clk.Since(c.started) >= c.o.DeadAfter
}

// partitionReason says why this gateway is cut off ("" when it is not).
func (c *Cluster) partitionReason() string {
	if ok, _ := c.eng.Connected(); !ok {
		return "no connection to the engine"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.kvBoards == nil:
		return "joining: the engine's buckets are not set up yet"
	case !c.loaded:
		return "joining: reading the board records"
	case !c.gwLoaded:
		return "joining: reading the gateways' heartbeats"
	case c.lastBeat.IsZero() || c.clk.Since(c.lastBeat) > c.o.DeadAfter:
		return "the engine does not acknowledge this gateway's heartbeat"
	}
	return ""
}

// cutOff reports whether this gateway has lost the engine it had
// (partitioned, and not merely still joining).
func (c *Cluster) cutOff() bool {
	if ok, _ := c.eng.Connected(); !ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lastBeat.IsZero() && c.clk.Since(c.lastBeat) > c.o.DeadAfter
}

// Partitioned reports whether this gateway is cut off from the engine.
func (c *Cluster) Partitioned() bool { return c.partitionReason() != "" }

// Status reports the cluster as this gateway sees it.
func (c *Cluster) Status() Status {
	reason := c.partitionReason()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Status{Name: c.name, Partitioned: reason != "", Reason: reason, Standby: len(c.standby),
		Reconnects: c.eng.reconnects.Load(), RecordWrites: c.st.writes, WriteConflicts: c.st.conflicts,
		RoutedOut: c.st.routedOut, RoutedIn: c.st.routedIn, Takeovers: c.st.takeovers}
	owned := map[string]int{}
	for _, r := range c.records {
		if r.gone {
			continue
		}
		st.Boards++
		owned[r.View.Gateway]++
	}
	st.Owned = owned[c.name]
	names := map[string]bool{c.name: true}
	for n := range c.gateways {
		names[n] = true
	}
	for n := range owned {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		g := GatewayStatus{Name: n, Alive: c.aliveLocked(n), Boards: owned[n]}
		if s := c.gateways[n]; s != nil {
			g.API, g.Boot, g.Started, g.Coordinator = s.hb.API, s.hb.Boot, s.hb.Started, s.hb.Coordinator
			g.Lines, g.LastHeartbeat = s.hb.Lines, s.hb.Time
			if !s.heard.IsZero() && n != c.name {
				g.Heard = c.clk.Since(s.heard)
			}
		}
		if n == c.name {
			g.Lines, g.Coordinator = c.o.Lines, c.isCoordinator()
			if !c.lastBeat.IsZero() {
				g.LastHeartbeat = c.lastBeat.UTC()
			}
		}
		if g.Coordinator && g.Alive {
			st.Coordinator = n
		}
		st.Gateways = append(st.Gateways, g)
	}
	pub, pending := c.ev.counts()
	st.EventsPublished, st.EventsPending = pub, pending
	return st
}

// heartbeatLoop puts this gateway's heartbeat every Heartbeat.
func (c *Cluster) heartbeatLoop(ctx context.Context) {
	started := c.clk.Now().UTC()
	t := c.clk.NewTicker(c.o.Heartbeat)
	defer t.Stop()
	for {
		c.mu.Lock()
		kv, api := c.kvGW, c.o.API
		owned := 0
		for _, r := range c.records {
			if !r.gone && r.View.Gateway == c.name {
				owned++
			}
		}
		c.mu.Unlock()
		hb := Heartbeat{Name: c.name, Boot: c.boot, API: api, Started: started, Time: c.clk.Now().UTC(), Boards: owned,
			Lines: c.o.Lines, Coordinator: c.isCoordinator()}
		data, _ := json.Marshal(hb)
		actx, cancel := context.WithTimeout(ctx, c.o.Heartbeat)
		_, err := kv.Put(actx, c.name, data)
		cancel()
		if err == nil {
			c.mu.Lock()
			c.lastBeat = c.clk.Now()
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// watchGateways follows every gateway's heartbeat.
func (c *Cluster) watchGateways(ctx context.Context) {
	c.watch(ctx, c.kvGW, func(e jetstream.KeyValueEntry, initial bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e.Operation() != jetstream.KeyValuePut {
			delete(c.gateways, e.Key())
			return
		}
		var hb Heartbeat
		if json.Unmarshal(e.Value(), &hb) != nil {
			return
		}
		g := &gwState{hb: hb, heard: c.clk.Now()}
		// A heartbeat read at start counts only when it is recent by the
		// engine's time stamp: a gateway stopped long ago is dead.
		if initial && time.Since(e.Created()) > c.o.DeadAfter {
			g.heard = time.Time{}
		}
		c.gateways[hb.Name] = g
	}, func() {
		c.mu.Lock()
		c.gwLoaded = true
		c.mu.Unlock()
		c.poke()
	}, watchStuck{every: 3 * c.o.Heartbeat})
}

// watchBoards follows every board's record.
func (c *Cluster) watchBoards(ctx context.Context) {
	c.watch(ctx, c.kvBoards, c.recordPut, func() {
		c.mu.Lock()
		c.loaded = true
		c.mu.Unlock()
		c.poke()
		c.signalOwn()
	}, watchStuck{every: c.o.Heartbeat, stuck: c.boardsWatchBehind})
}

// recordPut applies one entry of the records watch (initial: read when
// the watch started).
func (c *Cluster) recordPut(e jetstream.KeyValueEntry, initial bool) {
	id := idOf(e.Key())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.boardsSeen = max(c.boardsSeen, e.Revision())
	old := c.records[id]
	if old != nil && old.rev >= e.Revision() {
		return // this gateway's own write, already applied
	}
	if e.Operation() != jetstream.KeyValuePut {
		c.records[id] = &record{rev: e.Revision(), gone: true}
		c.signalOwn()
		return
	}
	var r record
	if json.Unmarshal(e.Value(), &r) != nil {
		return
	}
	r.rev = e.Revision()
	c.records[id] = &r
	if !initial {
		c.heardFromLocked(r.View.Gateway, r.Boot)
	}
	if old == nil || old.gone || old.View.Gateway != r.View.Gateway {
		c.signalOwn()
	}
	if old != nil && old.View.Gateway == c.name && r.View.Gateway != c.name {
		c.log.Info("cluster: board taken over by another gateway", "board", id, "gateway", r.View.Gateway)
		c.poke()
	}
}

// heardFromLocked counts a record that gateway name (run boot) has just
// written as a heartbeat of it: a gateway that writes to the engine is
// alive, whatever the heartbeats watch shows. After an engine node died,
// two gateways whose heartbeat watches had stalled took each other for
// dead while their records watches went on, and took two LAN boards from
// each other about 140 times in a second, each takeover's record
// answered by the other's. Called with c.mu held.
func (c *Cluster) heardFromLocked(name, boot string) {
	if name == "" || name == c.name || boot == "" {
		return
	}
	g := c.gateways[name]
	switch {
	case g == nil:
		g = &gwState{hb: Heartbeat{Name: name, Boot: boot}}
		c.gateways[name] = g
	case g.hb.Boot != boot:
		// A run the heartbeats have not shown yet: its records say it
		// restarted.
		g.hb.Boot = boot
	}
	g.heard = c.clk.Now()
}

// boardsWatchBehind reports whether the records watcher has not shown a
// record this gateway wrote, acknowledged more than stuckAfter ago: it
// stopped handing out updates without ending (seen after an engine node
// was killed: a board taken over elsewhere stayed offline on this
// gateway for minutes, as its old record said).
func (c *Cluster) boardsWatchBehind() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boardsWritten > c.boardsSeen && c.clk.Since(c.boardsWrittenAt) > c.stuckAfter()
}

// stuckAfter is how long a watcher may lag behind what this gateway
// wrote before it is taken for stuck.
func (c *Cluster) stuckAfter() time.Duration { return 3 * c.o.Heartbeat }

// watchStuck says how a watcher is found stuck (a consumer that did not
// come back after the engine was cut off or a node died): every every,
// by stuck when set, else when it handed out nothing since the last look
// (for a bucket that changes at least that often: the heartbeats, every
// gateway's own among them). The zero watchStuck never looks.
type watchStuck struct {
	every time.Duration
	stuck func() bool
}

// watch runs a watcher on every key of kv, calling put for each entry
// (initial for the values present when the watch started) and loaded
// once those are in, and starts it again if it ends before ctx or is
// found stuck.
func (c *Cluster) watch(ctx context.Context, kv jetstream.KeyValue, put func(e jetstream.KeyValueEntry, initial bool), loaded func(), ws watchStuck) {
	var look <-chan time.Time
	if ws.every > 0 {
		tick := time.NewTicker(ws.every)
		defer tick.Stop()
		look = tick.C
	}
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		initial := true
		heard := false
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-look:
				if ws.stuck != nil {
					if ws.stuck() {
						c.log.Warn("cluster: a watcher fell behind what this gateway wrote; watching again")
						break loop
					}
					continue
				}
				if !heard {
					break loop // stuck: watch again
				}
				heard = false
			case e, ok := <-w.Updates():
				heard = true
				if !ok {
					break loop
				}
				if e == nil {
					if initial && loaded != nil {
						loaded()
					}
					initial = false
					continue
				}
				put(e, initial)
			}
		}
		_ = w.Stop()
	}
}

func (c *Cluster) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// syncLoop publishes this gateway's boards: every SyncEvery, when a
// board's event says something changed, and when the records or
// gateways change in ways that move ownership.
func (c *Cluster) syncLoop(ctx context.Context) {
	t := c.clk.NewTicker(c.o.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-c.wake:
		}
		c.syncOnce(ctx)
		c.endCallers()
	}
}

// write is one record this gateway is about to put.
type write struct {
	id    string
	rec   record
	rev   uint64 // expected revision (0: the key must not exist)
	claim bool   // taking the board from another gateway
}

// syncOnce compares the local boards with their records and writes what
// changed, and the boards this gateway takes over.
func (c *Cluster) syncOnce(ctx context.Context) {
	c.mu.Lock()
	// Both buckets read first: with the records but not yet the
	// heartbeats, every owner would look dead and its boards be taken.
	ready := c.kvBoards != nil && c.loaded && c.gwLoaded
	c.mu.Unlock()
	if !ready || c.Partitioned() {
		return
	}
	views := c.o.Local.Boards(fleet.Filter{})
	c.mu.Lock()
	writes, adopt, standby := c.planLocked(views, c.clk.Now())
	if !maps.Equal(c.standby, standby) {
		c.signalOwn()
	}
	c.standby = standby
	c.mu.Unlock()
	for _, w := range adopt {
		if _, err := c.o.Local.SetLabels(w.id, w.rec.View.Labels); err != nil {
			c.log.Warn("cluster: labels of a board taken over", "board", w.id, "err", err)
		}
	}
	if len(writes) > 0 {
		c.putRecords(ctx, writes)
	}
}

// planLocked decides, for the boards of this gateway's fleet core
// (views, as now), the records to write (the boards it owns whose record
// changed, those it takes over, adopt the takeovers whose labels follow
// the board) and the boards it stands by for. Called with c.mu held.
func (c *Cluster) planLocked(views []fleet.BoardView, now time.Time) (writes, adopt []write, standby map[string]bool) {
	standby = map[string]bool{}
	for _, v := range views {
		v.Gateway = c.name
		r := c.records[v.ID]
		switch {
		case r == nil || r.gone:
		case r.View.Gateway == c.name:
			if sameRecord(r.View, v) && now.Sub(c.written[v.ID]) < c.o.SeenEvery && r.Boot == c.boot {
				continue
			}
			if r.Boot != c.boot && now.Sub(c.started) < c.reclaimGrace() {
				// Written by this gateway's previous run: a gateway that
				// reaches the board too, and kept what it did while this
				// one restarted, may take it first (catchup.go).
				continue
			}
		case !v.Online:
			standby[v.ID] = true
			continue
		case c.deadLocked(r.View.Gateway) || !r.View.Online:
			// Take it over: its owner is dead, or cannot reach it.
		case c.restartedLocked(r):
			// Take it over: its owner restarted since it wrote the record,
			// and what the board did meanwhile is here, not there.
		default:
			standby[v.ID] = true
			continue
		}
		w := write{id: v.ID, rec: record{View: v, Boot: c.boot}}
		if r != nil {
			w.rev = r.rev
			w.claim = !r.gone && r.View.Gateway != c.name
			if w.claim && !maps.Equal(r.View.Labels, v.Labels) {
				// The labels follow the board to its new gateway.
				w.rec.View.Labels = maps.Clone(r.View.Labels)
				adopt = append(adopt, w)
			}
		}
		writes = append(writes, w)
	}
	return writes, adopt, standby
}

// restartedLocked reports whether the owner of record r has restarted
// since it wrote r (its heartbeat names another run). Called with c.mu
// held.
func (c *Cluster) restartedLocked(r *record) bool {
	g := c.gateways[r.View.Gateway]
	return g != nil && g.hb.Boot != "" && r.Boot != "" && g.hb.Boot != r.Boot
}

// reclaimGrace is how long a restarted gateway leaves its boards'
// records of its previous run to the gateways that reach them too: one
// heartbeat for them to hear of the restart, and a sync pass.
func (c *Cluster) reclaimGrace() time.Duration { return 2 * (c.o.Heartbeat + c.o.SyncEvery) }

// sameRecord reports whether two views of a board differ only in what is
// rewritten every SeenEvery (last seen, clock).
func sameRecord(a, b fleet.BoardView) bool {
	return a.Hostname == b.Hostname && a.Address == b.Address && a.Line == b.Line && a.URL == b.URL &&
		slices.Equal(a.Groups, b.Groups) && maps.Equal(a.Labels, b.Labels) && a.Online == b.Online &&
		a.OfflineReason == b.OfflineReason && a.Firmware == b.Firmware && slices.Equal(a.Transports, b.Transports) &&
		a.Gateway == b.Gateway
}

// putRecords writes records with compare-and-set on their revisions, all
// in flight at once, and applies each acknowledged one to the cache.
func (c *Cluster) putRecords(ctx context.Context, ws []write) {
	type pending struct {
		w   write
		ack jetstream.PubAckFuture
	}
	var ps []pending
	for _, w := range ws {
		data, err := json.Marshal(w.rec)
		if err != nil {
			continue
		}
		m := nats.NewMsg("$KV." + BucketBoards + "." + key(w.id))
		m.Data = data
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(w.rev, 10))
		ack, err := c.js.PublishMsgAsync(m)
		if err != nil {
			break
		}
		ps = append(ps, pending{w, ack})
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for _, p := range ps {
		select {
		case a := <-p.ack.Ok():
			c.mu.Lock()
			c.st.writes++
			if a.Sequence > c.boardsWritten {
				c.boardsWritten, c.boardsWrittenAt = a.Sequence, c.clk.Now()
			}
			if r := c.records[p.w.id]; r == nil || r.rev < a.Sequence {
				if r == nil || r.gone || r.View.Gateway != c.name {
					c.signalOwn()
				}
				rec := p.w.rec
				rec.rev = a.Sequence
				c.records[p.w.id] = &rec
			}
			c.written[p.w.id] = c.clk.Now()
			if p.w.claim {
				c.st.takeovers++
				c.log.Info("cluster: took over a board", "board", p.w.id)
			}
			c.mu.Unlock()
		case err := <-p.ack.Err():
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				c.mu.Lock()
				c.st.conflicts++
				c.mu.Unlock()
			} else {
				c.log.Debug("cluster: board record not written", "board", p.w.id, "err", err)
			}
		case <-timeout.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// view is the cluster's view of a board from its record: offline, with
// the reason, when its gateway is dead or this one is cut off. Called
// with c.mu held.
func (c *Cluster) viewLocked(r *record, partitioned bool) fleet.BoardView {
	v := r.View
	v.Groups, v.Labels, v.Transports = slices.Clone(v.Groups), maps.Clone(v.Labels), slices.Clone(v.Transports)
	if v.Clock != nil {
		cl := *v.Clock
		v.Clock = &cl
	}
	switch {
	case partitioned:
		v.Online, v.OfflineReason, v.Transports = false, "gateway "+c.name+" is cut off from the cluster; "+v.Gateway+" owns this board", []string{}
	case !c.aliveLocked(v.Gateway):
		v.Online, v.OfflineReason, v.Transports = false, "its gateway "+v.Gateway+" does not answer", []string{}
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if v.Groups == nil {
		v.Groups = []int{}
	}
	if v.Transports == nil {
		v.Transports = []string{}
	}
	return v
}

// owner names the gateway that answers for board id: its record's owner,
// or this gateway for a board only it knows; "" for an unknown board.
func (c *Cluster) owner(id string) string {
	c.mu.Lock()
	r := c.records[id]
	c.mu.Unlock()
	if r != nil && !r.gone {
		return r.View.Gateway
	}
	if _, err := c.o.Local.Board(id); err == nil {
		return c.name
	}
	return ""
}

// Removed is what RemoveGateway dropped.
type Removed struct {
	Gateway string `json:"gateway"`
	// Boards lists the board records dropped (the boards the gateway
	// owned), ordered by id.
	Boards []string `json:"boards"`
}

// RemoveGateway forgets gateway name for good: its heartbeat and the
// records of the boards it owns are deleted from the engine, so the
// installation no longer lists them (a gateway that reaches one of those
// boards writes it again, as a new board). It refuses this gateway
// itself and a gateway heard alive (ErrGatewayAlive), and fails while
// this gateway is cut off from the engine (ErrPartitioned).
func (c *Cluster) RemoveGateway(ctx context.Context, name string) (Removed, error) {
	if err := checkName(name); err != nil {
		return Removed{}, err
	}
	if c.Partitioned() {
		return Removed{}, ErrPartitioned
	}
	c.mu.Lock()
	kvGW, kvBoards := c.kvGW, c.kvBoards
	_, known := c.gateways[name]
	alive := c.aliveLocked(name)
	var ids []string
	for id, r := range c.records {
		if !r.gone && r.View.Gateway == name {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	switch {
	case name == c.name:
		return Removed{}, fmt.Errorf("%w: %s is this gateway (stop it, then remove it from another)", ErrGatewayAlive, name)
	case alive:
		return Removed{}, fmt.Errorf("%w: %s sent a heartbeat less than %v ago (stop it first)", ErrGatewayAlive, name, c.o.DeadAfter)
	case !known && len(ids) == 0:
		return Removed{}, fmt.Errorf("%w: %q", ErrUnknownGateway, name)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := kvBoards.Delete(ctx, key(id)); err != nil {
			return Removed{Gateway: name}, fmt.Errorf("cluster: deleting the record of board %s: %w", id, err)
		}
	}
	if known {
		if err := kvGW.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return Removed{Gateway: name, Boards: ids}, fmt.Errorf("cluster: deleting the heartbeat of %s: %w", name, err)
		}
	}
	c.log.Info("cluster: gateway removed", "gateway", name, "boards", len(ids))
	if ids == nil {
		ids = []string{}
	}
	return Removed{Gateway: name, Boards: ids}, nil
}
