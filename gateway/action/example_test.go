package action_test

import (
	"fmt"

	"github.com/holofleet/holofleet/gateway/action"
)

func ExampleDecode() {
	b, err := action.Decode(action.KindLEDs, []byte(`{"mode":"rainbow","loop":true,"brightness":30}`))
	if err != nil {
		panic(err)
	}
	r := b.Request()
	fmt.Println(r.Method, r.Path, string(r.Body))
	n, ok := b.Native()
	fmt.Println(ok, n.Type() == 0x30)

	_, err = action.Decode(action.KindLEDs, []byte(`{"mode":"sparkle"}`))
	fmt.Println(err)
	// Output:
	// PATCH /leds {"mode":"rainbow","loop":true,"brightness":30}
	// true true
	// action: invalid body: leds: mode "sparkle" is not one of off, solid, wipe, rainbow, flicker
}
