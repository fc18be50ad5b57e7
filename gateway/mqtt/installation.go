package mqtt

import (
	"context"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/installation/boardstate"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
)

// InstallationStates reads every board's installation state by board id
// (cmd/holo-gateway builds it from gateway/installation's drift watcher);
// a board it does not list shows as unassigned.
type InstallationStates func() map[string]homeassistant.Install

// InstallationEvery is how often the bridge reads the installation
// states; only changes are published.
const InstallationEvery = time.Second

// followInstallation publishes every board's <b>/installation, the
// state of Home Assistant's installation sensor, as it changes.
func (b *Bridge) followInstallation(ctx context.Context) {
	clock.Every(ctx, b.clk, InstallationEvery, b.publishInstallation)
}

// publishInstallation sets each known board's installation topic
// (setRetained sends only what changed).
func (b *Bridge) publishInstallation() {
	states := b.o.InstallationStates()
	b.vmu.Lock()
	defer b.vmu.Unlock()
	for id, bi := range b.boards {
		s, ok := states[id]
		if !ok {
			s = homeassistant.Install{State: boardstate.Unassigned, Reason: "no assignment of the installation selects the board"}
		}
		b.setRetained(b.t.Board(bi.name, homeassistant.LevelInstallation), homeassistant.InstallationPayload(s))
	}
}
