package mqtt

import (
	"log/slog"
	"testing"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// stubCluster is a gateway of a cluster for the bridge's decisions.
type stubCluster struct {
	name string
	part bool
}

func (s *stubCluster) Name() string             { return s.name }
func (s *stubCluster) Partitioned() bool        { return s.part }
func (s *stubCluster) Changed() <-chan struct{} { return nil }
func (s *stubCluster) Alive(name string) bool   { return name != "adead" }

func clusterBridge(name string, part bool) *Bridge {
	b := &Bridge{o: Options{Base: "holo", HAPrefix: "ha", Cluster: &stubCluster{name, part}},
		t: layout.Topics{Base: "holo", HA: "ha", Gateway: name}, log: slog.New(slog.DiscardHandler), peers: peers{by: map[string]*peer{}},
		resnap: make(chan struct{}, 1), rwake: make(chan struct{}, 1), retained: map[string][]byte{}, dirty: map[string]bool{},
		boards: map[string]*boardInfo{}}
	b.names, _ = openNames(nil)
	return b
}

// TestLeader: the bridge that answers for the broker is the first by
// name among the online bridges not cut off from the cluster, or among
// all online ones when every one is cut off; every bridge decides alike.
func TestLeader(t *testing.T) {
	type p struct {
		name                string
		online, partitioned bool
	}
	for _, tc := range []struct {
		name   string
		me     string
		mePart bool
		peers  []p
		leads  bool
	}{
		{"alone", "b", false, nil, true},
		{"first by name", "a", false, []p{{"b", true, false}, {"c", true, false}}, true},
		{"not first", "b", false, []p{{"a", true, false}}, false},
		{"first is offline", "b", false, []p{{"a", false, false}}, true},
		{"first is cut off", "b", false, []p{{"a", true, true}}, true},
		{"cut off itself", "a", true, []p{{"b", true, false}}, false},
		{"all cut off: by name", "a", true, []p{{"b", true, true}}, true},
		{"all cut off, not first", "b", true, []p{{"a", true, true}}, false},
		{"its own echo", "b", false, []p{{"b", true, false}, {"c", true, false}}, true},
		{"online but dead by heartbeats", "b", false, []p{{"adead", true, false}}, true},
		{"cut off: the heartbeats are not believed", "b", true, []p{{"adead", true, true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := clusterBridge(tc.me, tc.mePart)
			for _, q := range tc.peers {
				b.peers.by[q.name] = &peer{online: q.online, partitioned: q.partitioned}
			}
			if got := b.leads(); got != tc.leads {
				t.Errorf("leads = %v, want %v", got, tc.leads)
			}
		})
	}
}

// TestPeerNames: a board another bridge lists keeps the name it has there
// (a handover), a name another bridge's board has is not given twice, and
// a rename to it is refused.
func TestPeerNames(t *testing.T) {
	b := clusterBridge("gw2", false)
	b.onPeer("gw1", "state", []byte(`{"state":"online","gateway":"gw1"}`))
	b.onPeer("gw1", "boards", []byte(`[{"id":"aa01","name":"stage-left","gateway":"gw1"},{"id":"bb02","name":"holo-cc03","gateway":"gw1"}]`))
	b.vmu.Lock()
	moved := b.boardLocked("aa01", &fleet.BoardView{ID: "aa01", Hostname: "holo-aa01"})
	clash := b.boardLocked("cc03", &fleet.BoardView{ID: "cc03", Hostname: "holo-cc03"})
	b.vmu.Unlock()
	if moved.name != "stage-left" {
		t.Errorf("a board from gw1 is named %q here, want its name there, stage-left", moved.name)
	}
	if clash.name == "holo-cc03" || clash.name == "" {
		t.Errorf("board cc03 named %q, which gw1's bb02 has", clash.name)
	}
	if err := b.Rename("aa01", "holo-cc03"); err == nil {
		t.Error("rename to gw1's board's name accepted")
	}
	if id, ok := b.resolve("holo-cc03"); !ok || id != "bb02" {
		t.Errorf("resolve(holo-cc03) = %q %v, want gw1's bb02", id, ok)
	}
	if b.leads() {
		t.Error("gw2 leads while gw1 is online and not cut off")
	}
	b.onPeer("gw1", "state", []byte(`{"state":"offline","gateway":"gw1"}`))
	if !b.leads() {
		t.Error("gw2 does not lead once gw1 is offline")
	}
}

// FuzzPeer: whatever another bridge's state or boards topic holds, the
// bridge neither panics nor takes it for a board without an id.
func FuzzPeer(f *testing.F) {
	f.Add("state", []byte(`{"state":"online","partitioned":true}`))
	f.Add("boards", []byte(`[{"id":"a","name":"n","groups":[1,2]}]`))
	f.Add("boards", []byte(`[{"id":""},null,3,"x"]`))
	f.Add("boards", []byte(``))
	f.Fuzz(func(t *testing.T, leaf string, payload []byte) {
		b := clusterBridge("gw2", false)
		b.onPeer("gw1", leaf, payload)
		for id := range b.peers.by["gw1"].boards {
			if id == "" {
				t.Fatal("a board without an id")
			}
		}
		_ = b.leads()
	})
}
