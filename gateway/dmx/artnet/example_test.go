package artnet_test

import (
	"fmt"

	"github.com/holofleet/holofleet/gateway/dmx/artnet"
)

func Example() {
	pkt, _ := artnet.AppendDmx(nil, artnet.Dmx{Sequence: 1, PortAddress: 0x0102, Slots: []byte{255, 0, 128}})
	var d artnet.Dmx
	var p artnet.Poll
	got, err := artnet.Decode(pkt, &d, &p)
	fmt.Printf("%d %v op 0x%04x port-address 0x%04x slots %v\n", len(pkt), err, got.Op, got.Dmx.PortAddress, got.Dmx.Slots)
	// Output: 22 <nil> op 0x5000 port-address 0x0102 slots [255 0 128 0]
}
