package demo

import (
	"encoding/json"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// ShowName is the demo's cue list.
const ShowName = "demo"

// Show is the demo's cue list, loaded by holo-gateway demo when the
// store has no list of that name (so an admin's edits survive a
// restart): cue 1 turns group 1 solid red, cue 2 group 2 solid blue,
// and two seconds after cue 2 fires cue 3 turns every board's LEDs off.
func Show() cue.List {
	leds := func(sel fleet.Selector, body string) []cue.Action {
		return []cue.Action{{Kind: fleet.ActionLEDs, Selector: sel, Body: json.RawMessage(body)}}
	}
	return cue.List{Name: ShowName, Cues: []cue.Cue{
		{Number: "1", Name: "Group 1 red", Actions: leds(fleet.Selector{Groups: []int{1}}, `{"mode":"solid","colour":"red","loop":true}`),
			Notes: "GO when the house lights are down."},
		{Number: "2", Name: "Group 2 blue", Actions: leds(fleet.Selector{Groups: []int{2}}, `{"mode":"solid","colour":"blue","loop":true}`),
			Follow: cue.FollowAfter, FollowMS: 2000, Notes: "Cue 3 follows 2 s after this one."},
		{Number: "3", Name: "All off", Actions: leds(fleet.Selector{All: true}, `{"mode":"off"}`),
			Notes: "Every board's LEDs off."},
	}}
}
