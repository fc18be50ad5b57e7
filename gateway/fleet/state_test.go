package fleet

import (
	"encoding/json"
	"testing"
	"time"
)

// TestState: the last state of a kind a board reported is there until
// the board restarts; unknown boards and kinds have none.
func TestState(t *testing.T) {
	s := newSetup(t, Options{})
	b := &fakeBoard{id: "b1", groups: []int{}}
	s.plug(t, b, "1", "http://b1")
	lan := lanRef("http://b1")
	if _, ok := s.f.State("b1", "scenes"); ok {
		t.Fatal("a state before any was reported")
	}
	s.f.Changed(lan, "scenes", json.RawMessage(`{"scenes":[]}`))
	s.f.Changed(lan, "scenes", json.RawMessage(`{"scenes":[{"name":"a"}]}`))
	got, ok := s.f.State("b1", "scenes")
	if !ok || string(got) != `{"scenes":[{"name":"a"}]}` {
		t.Fatalf("State = %s %v, want the last one reported", got, ok)
	}
	got[0] = 'x' // the copy is the caller's
	if again, _ := s.f.State("b1", "scenes"); string(again) != `{"scenes":[{"name":"a"}]}` {
		t.Fatalf("the fleet's copy changed: %s", again)
	}
	if _, ok := s.f.State("nobody", "scenes"); ok {
		t.Error("a state of an unknown board")
	}
	s.clk.Advance(time.Second)
	s.f.Restarted(lan)
	if _, ok := s.f.State("b1", "scenes"); ok {
		t.Error("a state from before the restart")
	}
}
