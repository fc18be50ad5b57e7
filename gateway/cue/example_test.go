package cue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// printFleet prints each action it is asked, with its moment.
type printFleet struct{ t0 time.Time }

func (p printFleet) Do(_ context.Context, sel fleet.Selector, a fleet.Action) ([]fleet.Result, error) {
	fmt.Printf("%s %s on groups %v at +%v\n", a.Kind, a.Body, sel.Groups, a.At.Sub(p.t0))
	return nil, nil
}

// A GO fires the standby cue one lead ahead; the cue after it follows two
// seconds later, on the fake clock.
func ExampleEngine_Go() {
	t0 := time.Date(2026, 1, 1, 20, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	eng, _ := cue.New(cue.Options{Fleet: printFleet{t0}, Clock: clk})
	defer eng.Close()
	leds := func(g int, c string) []cue.Action {
		return []cue.Action{{Kind: "leds", Selector: fleet.Selector{Groups: []int{g}}, Body: json.RawMessage(`{"colour":"` + c + `"}`)}}
	}
	_, _ = eng.Put(cue.List{Name: "show", Cues: []cue.Cue{
		{Number: "1", Actions: leds(1, "red"), Follow: cue.FollowAfter, FollowMS: 2000},
		{Number: "2", Actions: leds(2, "blue")},
	}})
	ch := eng.Watch(context.Background())
	st, _ := eng.Go("show", false)
	for ev := range ch {
		if ev.Type == cue.EventFired && ev.Cue == "1" {
			break
		}
	}
	fmt.Println("past the end after one GO:", st.Standby == "")
	clk.WaitForWaiters(1, time.Second)
	clk.Advance(2 * time.Second)
	for ev := range ch {
		if ev.Type == cue.EventFired {
			break
		}
	}
	// Output:
	// leds {"colour":"red"} on groups [1] at +150ms
	// past the end after one GO: true
	// leds {"colour":"blue"} on groups [2] at +2.15s
}
