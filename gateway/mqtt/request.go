package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// Request verbs on bridge/request/<verb> (the topic layout's, named here
// for the bridge's handlers).
const (
	VerbBoards    = layout.VerbBoards
	VerbBoard     = layout.VerbBoard
	VerbCall      = layout.VerbCall
	VerbDo        = layout.VerbDo
	VerbScene     = layout.VerbScene
	VerbLabels    = layout.VerbLabels
	VerbRename    = layout.VerbRename
	VerbDiscovery = layout.VerbDiscovery
	VerbRollout   = layout.VerbRollout
	VerbHealth    = layout.VerbHealth
)

// Verbs lists the request verbs.
var Verbs = []string{VerbBoards, VerbBoard, VerbCall, VerbDo, VerbScene, VerbLabels, VerbRename, VerbDiscovery,
	VerbRollout, VerbHealth, VerbCue}

// request is the union of request bodies; unknown fields are refused per
// verb.
type request struct {
	Transaction json.RawMessage   `json:"transaction"`
	Board       string            `json:"board"`
	Boards      []string          `json:"boards"`
	Group       int               `json:"group"`
	Groups      []int             `json:"groups"`
	All         bool              `json:"all"`
	Method      string            `json:"method"`
	Path        string            `json:"path"`
	Body        json.RawMessage   `json:"body"`
	Selector    *selector         `json:"selector"`
	Action      *fleet.Action     `json:"action"`
	Labels      map[string]string `json:"labels"`
	Name        *string           `json:"name"`
	Slot        *int              `json:"slot"`
	Scene       json.RawMessage   `json:"scene"`
	End         bool              `json:"end"`
}

type selector struct {
	Boards []string          `json:"boards"`
	Groups []int             `json:"groups"`
	Labels map[string]string `json:"labels"`
	All    bool              `json:"all"`
}

// verbFields lists the fields each verb takes (besides transaction).
var verbFields = map[string][]string{
	VerbBoards: {}, VerbBoard: {"board"}, VerbCall: {"board", "method", "path", "body"},
	VerbDo: {"selector", "action"}, VerbScene: {"board", "boards", "group", "groups", "all", "name", "slot", "scene", "end"},
	VerbLabels: {"board", "labels"}, VerbRename: {"board", "name"}, VerbDiscovery: {}, VerbHealth: {},
}

// request runs one bridge request.
func (b *Bridge) request(ctx context.Context, verb string, payload []byte) (any, error) {
	if verb == VerbCue {
		return b.cueRequest(payload) // cue.go
	}
	if verb == VerbRollout {
		if b.o.Rollout == nil {
			return nil, fmt.Errorf("%w: rollouts are not available", ErrUnsupported)
		}
		m, err := cmdbody.Object(payload)
		if err != nil {
			return nil, err
		}
		delete(m, "transaction")
		return b.o.Rollout(ctx, mustJSON(m))
	}
	fields, ok := verbFields[verb]
	if !ok {
		return nil, fmt.Errorf("%w: unknown request %q (%s)", ErrBadCommand, verb, strings.Join(Verbs, ", "))
	}
	m, err := cmdbody.Object(payload)
	if err != nil {
		return nil, err
	}
	if err := cmdbody.OnlyKeys(m, verb, append(slices.Clone(fields), "transaction")...); err != nil {
		return nil, err
	}
	var r request
	if err := json.Unmarshal(mustJSON(m), &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadCommand, verb, err)
	}
	switch verb {
	case VerbBoards:
		return b.boardList(), nil
	case VerbHealth:
		return b.Stats(), nil
	case VerbDiscovery:
		b.forceRetained(b.o.HAPrefix + "/device/")
		return map[string]any{}, nil
	}
	var id string
	if slices.Contains(fields, "board") && r.Board != "" {
		if id, ok = b.resolve(r.Board); !ok {
			if _, err := b.inst().Board(r.Board); err != nil {
				return nil, fmt.Errorf("%w: %q", ErrUnknownBoard, r.Board)
			}
			id = r.Board
		}
	}
	switch verb {
	case VerbBoard:
		if id == "" {
			return nil, fmt.Errorf("%w: board: give board", ErrBadCommand)
		}
		return b.boardEntryOf(id)
	case VerbCall:
		if id == "" {
			return nil, fmt.Errorf("%w: call: give board", ErrBadCommand)
		}
		method := strings.ToUpper(r.Method)
		if method == "" {
			method = http.MethodGet
		}
		if !slices.Contains([]string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}, method) {
			return nil, fmt.Errorf("%w: call: method %q", ErrBadCommand, r.Method)
		}
		if !strings.HasPrefix(r.Path, "/") || len(r.Path) > 512 || strings.ContainsAny(r.Path, " \t\r\n#") {
			return nil, fmt.Errorf("%w: call: path %q", ErrBadCommand, r.Path)
		}
		var body []byte
		if len(r.Body) > 0 && string(r.Body) != "null" {
			body = r.Body
		}
		rep, err := b.inst().Call(ctx, id, method, r.Path, body)
		if err != nil {
			return nil, err
		}
		return rep, rep.Err()
	case VerbDo:
		if r.Selector == nil || r.Action == nil {
			return nil, fmt.Errorf("%w: do: give selector and action", ErrBadCommand)
		}
		sel, err := b.selector(r.Selector.Boards, r.Selector.Groups, r.Selector.Labels, r.Selector.All)
		if err != nil {
			return nil, err
		}
		// Prepared as the fleet's Do will: refused alike, before
		// anything is sent.
		if _, err := fleet.Prepare(sel, *r.Action, time.Time{}); err != nil {
			return nil, err
		}
		res, err := b.inst().Do(ctx, sel, *r.Action)
		if err != nil {
			return nil, err
		}
		return b.namedResults(res), nil
	case VerbScene:
		boards := r.Boards
		if r.Board != "" {
			boards = append(boards, r.Board)
		}
		groups := r.Groups
		if r.Group != 0 {
			groups = append(groups, r.Group)
		}
		sel, err := b.selector(boards, groups, nil, r.All)
		if err != nil {
			return nil, err
		}
		m2 := map[string]json.RawMessage{}
		for _, k := range []string{"name", "slot", "scene", "end"} {
			if v, ok := m[k]; ok {
				m2[k] = v
			}
		}
		a, err := boardAction("scene", mustJSON(m2))
		if err != nil {
			return nil, err
		}
		p, err := prepare(sel, a)
		if err != nil {
			return nil, err
		}
		res, err := b.inst().Do(ctx, sel, actionOf(p.Body))
		if err != nil {
			return nil, err
		}
		return b.namedResults(res), firstResultError(res)
	case VerbLabels:
		if id == "" {
			return nil, fmt.Errorf("%w: labels: give board", ErrBadCommand)
		}
		if _, err := b.inst().SetLabels(id, r.Labels); err != nil {
			return nil, err
		}
		b.snapshot()
		return b.boardEntryOf(id)
	case VerbRename:
		if id == "" || r.Name == nil {
			return nil, fmt.Errorf("%w: rename: give board and name", ErrBadCommand)
		}
		if err := b.Rename(id, *r.Name); err != nil {
			return nil, err
		}
		return b.boardEntryOf(id)
	}
	return nil, fmt.Errorf("%w: %q", ErrBadCommand, verb)
}

// selector turns names into a fleet selector.
func (b *Bridge) selector(boards []string, groups []int, labels map[string]string, all bool) (fleet.Selector, error) {
	sel := fleet.Selector{Groups: groups, Labels: labels, All: all}
	for _, n := range boards {
		id, ok := b.resolve(n)
		if !ok {
			return sel, fmt.Errorf("%w: %q", ErrUnknownBoard, n)
		}
		sel.Boards = append(sel.Boards, id)
	}
	if err := fleet.CheckSelector(sel); err != nil {
		return sel, fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	return sel, nil
}

func (b *Bridge) boardList() []map[string]any {
	if b.clustered() {
		out := []map[string]any{}
		for _, v := range b.inst().Boards(fleet.Filter{}) {
			out = append(out, b.installationEntry(v))
		}
		return out
	}
	b.vmu.Lock()
	defer b.vmu.Unlock()
	out := []map[string]any{}
	for _, id := range sortedIDs(b.boards) {
		out = append(out, boardEntry(b.boards[id], true))
	}
	return out
}

func (b *Bridge) boardEntryOf(id string) (map[string]any, error) {
	if b.clustered() && !b.owned(id) {
		v, err := b.inst().Board(id)
		if err != nil {
			return nil, err
		}
		return b.installationEntry(v), nil
	}
	v, err := b.o.Fleet.Board(id)
	if err != nil {
		return nil, err
	}
	b.vmu.Lock()
	defer b.vmu.Unlock()
	bi := b.boardLocked(id, &v)
	bi.view = v
	return boardEntry(bi, true), nil
}

// Rename gives a board a new topic name: its retained topics move (the old
// ones are cleared on the broker), its discovery is published again, and
// bridge/event tells.
func (b *Bridge) Rename(id, name string) error {
	if b.clustered() && b.peerTaken(name, id) {
		return fmt.Errorf("%w: %q is another gateway's board %s", ErrNameTaken, name, b.peerID(name))
	}
	b.vmu.Lock()
	bi := b.boardLocked(id, nil)
	old, err := b.names.rename(id, name)
	if err != nil {
		b.vmu.Unlock()
		return err
	}
	bi.name = name
	if old != "" && old != name {
		b.moveRetained(b.t.Base+"/"+old+"/", b.t.Base+"/"+name+"/")
	}
	b.publishBoardLocked(bi)
	b.publishListsLocked()
	b.vmu.Unlock()
	b.bridgeEvent("board_renamed", map[string]any{"id": id, "from": old, "to": name})
	return nil
}

// moveRetained moves every retained topic under from to under to.
func (b *Bridge) moveRetained(from, to string) {
	b.rmu.Lock()
	moved := map[string][]byte{}
	for t, p := range b.retained {
		if rest, ok := strings.CutPrefix(t, from); ok && p != nil {
			moved[to+rest] = p
			b.retained[t] = nil
			b.markLocked(t)
		}
	}
	for t, p := range moved {
		b.retained[t] = p
		b.markLocked(t)
	}
	b.rmu.Unlock()
	signal(b.rwake)
}

func (b *Bridge) markLocked(t string) {
	if !b.dirty[t] {
		b.dirty[t] = true
		b.order = append(b.order, t)
	}
}

// forceRetained publishes again every retained topic under prefix.
func (b *Bridge) forceRetained(prefix string) {
	b.rmu.Lock()
	for t, p := range b.retained {
		if strings.HasPrefix(t, prefix) && p != nil {
			b.markLocked(t)
		}
	}
	b.rmu.Unlock()
	signal(b.rwake)
}
