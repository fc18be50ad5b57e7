package boardapi_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// A handler answers with a sentinel and its own message; a client that
// decoded the reply matches it with errors.Is, whatever the message says.
func ExampleErrorf() {
	err := boardapi.Errorf(boardapi.ErrBusy, "an upload is running")
	body, _ := json.Marshal(err)
	fmt.Println(err.Status, string(body))

	var decoded boardapi.Error
	_ = json.Unmarshal(body, &decoded)
	decoded.Status = 409
	fmt.Println(errors.Is(&decoded, boardapi.ErrBusy), errors.Is(&decoded, boardapi.ErrStreamsBusy))
	// Output:
	// 409 {"error":"busy","message":"an upload is running"}
	// true false
}

// Anything that is not an API error is an internal one.
func ExampleWrap() {
	fmt.Println(boardapi.Wrap(errors.New("disk on fire")).Code)
	fmt.Println(boardapi.Wrap(boardapi.ErrNoSpace).Status)
	// Output:
	// internal
	// 507
}

// ExampleLEDPatch_Check: the gateway checks an LED change with the rule
// the board applies, so what it accepts is what a board accepts, with the
// board's own code and message.
func ExampleLEDPatch_Check() {
	var p boardapi.LEDPatch
	if err := boardapi.DecodeBytes([]byte(`{"mode":"solid","colour":"Warm White","brightness":0}`), &p, false); err != nil {
		panic(err)
	}
	err := p.Check()
	fmt.Println(err)
	fmt.Println(errors.Is(err, boardapi.ErrBrightness), errors.Is(err, boardapi.ErrBadRequest))
	c, _ := boardapi.ParseColour(*p.Colour)
	fmt.Println(boardapi.FormatColour(c))
	// Output:
	// brightness 0: want a percent from 1 to 100 (use mode off to turn the strip dark)
	// true true
	// #ffb46b
}
