// Package policy is the access policy of the MQTT topics: every operation
// on them (a client publishing on a topic, subscribing to a filter, being
// sent a message) described as the gateway's authorisation attributes and
// decided by auth.Authorize, the one decision function of every surface.
// The embedded broker (gateway/mqtt/broker) asks it for every client; the
// bridge (gateway/mqtt) asks it for every command it takes from an
// external broker, with the role its Accept option names.
package policy

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// The table.
//
// Every MQTT operation (a client publishing on a topic, subscribing to a
// filter, being sent a message) is described as auth.Attributes and
// decided by auth.Authorize, the function the REST and gRPC API use, so
// one table is the whole policy. Policy holds the mapping from topics to
// attributes. The embedded broker asks it for every client, with the
// identity the client logged in as; the bridge asks it for every command
// with the role Options.Accept names (an external broker cannot tell the
// bridge who published).
//
//	topic                           publish                              read
//	<b>/set/leds|screen|holo|scene  act actions (kind)          operator  watch events   viewer
//	<b>/set/settings                call PATCH /settings        admin     watch events   viewer
//	<b>/set/restart                 call POST /restart          admin     watch events   viewer
//	<b>/set/update                  create rollouts (install)   admin     watch events   viewer
//	group/<n>/set/leds|scene|...    act actions (kind)          operator  watch events   viewer
//	bridge/request/boards|board     read boards                 viewer    watch bridge   admin
//	bridge/request/health           read metrics                viewer    watch bridge   admin
//	bridge/request/call             call <method> <path>        operator for show paths, else admin
//	bridge/request/do|scene         act actions                 operator
//	bridge/request/labels|rename    update boards               operator
//	bridge/request/discovery        update discovery            operator
//	bridge/request/cue              state: read cues (viewer); go, stop, back, start,
//	                                standby: act cues (operator)
//	bridge/request/rollout          list, get, boards, dry_run: read rollouts (viewer);
//	                                pause, abort: stop rollouts (operator); create,
//	                                resume, revert: admin
//	bridge/response/call            (the gateway)                         watch bridge   admin
//	bridge/response/<other verb>    (the gateway)                         watch events   viewer
//	other topics under the base     update events: nobody                 watch events   viewer
//	<ha>/status                     update discovery            operator  read discovery viewer
//	other topics under <ha>         update events: nobody                 read discovery viewer
//	$SYS/...                        nobody                                read metrics   viewer
//	anything else                   nobody                                watch bridge   admin
//
// A command the table does not name (an unknown set resource or request
// verb) and a request whose body cannot be read for its decision (not one
// JSON object, keys twice) need admin: the bridge then answers with what
// is wrong, and no one else's malformed command reaches it.
//
// The gateway's own bridge is not a token: Gateway decides its
// operations. It may publish what it mirrors (every topic above that is
// not a command) and read the commands, nothing else.

// Policy maps MQTT operations on the bridge's topics to authorisation
// decisions. Make it with New; it is safe for concurrent use.
type Policy struct {
	// Guard, when set, receives the audit records of the policy's
	// decisions that matter: every refused publication or subscription
	// and every command let through (deliveries are not recorded: one
	// refused reader would flood the log).
	Guard *auth.Guard

	t layout.Topics
	// baseLevels and haLevels are the roots split into levels.
	baseLevels, haLevels []string
}

// New returns the policy of the topics under base and haPrefix
// (empty: the defaults).
func New(base, haPrefix string) (*Policy, error) {
	base, haPrefix = layout.RootsOrDefault(base, haPrefix)
	if err := layout.CheckRoots(base, haPrefix); err != nil {
		return nil, err
	}
	return &Policy{t: layout.Topics{Base: base, HA: haPrefix}, baseLevels: strings.Split(base, "/"), haLevels: strings.Split(haPrefix, "/")}, nil
}

// topicKind sorts the topics for the policy.
type topicKind int

const (
	kindOther     topicKind = iota // outside the base and the HA prefix
	kindMirror                     // under the base, written by the gateway
	kindSet                        // <b>/set/<resource>
	kindGroup                      // group/<n>/set/<resource>
	kindRequest                    // bridge/request/<verb>
	kindResponse                   // bridge/response/<verb>
	kindHAStatus                   // <ha>/status
	kindDiscovery                  // the rest under the HA prefix
	kindSys                        // $SYS/...
)

// sorted is a topic sorted, with the levels that matter.
type sorted struct {
	kind  topicKind
	board string // kindSet
	group string // kindGroup
	leaf  string // resource (kindSet, kindGroup) or verb (kindRequest, kindResponse)
}

func (p *Policy) sort(topic string) sorted {
	if topic == p.t.HAStatus() {
		return sorted{kind: kindHAStatus}
	}
	if topic == "$SYS" || strings.HasPrefix(topic, "$SYS/") {
		return sorted{kind: kindSys}
	}
	if rest, ok := strings.CutPrefix(topic, p.t.Base+"/"); ok {
		parts := strings.Split(rest, "/")
		switch {
		case len(parts) == 3 && parts[0] == layout.LevelBridge && parts[1] == layout.LevelRequest:
			return sorted{kind: kindRequest, leaf: parts[2]}
		case len(parts) == 3 && parts[0] == layout.LevelBridge && parts[1] == layout.LevelResponse:
			return sorted{kind: kindResponse, leaf: parts[2]}
		case len(parts) == 4 && parts[0] == layout.LevelGroup && parts[2] == layout.LevelSet:
			return sorted{kind: kindGroup, group: parts[1], leaf: parts[3]}
		case len(parts) == 3 && parts[1] == layout.LevelSet && parts[0] != layout.LevelBridge && parts[0] != layout.LevelGroup:
			return sorted{kind: kindSet, board: parts[0], leaf: parts[2]}
		}
		return sorted{kind: kindMirror}
	}
	if strings.HasPrefix(topic, p.t.HA+"/") {
		return sorted{kind: kindDiscovery}
	}
	return sorted{kind: kindOther}
}

// showResources are the set resources that are show actions.
var showResources = map[string]bool{"leds": true, "screen": true, "holo": true, "scene": true}

// safeResponses are the request verbs whose responses viewers may read:
// what their requests return is what a viewer may read anyway. Others
// (call: a board's raw reply; verbs added later) are for admins.
var safeResponses = map[string]bool{
	layout.VerbBoards: true, layout.VerbBoard: true, layout.VerbDo: true, layout.VerbScene: true, layout.VerbLabels: true, layout.VerbRename: true,
	layout.VerbDiscovery: true, layout.VerbRollout: true, layout.VerbHealth: true, layout.VerbCue: true, "invalid": true,
}

// PublishAttributes describes who publishing payload on topic.
func (p *Policy) PublishAttributes(who auth.Identity, topic string, payload []byte) auth.Attributes {
	a := auth.Attributes{Who: who, Surface: auth.SurfaceMQTT}
	s := p.sort(topic)
	switch s.kind {
	case kindSet:
		a.Boards = []string{s.board}
		switch {
		case showResources[s.leaf]:
			a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResActions, s.leaf
		case s.leaf == "settings":
			a.Verb, a.Resource, a.Method, a.Path = auth.VerbCall, auth.ResBoardAPI, "PATCH", "/settings"
		case s.leaf == "restart":
			a.Verb, a.Resource, a.Method, a.Path = auth.VerbCall, auth.ResBoardAPI, "POST", "/restart"
		case s.leaf == layout.LevelUpdate:
			a.Verb, a.Resource, a.Kind = auth.VerbCreate, auth.ResRollouts, "install"
		default:
			a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResBridge, "set/"+s.leaf
		}
	case kindGroup:
		a.Selector = "group " + s.group
		if showResources[s.leaf] {
			a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResActions, s.leaf
		} else {
			a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResBridge, "group set/"+s.leaf
		}
	case kindRequest:
		requestAttributes(&a, s.leaf, payload)
	case kindHAStatus:
		a.Verb, a.Resource = auth.VerbUpdate, auth.ResDiscovery
	default:
		// What the gateway publishes (state, events, responses,
		// discovery), $SYS and foreign topics: no role writes them.
		a.Verb, a.Resource = auth.VerbUpdate, auth.ResEvents
	}
	return a
}

// requestAttributes fills a for bridge/request/<verb> with payload.
func requestAttributes(a *auth.Attributes, verb string, payload []byte) {
	admin := func() { a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResBridge, "request/"+verb }
	switch verb {
	case layout.VerbBoards, layout.VerbBoard:
		a.Verb, a.Resource = auth.VerbRead, auth.ResBoards
		return
	case layout.VerbHealth:
		a.Verb, a.Resource = auth.VerbRead, auth.ResMetrics
		return
	case layout.VerbDiscovery:
		a.Verb, a.Resource = auth.VerbUpdate, auth.ResDiscovery
		return
	case layout.VerbDo, layout.VerbScene:
		a.Verb, a.Resource, a.Kind = auth.VerbAct, auth.ResActions, verb
		return
	case layout.VerbLabels, layout.VerbRename:
		a.Verb, a.Resource = auth.VerbUpdate, auth.ResBoards
		return
	case layout.VerbCue:
		cueAttributes(a, payload) // cue.go
		return
	case layout.VerbCall, layout.VerbRollout:
	default:
		admin()
		return
	}
	// call and rollout are decided by their bodies.
	m, ok := plainObject(payload)
	if !ok {
		admin()
		return
	}
	str := func(k string) (string, bool) {
		raw, ok := m[k]
		if !ok {
			return "", true
		}
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	switch verb {
	case layout.VerbCall:
		method, ok1 := str("method")
		path, ok2 := str("path")
		board, ok3 := str("board")
		if !ok1 || !ok2 || !ok3 {
			admin()
			return
		}
		if method == "" {
			method = "GET"
		}
		a.Verb, a.Resource, a.Method, a.Path = auth.VerbCall, auth.ResBoardAPI, strings.ToUpper(method), path
		if board != "" {
			a.Boards = []string{board}
		}
	case layout.VerbRollout:
		action, ok := str("action")
		if !ok {
			admin()
			return
		}
		a.Resource, a.Kind = auth.ResRollouts, action
		switch action {
		case layout.RolloutList, layout.RolloutGet, layout.RolloutBoards, layout.RolloutDryRun:
			a.Verb = auth.VerbRead
		case layout.RolloutPause, layout.RolloutAbort:
			a.Verb = auth.VerbHalt
		case layout.RolloutCreate:
			a.Verb = auth.VerbCreate
		default: // resume, revert, and what the bridge will refuse
			a.Verb = auth.VerbUpdate
		}
	}
}

// plainObject decodes payload as one JSON object whose keys differ even
// without regard to case, so that whatever decodes it later (a
// case-insensitive struct decoder, a first-key-wins parser) reads the
// same fields the decision read.
func plainObject(payload []byte) (map[string]json.RawMessage, bool) {
	p := bytes.TrimSpace(payload)
	if len(p) == 0 {
		return map[string]json.RawMessage{}, true
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	m := map[string]json.RawMessage{}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, ok := t.(string)
		if !ok {
			return nil, false
		}
		fold := strings.ToLower(k)
		if seen[fold] {
			return nil, false
		}
		seen[fold] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		m[k] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // something after the object
	}
	// A key that differs from a field the decision reads only by case
	// would be read by a case-insensitive decoder as that field.
	for k := range m {
		for _, f := range []string{"method", "path", "board", "action"} {
			if k != f && strings.EqualFold(k, f) {
				return nil, false
			}
		}
	}
	return m, true
}

// ReadAttributes describes who being sent a message published on topic.
func (p *Policy) ReadAttributes(who auth.Identity, topic string) auth.Attributes {
	a := auth.Attributes{Who: who, Surface: auth.SurfaceMQTT}
	s := p.sort(topic)
	switch s.kind {
	case kindMirror, kindSet, kindGroup:
		a.Verb, a.Resource = auth.VerbWatch, auth.ResEvents
	case kindResponse:
		a.Verb, a.Resource = auth.VerbWatch, auth.ResEvents
		if !safeResponses[s.leaf] {
			a.Resource = auth.ResBridge
		}
	case kindHAStatus, kindDiscovery:
		a.Verb, a.Resource = auth.VerbRead, auth.ResDiscovery
	case kindSys:
		a.Verb, a.Resource = auth.VerbRead, auth.ResMetrics
	default: // request traffic, foreign topics
		a.Verb, a.Resource = auth.VerbWatch, auth.ResBridge
	}
	return a
}

// SubscribeAttributes describes who subscribing to filter. A filter
// without wildcards is decided as reading that topic; one with wildcards
// needs what reading the cheapest topic it may match needs, because every
// message it matches is decided again (ReadAttributes) when it is sent.
func (p *Policy) SubscribeAttributes(who auth.Identity, filter string) auth.Attributes {
	f := filter
	if rest, ok := strings.CutPrefix(f, "$share/"); ok {
		if _, after, ok := strings.Cut(rest, "/"); ok {
			f = after
		}
	}
	if !strings.ContainsAny(f, "+#") {
		return p.ReadAttributes(who, f)
	}
	a := auth.Attributes{Who: who, Surface: auth.SurfaceMQTT}
	switch {
	case strings.HasPrefix(f, "$SYS/"):
		a.Verb, a.Resource = auth.VerbRead, auth.ResMetrics
	case strings.HasPrefix(f, "$"):
		a.Verb, a.Resource = auth.VerbWatch, auth.ResBridge
	case mayMatchUnder(f, p.baseLevels):
		a.Verb, a.Resource = auth.VerbWatch, auth.ResEvents
	case mayMatchUnder(f, p.haLevels):
		a.Verb, a.Resource = auth.VerbRead, auth.ResDiscovery
	default:
		a.Verb, a.Resource = auth.VerbWatch, auth.ResBridge
	}
	return a
}

// mayMatchUnder reports whether filter may match a topic below the root
// whose levels are root.
func mayMatchUnder(filter string, root []string) bool {
	fl := strings.Split(filter, "/")
	for i, r := range root {
		if i >= len(fl) {
			return false
		}
		switch fl[i] {
		case "#":
			return true
		case "+", r:
		default:
			return false
		}
	}
	return len(fl) > len(root)
}

// Publish decides whether who, connected from client (host:port; "" when
// unknown), may publish payload on topic. Refusals and changes are
// audited with the client's address.
func (p *Policy) Publish(who auth.Identity, client, topic string, payload []byte) auth.Decision {
	a := p.PublishAttributes(who, topic, payload)
	a.Client = client
	d := auth.Authorize(a)
	if !d.Allowed || a.Changing() {
		p.audit(a, d)
	}
	return d
}

// audit records d for a with the policy's Guard, if any.
func (p *Policy) audit(a auth.Attributes, d auth.Decision) {
	if p.Guard == nil {
		return
	}
	code := auth.CodeOK
	if !d.Allowed {
		code = auth.CodePermissionDenied
	}
	p.Guard.Record(a, d.Allowed, code, d.Reason)
}

// Read decides whether who may be sent a message published on topic.
func (p *Policy) Read(who auth.Identity, topic string) auth.Decision {
	return auth.Authorize(p.ReadAttributes(who, topic))
}

// Subscribe decides whether who, connected from client, may subscribe to
// filter; refusals are audited with the client's address.
func (p *Policy) Subscribe(who auth.Identity, client, filter string) auth.Decision {
	a := p.SubscribeAttributes(who, filter)
	a.Client = client
	d := auth.Authorize(a)
	if !d.Allowed {
		p.audit(a, d)
	}
	return d
}

// Gateway reports whether the gateway's own bridge may publish on topic
// (publish) or subscribe to or be sent topic: it writes what it mirrors
// and reads the commands (and, in a cluster, the other bridges' state and
// boards).
func (p *Policy) Gateway(topic string, publish bool) bool {
	if publish {
		switch p.sort(topic).kind {
		case kindMirror, kindResponse, kindDiscovery:
			return true
		}
		return false
	}
	switch topic {
	case p.t.SetFilter(), p.t.GroupFilter(), p.t.RequestFilter(), p.t.HAStatus(),
		p.t.PeerFilter("state"), p.t.PeerFilter("boards"):
		// In a cluster the bridge reads the other bridges' state and
		// boards (cluster.go).
		return true
	}
	if strings.ContainsAny(topic, "+#") {
		return false
	}
	if _, leaf, ok := p.t.PeerOf(topic); ok && (leaf == "state" || leaf == "boards") {
		return true
	}
	switch p.sort(topic).kind {
	case kindSet, kindGroup, kindRequest, kindHAStatus:
		return true
	}
	return false
}

// Command reports whether topic is a command (set, group set or bridge
// request): the broker never retains one.
func (p *Policy) Command(topic string) bool {
	switch p.sort(topic).kind {
	case kindSet, kindGroup, kindRequest:
		return true
	}
	return false
}
