package cluster

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// recordsBucket stands in for the records bucket: compare-and-set on a
// key's revision, and every write handed to each member's records watch.
type recordsBucket struct {
	rev     map[string]uint64
	seq     uint64
	members []*Cluster
	claims  int
}

// write applies w as the engine would (refused when the revision moved)
// and shows it to every member's watch.
func (b *recordsBucket) write(t *testing.T, w write) bool {
	t.Helper()
	if b.rev[w.id] != w.rev {
		return false
	}
	b.seq++
	b.rev[w.id] = b.seq
	if w.claim {
		b.claims++
	}
	data, err := json.Marshal(w.rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range b.members {
		m.recordPut(fakeEntry{key: key(w.id), val: data, rev: b.seq}, false)
	}
	return true
}

func flapMember(name string, clk clock.Clock) *Cluster {
	return &Cluster{o: Options{Heartbeat: time.Second, DeadAfter: 4 * time.Second, SyncEvery: 500 * time.Millisecond,
		SeenEvery: time.Minute}, name: name, boot: name + "-run", clk: clk, log: slog.New(slog.DiscardHandler),
		records: map[string]*record{}, gateways: map[string]*gwState{}, written: map[string]time.Time{},
		standby: map[string]bool{}, wake: make(chan struct{}, 1), ownChanged: make(chan struct{}, 1),
		started: clk.Now(), loaded: true, gwLoaded: true}
}

// TestNoTakeoverFlapping: two live gateways reaching the same LAN board,
// whose heartbeat watches have stalled (an engine node died under them)
// while their records watches go on, take the board from each other at
// most once: a record a gateway has just written shows it alive. Each
// took the other for dead and answered every takeover with one of its
// own (the soak saw two boards change hands about 140 times in a second).
func TestNoTakeoverFlapping(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a, b := flapMember("gwa", clk), flapMember("gwb", clk)
	bucket := &recordsBucket{rev: map[string]uint64{}, members: []*Cluster{a, b}}
	board := fleet.BoardView{ID: "lan1", URL: "http://10.0.0.9", Online: true, Transports: []string{"lan"}}

	// Both ran for a while and heard each other; gwb owns the board.
	clk.Advance(time.Minute)
	for _, m := range []*Cluster{a, b} {
		for _, o := range []*Cluster{a, b} {
			if o != m {
				m.gateways[o.name] = &gwState{hb: Heartbeat{Name: o.name, Boot: o.boot}, heard: clk.Now()}
			}
		}
	}
	owned := board
	owned.Gateway = b.name
	if !bucket.write(t, write{id: board.ID, rec: record{View: owned, Boot: b.boot}}) {
		t.Fatal("first record not written")
	}
	b.written[board.ID] = clk.Now()

	// The heartbeat watches stall: neither hears the other for longer
	// than DeadAfter. Each sync pass plans on what its watch shows.
	clk.Advance(10 * time.Second)
	for range 20 {
		for _, m := range []*Cluster{a, b} {
			m.mu.Lock()
			writes, _, standby := m.planLocked([]fleet.BoardView{board}, clk.Now())
			m.standby = standby
			m.mu.Unlock()
			for _, w := range writes {
				if bucket.write(t, w) {
					m.mu.Lock()
					m.written[w.id] = clk.Now()
					m.mu.Unlock()
				}
			}
		}
		clk.Advance(time.Millisecond)
	}
	if bucket.claims > 1 {
		t.Errorf("the board changed hands %d times between two live gateways; want at most once", bucket.claims)
	}
	// Exactly one owner, and each gateway agrees on which.
	ra, rb := a.records[board.ID], b.records[board.ID]
	if ra.View.Gateway != rb.View.Gateway {
		t.Errorf("gwa sees owner %s, gwb %s", ra.View.Gateway, rb.View.Gateway)
	}
	owner := map[string]*Cluster{a.name: a, b.name: b}[ra.View.Gateway]
	other := a
	if owner == a {
		other = b
	}
	if owner.standby[board.ID] || !other.standby[board.ID] {
		t.Errorf("owner %s standby %v, %s standby %v; want only the other in standby",
			owner.name, owner.standby[board.ID], other.name, other.standby[board.ID])
	}
}
