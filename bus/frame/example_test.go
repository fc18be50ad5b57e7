package frame_test

import (
	"fmt"

	"github.com/holofleet/holofleet/bus/frame"
)

// Example sends "all boards of group 2: solid teal at 40 %, looping" as a
// native frame and reads it back as a board does: the typed message, its
// payload, the frame with its checksum, and the COBS wire form between two
// 0x00 delimiters.
func Example() {
	req := frame.LEDsRequest{Mode: frame.LEDSolid, R: 0x00, G: 0x80, B: 0x80, Brightness: 40,
		Flags: frame.LEDLoop | frame.LEDNewColour}
	payload, err := frame.Marshal(req)
	if err != nil {
		panic(err)
	}
	f := frame.Frame{Addr: frame.GroupAddress(2), Seq: 7, Type: req.Type(), Payload: payload}
	wire, err := frame.AppendEncode(nil, f)
	if err != nil {
		panic(err)
	}
	fmt.Printf("payload % x\n", payload)
	fmt.Printf("wire    % x\n", wire)

	got, _, err := frame.Decode(make([]byte, 0, frame.MaxLen), wire)
	if err != nil {
		panic(err)
	}
	msg, err := frame.ParseRequest(got)
	if err != nil {
		panic(err)
	}
	fmt.Printf("to %v, seq %d, %v: %+v\n", got.Addr, got.Seq, got.Type, msg)
	// The frame is e1 (group 2: 223+2) 07 (seq) 30 (LEDS), the payload,
	// then CRC-16/CCITT-FALSE 0x36bd little-endian; COBS replaces the
	// payload's one zero byte (R=0) by opening the run before it with
	// its distance (05), and the run after it with its own (07).
	//
	// Output:
	// payload 01 00 80 80 28 03
	// wire    00 05 e1 07 30 01 07 80 80 28 03 bd 36 00
	// to @g2, seq 7, LEDS: &{Mode:solid R:0 G:128 B:128 Brightness:40 Flags:3}
}

// ExampleDecode: a frame whose bytes were damaged on the line fails its
// checksum and is dropped, never half-read.
func ExampleDecode() {
	wire, _ := frame.AppendEncode(nil, frame.Frame{Addr: 5, Seq: 1, Type: frame.TypePing})
	wire[3] ^= 0x10 // one bit flipped on the wire
	_, _, err := frame.Decode(nil, wire)
	fmt.Println(err)
	// Output:
	// frame: bad checksum
}
