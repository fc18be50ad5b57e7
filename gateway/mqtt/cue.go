package mqtt

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/holofleet/holofleet/gateway/cue"
	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// Cue lists over MQTT (docs/show.md): one request verb and, for Home
// Assistant, a button per cue list.
//
//	bridge/request/cue {"list": L, "op": O, "cue": N}
//	    O: go, stop, back, state, start (cue N), standby (cue N);
//	    L: a list, "" the current one. The response's data is the
//	    list's state. state needs viewer, the rest operator (resource
//	    cues, like every surface).
//
// Home Assistant: the device "holofleet show" (<ha>/device/holo_show/
// config, holo_show_<gw> in a cluster) holds one button per cue list,
// "GO <list>", pressing which publishes {"list": L, "op": "go"} on
// bridge/request/cue. SetCueLists keeps it in step with the lists.

// VerbCue is the cue lists' request verb (its policy: policy/cue.go).
const VerbCue = layout.VerbCue

// Cues is what the bridge needs of the cue engine (*cue.Engine).
type Cues interface {
	Go(name string, asap bool) (cue.State, error)
	Start(name string, n cue.Number, asap bool) (cue.State, error)
	Stop(name string) (cue.State, error)
	Back(name string) (cue.State, error)
	SetStandby(name string, n cue.Number) (cue.State, error)
	State(name string) (cue.State, error)
}

type cueRequestBody struct {
	Transaction json.RawMessage `json:"transaction"`
	List        string          `json:"list"`
	Op          string          `json:"op"`
	Cue         cue.Number      `json:"cue"`
}

// cueRequest runs bridge/request/cue.
func (b *Bridge) cueRequest(payload []byte) (any, error) {
	if b.o.Cues == nil {
		return nil, fmt.Errorf("%w: this gateway runs no cue lists", ErrUnsupported)
	}
	m, err := cmdbody.Object(payload)
	if err != nil {
		return nil, err
	}
	if err := cmdbody.OnlyKeys(m, VerbCue, "transaction", "list", "op", "cue"); err != nil {
		return nil, err
	}
	var r cueRequestBody
	if err := json.Unmarshal(mustJSON(m), &r); err != nil {
		return nil, fmt.Errorf("%w: cue: %v", ErrBadCommand, err)
	}
	c := b.o.Cues
	switch r.Op {
	case "go":
		return c.Go(r.List, false)
	case "stop":
		return c.Stop(r.List)
	case "back":
		return c.Back(r.List)
	case "state":
		return c.State(r.List)
	case "start":
		return c.Start(r.List, r.Cue, false)
	case "standby":
		return c.SetStandby(r.List, r.Cue)
	}
	return nil, fmt.Errorf("%w: cue: op %q (go, stop, back, state, start, standby)", ErrBadCommand, r.Op)
}

// cueDevice is the HA device of the cue lists' buttons, and its topic.
func (b *Bridge) cueDevice() (id, topic string) {
	id = "holo_show"
	if b.t.Gateway != "" {
		id += "_" + b.t.Gateway
	}
	id = layout.ObjectID(id)
	return id, b.t.HA + "/device/" + id + "/config"
}

// SetCueLists publishes Home Assistant's "GO <list>" buttons, one per
// list named (none: the device is removed). The gateway calls it at the
// start and whenever a list is saved or deleted.
func (b *Bridge) SetCueLists(names []string) {
	id, topic := b.cueDevice()
	if len(names) == 0 {
		b.clearRetained(topic)
		return
	}
	names = slices.Sorted(slices.Values(names))
	cmps := map[string]any{}
	for _, n := range names {
		oid := layout.ObjectID(id + "_go_" + n)
		cmps[oid] = map[string]any{"p": "button", "name": "GO " + n, "unique_id": oid,
			"command_topic": b.t.Bridge("request/" + VerbCue),
			"payload_press": string(mustJSON(map[string]string{"list": n, "op": "go"})), "icon": "mdi:play"}
	}
	b.setRetained(topic, mustJSON(map[string]any{
		"dev":          map[string]any{"identifiers": []string{id}, "name": "holofleet show", "manufacturer": "holofleet", "model": "holo-gateway cue lists"},
		"o":            map[string]any{"name": "holo-gateway", "sw_version": b.o.Version},
		"availability": []map[string]any{{"topic": b.t.Own("state"), "value_template": "{{ value_json.state }}"}},
		"qos":          1,
		"cmps":         cmps,
	}))
}
