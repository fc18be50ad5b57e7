package mqtt

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cue"
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

// VerbCue is the cue lists' request verb.
const VerbCue = "cue"

// Cues is what the bridge needs of the cue engine (*cue.Engine).
type Cues interface {
	Go(name string, asap bool) (cue.State, error)
	Start(name string, n cue.Number, asap bool) (cue.State, error)
	Stop(name string) (cue.State, error)
	Back(name string) (cue.State, error)
	SetStandby(name string, n cue.Number) (cue.State, error)
	State(name string) (cue.State, error)
}

// cueOps are the ops of the cue request; read ones need viewer only.
var cueOps = map[string]auth.Verb{"go": auth.VerbAct, "stop": auth.VerbAct, "back": auth.VerbAct,
	"start": auth.VerbAct, "standby": auth.VerbAct, "state": auth.VerbRead}

type cueRequestBody struct {
	Transaction json.RawMessage `json:"transaction"`
	List        string          `json:"list"`
	Op          string          `json:"op"`
	Cue         cue.Number      `json:"cue"`
}

// cueAttributes fills a for bridge/request/cue with payload: an op it
// cannot read needs admin (the bridge then says what is wrong).
func cueAttributes(a *auth.Attributes, payload []byte) {
	a.Resource = auth.ResCues
	m, ok := plainObject(payload)
	var r cueRequestBody
	if !ok || json.Unmarshal(mustJSON(m), &r) != nil {
		a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResBridge, "request/"+VerbCue
		return
	}
	v, known := cueOps[r.Op]
	if !known {
		a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResBridge, "request/"+VerbCue
		return
	}
	a.Verb, a.Kind, a.Name = v, r.Op, r.List
}

// cueRequest runs bridge/request/cue.
func (b *Bridge) cueRequest(payload []byte) (any, error) {
	if b.o.Cues == nil {
		return nil, fmt.Errorf("%w: this gateway runs no cue lists", ErrUnsupported)
	}
	m, err := object(payload)
	if err != nil {
		return nil, err
	}
	if err := onlyKeys(m, VerbCue, "transaction", "list", "op", "cue"); err != nil {
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
	if b.t.gw != "" {
		id += "_" + b.t.gw
	}
	id = objectID(id)
	return id, b.t.ha + "/device/" + id + "/config"
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
		oid := objectID(id + "_go_" + n)
		cmps[oid] = map[string]any{"p": "button", "name": "GO " + n, "unique_id": oid,
			"command_topic": b.t.base + "/bridge/request/" + VerbCue,
			"payload_press": string(mustJSON(map[string]string{"list": n, "op": "go"})), "icon": "mdi:play"}
	}
	b.setRetained(topic, mustJSON(map[string]any{
		"dev":          map[string]any{"identifiers": []string{id}, "name": "holofleet show", "manufacturer": "holofleet", "model": "holo-gateway cue lists"},
		"o":            map[string]any{"name": "holo-gateway", "sw_version": b.o.Version},
		"availability": []map[string]any{{"topic": b.t.own("state"), "value_template": "{{ value_json.state }}"}},
		"qos":          1,
		"cmps":         cmps,
	}))
}
