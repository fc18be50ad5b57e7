package osc_test

import (
	"fmt"
	"time"

	"github.com/holofleet/holofleet/gateway/osc"
)

// Example encodes what `oscsend localhost PORT /holo/group/1/scene i 1`
// sends, and decodes it as the gateway does: the address and the type tag
// string, each padded with zeros to four bytes, then the int32 big-endian.
func Example() {
	b, err := osc.Encode(&osc.Message{Address: "/holo/group/1/scene", Args: []any{int32(1)}})
	if err != nil {
		panic(err)
	}
	for i := 0; i < len(b); i += 8 {
		fmt.Printf("% x  %q\n", b[i:min(i+8, len(b))], b[i:min(i+8, len(b))])
	}
	p, err := osc.Decode(b)
	if err != nil {
		panic(err)
	}
	m := p.(*osc.Message)
	fmt.Printf("%s %T %v\n", m.Address, m.Args[0], m.Args[0])
	// Output:
	// 2f 68 6f 6c 6f 2f 67 72  "/holo/gr"
	// 6f 75 70 2f 31 2f 73 63  "oup/1/sc"
	// 65 6e 65 00 2c 69 00 00  "ene\x00,i\x00\x00"
	// 00 00 00 01  "\x00\x00\x00\x01"
	// /holo/group/1/scene int32 1
}

// ExampleBundle: a bundle's time tag (NTP: seconds since 1900, then the
// fraction) is the moment every message in it takes effect, which is how
// a desk times a cue ahead (docs/fire.md).
func ExampleBundle() {
	at := time.Date(2026, 1, 2, 20, 0, 0, 500_000_000, time.UTC)
	b, err := osc.Encode(&osc.Bundle{Time: osc.TimetagOf(at), Elements: []osc.Packet{
		&osc.Message{Address: "/holo/group/1/leds", Args: []any{`{"mode":"solid","colour":"teal"}`}},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q, time tag % x\n", b[:8], b[8:16])
	p, err := osc.Decode(b)
	if err != nil {
		panic(err)
	}
	bundle := p.(*osc.Bundle)
	fmt.Println(bundle.Time.Time().UTC().Format(time.RFC3339Nano), bundle.Elements[0].(*osc.Message).Address)
	// Output:
	// "#bundle\x00", time tag ed 02 a2 40 80 00 00 00
	// 2026-01-02T20:00:00.5Z /holo/group/1/leds
}

// ExampleMatch: OSC address patterns, as /holo/subscribe takes them.
func ExampleMatch() {
	for _, addr := range []string{"/holo/board/b01/leds", "/holo/board/b01/screen", "/holo/group/1/leds"} {
		fmt.Println(addr, osc.Match("/holo/board/*/{leds,holo}", addr))
	}
	// Output:
	// /holo/board/b01/leds true
	// /holo/board/b01/screen false
	// /holo/group/1/leds false
}
