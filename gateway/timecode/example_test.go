package timecode_test

import (
	"fmt"

	"github.com/holofleet/holofleet/gateway/timecode"
)

// An Art-Net listener hands ArtTimeCode packets (opcode 0x9700) to Decode.
func ExampleDecode() {
	pkt := []byte{'A', 'r', 't', '-', 'N', 'e', 't', 0, 0x00, 0x97, 0, 14, 0, 0, 24, 59, 59, 9, byte(timecode.EBU)}
	p, err := timecode.Decode(pkt)
	fmt.Println(p.Timecode, p.Timecode.Rate, err)
	// Output: 09:59:59:24 25 <nil>
}

func ExampleParse() {
	t, _ := timecode.Parse("00:10:00;00", timecode.SMPTE)
	fmt.Println(t.Rate, t.Count(), t.Duration())
	// Output: 29.97df 17982 9m59.9994s
}
