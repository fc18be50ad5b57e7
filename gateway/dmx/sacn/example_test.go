package sacn_test

import (
	"fmt"

	"github.com/holofleet/holofleet/gateway/dmx/sacn"
)

func Example() {
	pkt, _ := sacn.AppendData(nil, sacn.Data{SourceName: "desk", Priority: 120, Universe: 2, Sequence: 9, Slots: []byte{255, 0, 128}})
	var d sacn.Data
	var s sacn.Sync
	p, err := sacn.Decode(pkt, &d, &s)
	fmt.Println(len(pkt), err, p.Data.SourceName, p.Data.Universe, p.Data.Priority, p.Data.Slots, sacn.MulticastAddr(p.Data.Universe))
	// Output: 129 <nil> desk 2 120 [255 0 128] 239.255.0.2
}
