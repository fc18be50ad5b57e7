package policy

import (
	"encoding/json"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// cueOps are the ops of bridge/request/cue (gateway/mqtt/cue.go) and the
// verb each needs on resource cues: state is a read, the rest run the
// show (operator).
var cueOps = map[string]auth.Verb{"go": auth.VerbAct, "stop": auth.VerbAct, "back": auth.VerbAct,
	"start": auth.VerbAct, "standby": auth.VerbAct, "state": auth.VerbRead}

// cueAttributes fills a for bridge/request/cue with payload: a body it
// cannot read, or an op it does not know, needs admin (the bridge then
// says what is wrong).
func cueAttributes(a *auth.Attributes, payload []byte) {
	admin := func() { a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResBridge, "request/"+layout.VerbCue }
	m, ok := plainObject(payload)
	if !ok {
		admin()
		return
	}
	var r struct {
		List string `json:"list"`
		Op   string `json:"op"`
	}
	raw, _ := json.Marshal(m)
	if json.Unmarshal(raw, &r) != nil {
		admin()
		return
	}
	v, known := cueOps[r.Op]
	if !known {
		admin()
		return
	}
	a.Verb, a.Resource, a.Kind, a.Name = v, auth.ResCues, r.Op, r.List
}
