package dmx

import (
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/auth"
)

// TestActive: a patched fixture is active while its universe has a source
// heard within its loss time, even before the engine's own check drops
// the source; a universe no source sends is not.
func TestActive(t *testing.T) {
	p := &Patch{Fixtures: []Fixture{
		{Universe: 1, Address: 1, Profile: ProfileHolo, Group: 1},
		{Universe: 2, Address: 1, Profile: ProfileHolo, Board: "b2"},
	}}
	r := newRig(t, p, auth.RoleOperator)
	if got := r.e.Active(); len(got) != 0 {
		t.Fatalf("active before any packet: %+v", got)
	}
	r.e.Data(sacnFrame(1, "desk", 100, 1, slots(1, 255, 255, 0, 0)))
	r.f.next(t)
	got := r.e.Active()
	if len(got) != 1 || got[0].Fixture.Group != 1 || len(got[0].Sources) != 1 || got[0].Sources[0] != "desk (sacn)" {
		t.Fatalf("active: %+v", got)
	}
	r.clk.Advance(SourceLossSACN - time.Millisecond)
	if got := r.e.Active(); len(got) != 1 {
		t.Fatalf("active just before the loss time: %+v", got)
	}
	r.clk.Advance(time.Millisecond)
	if got := r.e.Active(); len(got) != 0 {
		t.Fatalf("active once the source is lost: %+v", got)
	}
}
