package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
	"github.com/holofleet/holofleet/gateway/mqtt/spool"
)

// refreshEvery is how often the bridge compares the fleet's board views
// with what it published (labels, groups and firmware change without an
// event).
const refreshEvery = 5 * time.Second

// Update is a board's firmware update as the HA update entity shows it;
// rollouts set it with SetUpdate.
type Update struct {
	// Latest is the version the board should run; "" means the update
	// channel's (Options.UpdateChannel), or without one the version the
	// board runs.
	Latest string
	// Summary is Latest's release summary (who signed the image).
	Summary    string
	InProgress bool
	// Percent is the progress of the running update (nil when unknown).
	Percent *float64
}

// follow turns the fleet's events into publications, in the fleet's
// order, until ctx ends. A watcher cut off for falling behind is resumed
// from the last event seen.
func (b *Bridge) follow(ctx context.Context, w *fleet.Watcher) {
	t := b.clk.NewTicker(refreshEvery)
	defer t.Stop()
	// In a cluster: ownership changes, and whether the gateway is cut
	// off, which its state says, are looked at every second too.
	var changed <-chan struct{}
	var part <-chan time.Time
	wasPart := false
	if b.clustered() {
		changed = b.o.Cluster.Changed()
		pt := b.clk.NewTicker(time.Second)
		defer pt.Stop()
		part, wasPart = pt.C(), b.partitioned()
	}
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			b.snapshot()
		case <-changed:
			b.snapshot()
		case <-b.resnap:
			b.snapshot()
		case <-part:
			if p := b.partitioned(); p != wasPart {
				wasPart = p
				b.snapshot()
			}
		case ev, ok := <-w.C:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				b.log.Warn("mqtt: fell behind the fleet's events; resuming", "after", last, "dropped", w.Dropped())
				w = b.o.Fleet.Watch(ctx, fleet.Filter{}, last)
				continue
			}
			last = ev.N
			b.handle(ev)
		}
	}
}

// snapshot publishes every board's view-derived topics that changed, and
// the bridge lists.
func (b *Bridge) snapshot() {
	views := b.o.Fleet.Boards(fleet.Filter{})
	if b.clustered() {
		// The gateway's own boards: those it yields to a bridge that is
		// not cut off are left out, and boards no longer its own dropped.
		own := views[:0]
		for _, v := range views {
			if !b.yields(v.ID) {
				own = append(own, v)
			}
		}
		views = own
	}
	latest, summary := b.channelRelease()
	b.vmu.Lock()
	b.latest, b.latestSummary = latest, summary
	if b.clustered() {
		keep := make(map[string]bool, len(views))
		for _, v := range views {
			keep[v.ID] = true
		}
		for id := range b.boards {
			if !keep[id] {
				b.dropLocked(id)
			}
		}
	}
	for _, v := range views {
		bi := b.boardLocked(v.ID, &v)
		bi.view = v
		b.publishBoardLocked(bi)
	}
	b.publishListsLocked()
	b.vmu.Unlock()
	info := map[string]any{"version": b.o.Version, "base": b.o.Base, "ha_prefix": b.o.HAPrefix,
		"broker": redactURL(b.o.Broker), "client_id": b.o.ClientID}
	if b.clustered() {
		info["gateway"] = b.t.Gateway
		info["partitioned"] = b.partitioned()
		if b.connected.Load() {
			b.setRetained(b.t.Own("state"), b.statePayload(true))
		}
		b.setRetained(b.t.GatewayDiscovery(b.t.Gateway), b.gatewayDiscoveryPayload())
		b.checkLeader()
	}
	b.setRetained(b.t.Own("info"), mustJSON(info))
}

// boardLocked returns the bridge's record of a board, making it (with
// view, or the fleet's view) when new.
func (b *Bridge) boardLocked(id string, view *fleet.BoardView) *boardInfo {
	if bi, ok := b.boards[id]; ok {
		return bi
	}
	var v fleet.BoardView
	if view != nil {
		v = *view
	} else if fv, err := b.o.Fleet.Board(id); err == nil {
		v = fv
	} else {
		v = fleet.BoardView{ID: id}
	}
	var name string
	if b.clustered() {
		// The name another bridge gave it (the board changed hands), and
		// none another bridge's board has.
		name = b.names.assignAmong(id, v.Hostname, b.peerName(id), func(n string) bool { return b.peerTaken(n, id) })
	} else {
		name = b.names.assign(id, v.Hostname)
	}
	bi := &boardInfo{view: v, name: name}
	b.boards[id] = bi
	return bi
}

// eventBoardLocked is the board of a fleet event, or false when the
// event is not this bridge's to publish (in a cluster: a board it does
// not own, or yields).
func (b *Bridge) eventBoardLocked(id string) (*boardInfo, bool) {
	if _, ok := b.boards[id]; ok || !b.clustered() {
		return b.boardLocked(id, nil), true
	}
	v, err := b.o.Fleet.Board(id)
	if err != nil || b.yields(id) {
		return nil, false
	}
	return b.boardLocked(id, &v), true
}

// handle publishes one fleet event.
func (b *Bridge) handle(ev fleet.Event) {
	b.vmu.Lock()
	bi, ok := b.eventBoardLocked(ev.Board)
	if !ok {
		b.vmu.Unlock()
		return
	}
	name := bi.name
	switch ev.Type {
	case fleet.EventHappening:
		b.vmu.Unlock()
		b.st.happenings.Add(1)
		b.m.happenings.Inc()
		if layout.ValidName(ev.Kind) != nil {
			return
		}
		b.enqueue(spool.Message{Topic: b.t.Event(name, ev.Kind), Payload: happeningPayload(ev), QoS: 1})
		return
	case fleet.EventState:
		if layout.ValidName(ev.Kind) != nil || ev.Kind == layout.LevelAvail || ev.Kind == "info" || ev.Kind == layout.LevelUpdate ||
			ev.Kind == layout.LevelEvent || ev.Kind == layout.LevelSet {
			b.vmu.Unlock()
			return
		}
		payload := []byte(ev.Data)
		switch ev.Kind {
		case "leds":
			payload = homeassistant.LEDsState(ev.Data)
			if m := ledsMode(ev.Data); m != "" && m != "off" {
				bi.ledsOn = m
			}
		case "screen":
			payload = homeassistant.ScreenState(ev.Data)
		case "scenes":
			if s := sceneNames(ev.Data); !slices.Equal(s, bi.scenes) {
				bi.scenes = s
				b.publishBoardLocked(bi)
			}
		}
		b.vmu.Unlock()
		if len(payload) == 0 || string(payload) == "null" {
			payload = []byte("null")
		}
		b.setRetained(b.t.Board(name, ev.Kind), payload)
		return
	case fleet.EventOnline, fleet.EventOffline:
		if v, err := b.o.Fleet.Board(ev.Board); err == nil {
			bi.view = v
		}
		bi.view.Online = ev.Type == fleet.EventOnline
		if !bi.view.Online && ev.Reason != "" {
			bi.view.OfflineReason = ev.Reason
		}
		b.publishBoardLocked(bi)
		b.publishListsLocked()
		b.vmu.Unlock()
	case fleet.EventRestarted:
		b.vmu.Unlock()
		b.bridgeEvent("board_restarted", map[string]any{"board": name, "id": ev.Board})
	default:
		b.vmu.Unlock()
	}
}

// publishBoardLocked publishes a board's availability, info, update and
// discovery topics (unchanged ones are not sent again).
func (b *Bridge) publishBoardLocked(bi *boardInfo) {
	v := bi.view
	state := "offline"
	if v.Online {
		state = "online"
	}
	avail := map[string]any{"state": state}
	if !v.Online && v.OfflineReason != "" {
		avail["reason"] = v.OfflineReason
	}
	if v.Gateway != "" {
		avail["gateway"] = v.Gateway
	}
	b.setRetained(b.t.Board(bi.name, layout.LevelAvail), mustJSON(avail))
	b.setRetained(b.t.Board(bi.name, "info"), mustJSON(boardEntry(bi, true)))
	b.setRetained(b.t.Board(bi.name, layout.LevelUpdate), b.updatePayload(bi))
	b.setRetained(b.t.Discovery(v.ID), b.discoveryPayload(bi))
}

// boardEntry is a board as bridge/boards and <b>/info show it.
func boardEntry(bi *boardInfo, full bool) map[string]any {
	v := bi.view
	e := map[string]any{"id": v.ID, "name": bi.name, "hostname": v.Hostname, "online": v.Online,
		"groups": v.Groups, "firmware": v.Firmware}
	if full {
		e["address"], e["line"], e["url"], e["labels"], e["transports"] = v.Address, v.Line, v.URL, v.Labels, v.Transports
		if !v.Online {
			e["offline_reason"] = v.OfflineReason
		}
		if v.Gateway != "" {
			e["gateway"] = v.Gateway
		}
	}
	return e
}

// publishListsLocked publishes bridge/boards and bridge/groups.
func (b *Bridge) publishListsLocked() {
	ids := slices.Sorted(maps.Keys(b.boards))
	list := make([]map[string]any, 0, len(ids))
	groups := map[int][]string{}
	for _, id := range ids {
		bi := b.boards[id]
		list = append(list, b.listEntry(bi))
		for _, g := range bi.view.Groups {
			groups[g] = append(groups[g], bi.name)
		}
	}
	b.setRetained(b.t.Own("boards"), mustJSON(list))
	gl := make([]map[string]any, 0, len(groups))
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		gl = append(gl, map[string]any{"id": g, "members": groups[g]})
	}
	b.setRetained(b.t.Own("groups"), mustJSON(gl))
	b.publishUnionLocked()
}

// updatePayload is the HA update entity's state.
func (b *Bridge) updatePayload(bi *boardInfo) []byte {
	var u Update
	if x, ok := b.updates.Load(bi.view.ID); ok {
		u = x.(Update)
	}
	latest, summary := u.Latest, u.Summary
	if latest == "" {
		latest, summary = b.latest, b.latestSummary
	}
	installed := bi.view.Firmware
	if bi.runs != "" && bi.runsSaw == installed {
		installed = bi.runs
	}
	if latest == "" {
		latest = installed
	}
	var rs any // null: nothing is offered, so nothing to sum up
	if summary != "" {
		rs = summary
	}
	return mustJSON(map[string]any{"installed_version": installed, "latest_version": latest,
		"in_progress": u.InProgress, "update_percentage": u.Percent, "title": "holo-board", "release_summary": rs})
}

// SetUpdate records a board's firmware update state for the HA update
// entity (rollouts call it) and publishes it.
func (b *Bridge) SetUpdate(boardID string, u Update) {
	b.updates.Store(boardID, u)
	b.vmu.Lock()
	defer b.vmu.Unlock()
	if bi, ok := b.boards[boardID]; ok {
		b.setRetained(b.t.Board(bi.name, layout.LevelUpdate), b.updatePayload(bi))
	}
}

// bridgeEvent queues a message on bridge/event.
func (b *Bridge) bridgeEvent(typ string, fields map[string]any) {
	m := map[string]any{"type": typ, "time": b.clk.Now().UTC().Format(time.RFC3339Nano)}
	if b.clustered() {
		m["gateway"] = b.t.Gateway
	}
	maps.Copy(m, fields)
	b.enqueue(spool.Message{Topic: b.t.Bridge("event"), Payload: mustJSON(m), QoS: 1})
}

// happeningPayload is the board's happening object with event_type,
// board, seq, n and time added in front.
func happeningPayload(ev fleet.Event) []byte {
	buf := make([]byte, 0, 96+len(ev.Kind)+len(ev.Board)+len(ev.Data))
	buf = append(buf, `{"event_type":`...)
	buf = strconv.AppendQuote(buf, ev.Kind)
	buf = append(buf, `,"board":`...)
	buf = strconv.AppendQuote(buf, ev.Board)
	buf = append(buf, `,"n":`...)
	buf = strconv.AppendUint(buf, ev.N, 10)
	buf = append(buf, `,"time":"`...)
	buf = ev.Time.UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, '"')
	data := bytes.TrimSpace(ev.Data)
	if !bytes.Contains(data, []byte(`"seq"`)) {
		buf = append(buf, `,"seq":`...)
		buf = strconv.AppendUint(buf, uint64(ev.Seq), 10)
	}
	if len(data) > 2 && data[0] == '{' {
		if inner := bytes.TrimSpace(data[1 : len(data)-1]); len(inner) > 0 {
			buf = append(buf, ',')
			buf = append(buf, inner...)
		}
	}
	return append(buf, '}')
}

// ledsMode is the mode in a strip state, "" when there is none.
func ledsMode(state json.RawMessage) string {
	var st struct {
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(state, &st)
	return st.Mode
}

// sceneNames takes the saved scenes' names from a GET /scenes reply,
// which holds them as a list of records with a name, or as an object by
// name.
func sceneNames(state json.RawMessage) []string {
	var top map[string]json.RawMessage
	if json.Unmarshal(state, &top) != nil {
		return nil
	}
	raw, ok := top["scenes"]
	if !ok {
		raw = state
	}
	var out []string
	var list []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &list) == nil {
		for _, s := range list {
			if s.Name != "" {
				out = append(out, s.Name)
			}
		}
	} else {
		var byName map[string]json.RawMessage
		if json.Unmarshal(raw, &byName) == nil {
			for n := range byName {
				if n != "active" {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null") // only the bridge's own values come here
	}
	return b
}

// redactURL drops a password from a broker URL.
func redactURL(s string) string {
	if i := strings.Index(s, "@"); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + "***@" + s[i+1:]
		}
	}
	return s
}
