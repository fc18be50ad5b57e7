package fleet

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/holofleet/holofleet/gateway/action"
)

// BoardView is what the fleet knows of one board.
type BoardView struct {
	ID       string            `json:"id"`
	Hostname string            `json:"hostname"`
	Address  int               `json:"address"` // RS485 bus address, 0 when not on a line
	Line     string            `json:"line,omitempty"`
	URL      string            `json:"url,omitempty"` // LAN base URL
	Groups   []int             `json:"groups"`
	Labels   map[string]string `json:"labels"`
	Online   bool              `json:"online"`
	// OfflineReason says why the board is offline ("no reply on line x",
	// "stream closed", "never seen since the gateway started").
	OfflineReason string    `json:"offline_reason,omitempty"`
	Firmware      string    `json:"firmware"`
	LastSeen      time.Time `json:"last_seen"`
	// Transports lists the drivers that reach it now ("rs485:line0", "lan").
	Transports []string `json:"transports"`
	// Clock is the board's clock against the gateway's, from the sharpest
	// place that reaches it now; nil until one measured it in this boot.
	Clock *BoardClock `json:"clock,omitempty"`
	// Gateway names the gateway that owns the board in a cluster of
	// gateways (gateway/cluster); "" on a gateway running alone.
	Gateway string `json:"gateway,omitempty"`
}

// Filter selects boards in listings and event watches; zero values match
// everything.
type Filter struct {
	Group    int               // member of this group
	Labels   map[string]string // has every label with that value
	Firmware string            // runs this firmware version
	Online   *bool
	IDs      []string // one of these boards
}

// Matches reports whether a board with view v passes f, as Boards and
// Watch decide it (a cluster applies the same rule to views it holds).
func (f Filter) Matches(v BoardView) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, v.ID) {
		return false
	}
	if f.Group != 0 && !slices.Contains(v.Groups, f.Group) {
		return false
	}
	if f.Firmware != "" && v.Firmware != f.Firmware {
		return false
	}
	if f.Online != nil && *f.Online != v.Online {
		return false
	}
	for k, want := range f.Labels {
		if got, ok := v.Labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// Selector names the targets of a fleet action: boards by id, groups, a
// label selector, or every board. Group targets go out as one group frame
// per line where the action has a native form.
type Selector struct {
	Boards []string          `json:"boards,omitempty"`
	Groups []int             `json:"groups,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	All    bool              `json:"all,omitempty"`
	// Except leaves these boards out of the boards called one by one
	// even when the rest selects them (a gateway of a cluster acts only
	// on the boards it owns). A group frame on a line still reaches every
	// member on that line.
	Except []string `json:"except,omitempty"`
}

// Action kinds; package action holds the body of each.
const (
	ActionSceneApply = string(action.KindSceneApply) // body: {name} or {slot} or {scene}
	ActionSceneEnd   = string(action.KindSceneEnd)
	ActionLEDs       = string(action.KindLEDs)       // body: PATCH /leds
	ActionScreenShow = string(action.KindScreenShow) // body: POST /screen/show
	ActionScreenOff  = string(action.KindScreenOff)
	ActionHolo       = string(action.KindHolo) // body: POST /holo/motion
)

// Action is one thing to do on the selected boards: its kind and its body
// as JSON, which Prepare decodes (with package action), and when.
type Action struct {
	Kind string          `json:"kind"`
	Body json.RawMessage `json:"body,omitempty"`
	// At is the moment every board is to change (a timed fire, fire.go):
	// at most MaxFireLead ahead; a moment passed (up to MaxFirePast)
	// fires at once. Zero fires now.
	At time.Time `json:"at,omitzero"`
	// Lead, instead of At, is the moment as a lead from when Do takes
	// the action, on the fleet's clock (0-MaxFireLead; 0 fires now).
	Lead time.Duration `json:"lead,omitempty"`
}

// Result is one board's outcome of an action. Boards reached by a group
// frame report Via "group" and no reply (RS485 boards do not answer group
// frames); their state is confirmed by the next poll.
type Result struct {
	Board string `json:"board"`
	Via   string `json:"via"` // "rs485", "lan", "group"
	Reply Reply  `json:"reply"`
	// Error is the board's error code when it refused the action (its
	// reply is 400 or more), else the gateway's reason when the board was
	// not reached; "" when the action was done or sent.
	Error string `json:"error,omitempty"`
	// Message is the board's message when it refused the action.
	Message string `json:"message,omitempty"`
	// Fire and FiredAt, for a timed fire, say how the board was fired
	// (FireLine, FireBoard, FireGateway) and when the gateway knows it
	// changed (see FireChange); empty for a fire now or a board that
	// failed.
	Fire    string    `json:"fire,omitempty"`
	FiredAt time.Time `json:"fired_at,omitzero"`
}

// Event types in the fleet stream.
const (
	EventHappening = "happening"
	EventState     = "state"
	EventOnline    = "online"
	EventOffline   = "offline"
	EventRestarted = "restarted"
)

// Event is one entry of the normalised stream. N numbers the fleet's
// events in order; per board, events keep the board's order.
type Event struct {
	N     uint64          `json:"n"`
	Board string          `json:"board"`
	Type  string          `json:"type"`
	Kind  string          `json:"kind,omitempty"` // event kind for happenings and states
	Seq   uint16          `json:"seq,omitempty"`  // happenings: the board's seq
	Data  json.RawMessage `json:"data,omitempty"`
	// Reason says why a board went offline.
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

// Service is what the fleet API, the MQTT bridge and rollouts use.
type Service interface {
	Boards(f Filter) []BoardView
	Board(id string) (BoardView, error)
	SetLabels(id string, labels map[string]string) (BoardView, error)
	// Call runs an API request on one board by the transport that fits
	// (the line for paths the link serves when the board is on one, else
	// the LAN) and returns the board's reply as it was.
	Call(ctx context.Context, id, method, path string, body []byte) (Reply, error)
	// Do runs an action on the selected boards.
	Do(ctx context.Context, sel Selector, a Action) ([]Result, error)
	// Watch streams events matching f numbered after after: first the
	// buffered ones (after = 0: from the first buffered; Live: none),
	// then new ones. The channel closes when ctx ends
	// or the watcher falls too far behind (Dropped tells).
	Watch(ctx context.Context, f Filter, after uint64) *Watcher
}

// Watcher is one subscription to the fleet's events.
type Watcher struct {
	C <-chan Event
	// Dropped reports how many events this watcher lost by falling
	// behind (then C is closed).
	Dropped func() uint64
}
