package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/action"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
	"github.com/holofleet/holofleet/gateway/mqtt/spool"
)

// commandTimeout bounds one command's work on the boards.
const commandTimeout = 15 * time.Second

// Command sorts.
const (
	cmdSet     = iota // <b>/set/<resource>
	cmdGroup          // group/<n>/set/<resource>
	cmdRequest        // bridge/request/<verb>
	cmdHA             // <prefix>/status
)

// command is one message received on a command topic, parsed from its
// topic.
type command struct {
	sort     int
	topic    string
	payload  []byte
	board    string // board name (cmdSet)
	group    int    // cmdGroup
	resource string // cmdSet, cmdGroup
	verb     string // cmdRequest
	// quiet: run it, but another gateway's bridge answers (cluster.go).
	quiet bool
}

// onMessage is paho's handler: it sorts the message, applies the size and
// rate limits, and hands it to the workers without blocking.
func (b *Bridge) onMessage(_ paho.Client, msg paho.Message) {
	if gw, leaf, ok := b.t.PeerOf(msg.Topic()); ok && b.clustered() {
		if leaf == "state" || leaf == "boards" {
			b.onPeer(gw, leaf, msg.Payload())
		}
		return
	}
	if msg.Retained() && msg.Topic() != b.t.HAStatus() {
		return // a stale retained command is not a command
	}
	c, err := b.parseTopic(msg.Topic())
	if err != nil {
		return // not ours (the filters are wider than the topics)
	}
	c.payload = slices.Clone(msg.Payload())
	if !b.claim(&c) {
		return // another gateway's bridge takes it
	}
	if c.sort == cmdHA {
		if strings.TrimSpace(string(c.payload)) == "online" {
			b.forceRetained(b.o.HAPrefix + "/device/")
		}
		return
	}
	b.st.commands.Add(1)
	switch {
	case len(c.payload) > MaxCommand:
		b.refuse(c, fmt.Errorf("%w: payload of %d bytes (at most %d)", ErrBadCommand, len(c.payload), MaxCommand))
		return
	case !b.limits.allow(c.limitKey(), c.topic):
		b.st.ratelimited.Add(1)
		b.m.commands.WithLabelValues("rate_limited").Inc()
		b.refuse(c, fmt.Errorf("%w: %s", ErrRateLimited, c.topic))
		return
	}
	if err := b.admit(c); err != nil {
		b.refuse(c, err)
		return
	}
	select {
	case b.cmds <- c:
	default:
		b.refuse(c, fmt.Errorf("%w: %d commands waiting", ErrBusy, len(b.cmds)))
	}
}

// limitKey is the key of the per-board limit: the board, the group or
// the bridge.
func (c command) limitKey() string {
	switch c.sort {
	case cmdSet:
		return "board/" + c.board
	case cmdGroup:
		return "group/" + strconv.Itoa(c.group)
	}
	return "bridge"
}

// parseTopic sorts a topic the bridge subscribed to.
func (b *Bridge) parseTopic(topic string) (command, error) {
	c := command{topic: topic}
	if topic == b.t.HAStatus() {
		c.sort = cmdHA
		return c, nil
	}
	rest, ok := strings.CutPrefix(topic, b.o.Base+"/")
	if !ok {
		return c, ErrBadCommand
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[0] == layout.LevelBridge && parts[1] == layout.LevelRequest:
		c.sort, c.verb = cmdRequest, parts[2]
	case len(parts) == 4 && parts[0] == layout.LevelGroup && parts[2] == layout.LevelSet:
		n, err := strconv.Atoi(parts[1])
		if err != nil || fleet.CheckGroup(n) != nil || strconv.Itoa(n) != parts[1] {
			c.sort, c.resource = cmdGroup, parts[3]
			return c, nil // group stays 0: refused with a reason
		}
		c.sort, c.group, c.resource = cmdGroup, n, parts[3]
	case len(parts) == 3 && parts[1] == layout.LevelSet && parts[0] != layout.LevelBridge && parts[0] != layout.LevelGroup:
		c.sort, c.board, c.resource = cmdSet, parts[0], parts[2]
	default:
		return c, ErrBadCommand
	}
	return c, nil
}

// refuse answers a command that is not run.
func (b *Bridge) refuse(c command, err error) {
	b.st.refused.Add(1)
	if !errors.Is(err, ErrRateLimited) {
		b.m.commands.WithLabelValues("refused").Inc()
	}
	b.answer(c, nil, err)
}

// answer publishes a request's response, or a set command's error on
// bridge/event (a successful set shows in the board's state topics).
func (b *Bridge) answer(c command, data any, err error) {
	if b.silent(c, err) {
		return
	}
	if c.sort == cmdRequest {
		var tx json.RawMessage
		var env struct {
			Transaction json.RawMessage `json:"transaction"`
		}
		if json.Unmarshal(c.payload, &env) == nil && len(env.Transaction) > 0 && len(env.Transaction) <= 256 {
			tx = env.Transaction
		}
		// The status is the error's class's (package fault's table).
		resp := map[string]any{"status": fault.Of(err).MQTT(), "data": data}
		if data == nil {
			resp["data"] = map[string]any{}
		}
		if err != nil {
			resp["error"] = err.Error()
		}
		if tx != nil {
			resp["transaction"] = tx
		}
		verb := c.verb
		if layout.ValidName(verb) != nil {
			verb = "invalid"
		}
		b.enqueue(spool.Message{Topic: b.t.Response(verb), Payload: mustJSON(resp), QoS: 1})
		return
	}
	if err != nil {
		b.bridgeEvent("command_error", map[string]any{"topic": c.topic, "error": err.Error()})
	}
}

// commandLoop runs commands until ctx ends.
func (b *Bridge) commandLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-b.cmds:
			if c.timed() {
				b.runTimedCommand(ctx, c)
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, commandTimeout)
			data, err := b.run(cctx, c)
			cancel()
			b.finish(c, data, err)
		}
	}
}

func (b *Bridge) run(ctx context.Context, c command) (any, error) {
	switch c.sort {
	case cmdSet:
		id, ok := b.names.id(c.board)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownBoard, c.board)
		}
		return nil, b.runSet(ctx, id, c.resource, c.payload)
	case cmdGroup:
		if c.group == 0 {
			return nil, fmt.Errorf("%w: group in %s (1-31)", ErrBadCommand, c.topic)
		}
		return b.runGroup(ctx, c.group, c.resource, c.payload)
	case cmdRequest:
		return b.request(ctx, c.verb, c.payload)
	}
	return nil, ErrBadCommand
}

// apiCall is one board API request a command stands for.
type apiCall struct {
	method, path string
	body         []byte
}

func callOf(r action.Request) apiCall { return apiCall{r.Method, r.Path, r.Body} }

// runSet validates and runs <b>/set/<resource>.
func (b *Bridge) runSet(ctx context.Context, id, resource string, payload []byte) error {
	if resource == layout.LevelUpdate {
		if p := strings.TrimSpace(string(payload)); p != "install" && p != `{"install":true}` {
			return fmt.Errorf("%w: update takes \"install\"", ErrBadCommand)
		}
		if b.o.Install == nil {
			return fmt.Errorf("%w: firmware install needs rollouts", ErrUnsupported)
		}
		return b.o.Install(ctx, id)
	}
	if body, ft, timed, err := takeFireTime(payload); timed {
		if err != nil {
			return err
		}
		res, err := b.runTimed(ctx, fleet.Selector{Boards: []string{id}}, resource, body, ft)
		if err != nil {
			return err
		}
		return firstResultError(res)
	}
	if hl, ok, err := homeassistant.ParseLight(resource, payload); ok {
		if err != nil {
			return err
		}
		return b.runHALight(ctx, id, resource, hl)
	}
	calls, err := b.translate(id, resource, payload)
	if err != nil {
		return err
	}
	_, err = b.callAll(ctx, id, calls)
	return err
}

// callAll runs calls on a board in order, stopping at the first error
// (the board's refusal included); it returns the last reply.
func (b *Bridge) callAll(ctx context.Context, id string, calls []apiCall) (fleet.Reply, error) {
	var rep fleet.Reply
	for _, ac := range calls {
		var err error
		rep, err = b.o.Fleet.Call(ctx, id, ac.method, ac.path, ac.body)
		if err != nil {
			return rep, err
		}
		if err := rep.Err(); err != nil {
			return rep, fmt.Errorf("board %s: %w", id, err)
		}
	}
	return rep, nil
}

// runGroup validates and runs group/<n>/set/<resource> through the
// fleet's group actions.
func (b *Bridge) runGroup(ctx context.Context, group int, resource string, payload []byte) (any, error) {
	if body, ft, timed, err := takeFireTime(payload); timed {
		if err != nil {
			return nil, err
		}
		res, err := b.runTimed(ctx, fleet.Selector{Groups: []int{group}}, resource, body, ft)
		if err != nil {
			return nil, err
		}
		return b.namedResults(res), firstResultError(res)
	}
	var ab action.Body
	switch resource {
	case "scene", "leds", "holo", "screen":
		if hl, ok, err := homeassistant.ParseLight(resource, payload); ok {
			if err != nil {
				return nil, err
			}
			if ab, err = homeassistant.GroupLight(resource, hl); err != nil {
				return nil, err
			}
			break
		}
		a, err := boardAction(resource, payload)
		if err != nil {
			return nil, err
		}
		if a.Kind == "" {
			return nil, fmt.Errorf("%w: a group's screen takes show fields or off", ErrBadCommand)
		}
		p, err := prepare(fleet.Selector{Groups: []int{group}}, a)
		if err != nil {
			return nil, err
		}
		ab = p.Body
	default:
		return nil, fmt.Errorf("%w: group resource %q (scene, leds, holo, screen)", ErrBadCommand, resource)
	}
	res, err := b.o.Fleet.Do(ctx, fleet.Selector{Groups: []int{group}}, actionOf(ab))
	if err != nil {
		return nil, err
	}
	return b.namedResults(res), firstResultError(res)
}

// actionOf is the fleet action carrying a body.
func actionOf(ab action.Body) fleet.Action {
	return fleet.Action{Kind: string(ab.Kind()), Body: ab.Request().Body}
}

func firstResultError(res []fleet.Result) error {
	for _, r := range res {
		if r.Error != "" {
			if r.Message != "" {
				return fmt.Errorf("board %s: %s: %s", r.Board, r.Error, r.Message)
			}
			return fmt.Errorf("board %s: %s", r.Board, r.Error)
		}
	}
	return nil
}

// namedResults adds board names to results.
func (b *Bridge) namedResults(res []fleet.Result) []map[string]any {
	out := make([]map[string]any, 0, len(res))
	for _, r := range res {
		name := b.names.name(r.Board)
		if name == "" && b.clustered() {
			name = b.peerName(r.Board)
		}
		m := map[string]any{"board": name, "id": r.Board, "via": r.Via}
		if r.Reply.Status != 0 {
			m["reply"] = r.Reply
		}
		if r.Error != "" {
			m["error"] = r.Error
		}
		if r.Message != "" {
			m["message"] = r.Message
		}
		out = append(out, m)
	}
	return out
}

// translate turns a set command in the board's own form into board API
// calls, refusing what the board would refuse.
func (b *Bridge) translate(id, resource string, payload []byte) ([]apiCall, error) {
	switch resource {
	case "leds", "holo", "scene", "screen":
		if resource == "screen" {
			if call, ok, err := backlightCall(payload); ok {
				return []apiCall{call}, err
			}
		}
		a, err := boardAction(resource, payload)
		if err != nil {
			return nil, err
		}
		p, err := prepare(fleet.Selector{Boards: []string{id}}, a)
		if err != nil {
			return nil, err
		}
		return []apiCall{callOf(p.Body.Request())}, nil
	case "settings":
		body, err := settingsBody(payload)
		return []apiCall{{http.MethodPatch, "/settings", body}}, err
	case "restart":
		body, err := restartBody(payload)
		return []apiCall{{http.MethodPost, "/restart", body}}, err
	}
	return nil, fmt.Errorf("%w: resource %q (leds, screen, holo, scene, settings, restart, update)", ErrBadCommand, resource)
}

// boardAction reads a command in the board's form as the action it
// stands for; prepare then checks it with the fleet's one preparation of
// an action (the one the API, OSC and the fleet use):
//
//	leds    a PATCH /leds body (at least one field)
//	holo    a POST /holo/motion body
//	scene   {"end": true} to end the running scene, else a POST /scenes/apply body
//	screen  {"off": true} to turn it off, else a POST /screen/show body
//
// A screen {"backlight": n} is no action: boardAction returns an action
// of no kind for it (backlightCall handles it on one board).
func boardAction(resource string, payload []byte) (fleet.Action, error) {
	m, err := cmdbody.Object(payload)
	if err != nil {
		return fleet.Action{}, err
	}
	var kind action.Kind
	switch resource {
	case "leds":
		if len(m) == 0 {
			return fleet.Action{}, fmt.Errorf("%w: leds: nothing to change", ErrBadCommand)
		}
		kind = action.KindLEDs
	case "holo":
		kind = action.KindHolo
	case "scene":
		kind = action.KindSceneApply
		if end, ok, err := cmdbody.Bool(m, "end"); err != nil {
			return fleet.Action{}, err
		} else if ok {
			if !end || len(m) != 1 {
				return fleet.Action{}, fmt.Errorf("%w: scene: end stands alone and is true", ErrBadCommand)
			}
			return fleet.Action{Kind: string(action.KindSceneEnd)}, nil
		}
	case "screen":
		kind = action.KindScreenShow
		if _, ok := m["backlight"]; ok {
			return fleet.Action{}, nil
		}
		if off, ok, err := cmdbody.Bool(m, "off"); err != nil {
			return fleet.Action{}, err
		} else if ok {
			if !off || len(m) != 1 {
				return fleet.Action{}, fmt.Errorf("%w: screen: off stands alone and is true", ErrBadCommand)
			}
			return fleet.Action{Kind: string(action.KindScreenOff)}, nil
		}
	default:
		return fleet.Action{}, fmt.Errorf("%w: resource %q", ErrBadCommand, resource)
	}
	return fleet.Action{Kind: string(kind), Body: payload}, nil
}

// prepare prepares a show command's action for sel with the fleet's one
// preparation of an action (fleet.Prepare; the fleet checks the moment on
// its own clock); a refusal is an ErrBadCommand that says why.
func prepare(sel fleet.Selector, a fleet.Action) (fleet.Prepared, error) {
	p, err := fleet.Prepare(sel, a, time.Time{})
	if err != nil {
		return fleet.Prepared{}, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	return p, nil
}

// backlightCall is PATCH /screen for a screen command {"backlight": n}
// (0-100); ok is false for other screen commands.
func backlightCall(payload []byte) (apiCall, bool, error) {
	m, err := cmdbody.Object(payload)
	if err != nil {
		return apiCall{}, false, nil // boardAction says why
	}
	if _, ok := m["backlight"]; !ok {
		return apiCall{}, false, nil
	}
	if err := cmdbody.OnlyKeys(m, "screen", "backlight"); err != nil {
		return apiCall{}, true, err
	}
	v, _, err := cmdbody.Number(m, "backlight", 0, 100, true)
	if err != nil {
		return apiCall{}, true, err
	}
	return apiCall{http.MethodPatch, "/screen", mustJSON(map[string]int{"backlight": int(v)})}, true, nil
}

// settingsBody checks a PATCH /settings body.
func settingsBody(payload []byte) ([]byte, error) {
	m, err := cmdbody.Object(payload)
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: settings: nothing to change", ErrBadCommand)
	}
	if err := cmdbody.OnlyKeys(m, "settings", "boot_scene", "screen", "leds"); err != nil {
		return nil, err
	}
	if raw, ok := m["boot_scene"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if _, _, err := cmdbody.String(m, "boot_scene", layout.MaxName); err != nil {
			return nil, err
		}
	}
	for _, part := range []struct {
		k    string
		keys []string
	}{{"screen", []string{"backlight"}}, {"leds", []string{"brightness", "count"}}} {
		raw, ok := m[part.k]
		if !ok {
			continue
		}
		sub, err := cmdbody.Object(raw)
		if err != nil {
			return nil, err
		}
		if err := cmdbody.OnlyKeys(sub, "settings."+part.k, part.keys...); err != nil {
			return nil, err
		}
		for _, k := range part.keys {
			// The board's ranges: backlight 0-100, LED brightness 1-100
			// (as PATCH /leds), LED count 1-1024.
			lo, hi := 0.0, 100.0
			switch {
			case part.k == "leds" && k == "brightness":
				lo = action.MinBrightness
			case k == "count":
				lo, hi = 1, boardapi.MaxLEDCount
			}
			if _, _, err := cmdbody.Number(sub, k, lo, hi, true); err != nil {
				return nil, err
			}
		}
	}
	return mustJSON(m), nil
}

// restartBody checks a POST /restart body.
func restartBody(payload []byte) ([]byte, error) {
	m, err := cmdbody.Object(payload)
	if err != nil {
		return nil, err
	}
	if err := cmdbody.OnlyKeys(m, "restart", "delay_ms"); err != nil {
		return nil, err
	}
	if _, _, err := cmdbody.Number(m, "delay_ms", 200, 60000, true); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return mustJSON(m), nil
}

// finish counts a command that ran and answers it.
func (b *Bridge) finish(c command, data any, err error) {
	if err != nil {
		b.st.refused.Add(1)
		b.m.commands.WithLabelValues("error").Inc()
	} else {
		b.m.commands.WithLabelValues("ok").Inc()
	}
	b.answer(c, data, err)
}
