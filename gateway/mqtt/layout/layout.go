// Package layout is the MQTT topic layout of holofleet: the two roots (the
// base, default "holo", and Home Assistant's discovery prefix), the levels
// under the base, the board names that may stand in topics, the request
// verbs and rollout actions of bridge/request/<verb>, and the names of
// every topic. The bridge (gateway/mqtt) publishes and subscribes by it;
// the broker's policy (gateway/mqtt/policy) decides access by it; Home
// Assistant's discovery (gateway/mqtt/homeassistant) names its topics by
// it. gateway/mqtt's package doc has the table of topics.
package layout

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Defaults of the topic roots.
const (
	DefaultBase     = "holo"
	DefaultHAPrefix = "homeassistant"
)

// ErrBadName: a board name or topic root is not usable in topics.
var ErrBadName = errors.New("mqtt: bad name")

// Topic levels under the base.
const (
	LevelBridge   = "bridge"
	LevelGroup    = "group"
	LevelSet      = "set"
	LevelEvent    = "event"
	LevelRequest  = "request"
	LevelResponse = "response"
	LevelAvail    = "availability"
	// LevelUpdate is the firmware state the HA update entity reads.
	LevelUpdate = "update"
)

// Request verbs on bridge/request/<verb>.
const (
	VerbBoards    = "boards"    // {} -> every board
	VerbBoard     = "board"     // {board} -> one board
	VerbCall      = "call"      // {board, method, path, body} -> {status, body}
	VerbDo        = "do"        // {selector, action} -> results
	VerbScene     = "scene"     // {board|boards|group|groups|all, name|slot|scene|end} -> results
	VerbLabels    = "labels"    // {board, labels} -> the board
	VerbRename    = "rename"    // {board, name} -> the board
	VerbDiscovery = "discovery" // {} -> publishes HA discovery again
	VerbRollout   = "rollout"   // handed to the bridge's Options.Rollout
	VerbHealth    = "health"    // {} -> the bridge's counters
	VerbCue       = "cue"       // {list, op, cue} -> the cue list's state (gateway/mqtt/cue.go)
)

// Rollout request actions (the "action" of a rollout request).
const (
	RolloutCreate = "create"  // {plan} -> the rollout's status
	RolloutDryRun = "dry_run" // {plan} -> {waves, refused}
	RolloutGet    = "get"     // {id} -> status
	RolloutBoards = "boards"  // {id} -> every board with its timeline
	RolloutList   = "list"    // {} -> every rollout, newest first
	RolloutPause  = "pause"   // {id, reason}
	RolloutResume = "resume"  // {id}
	RolloutAbort  = "abort"   // {id, reason}
	RolloutRevert = "revert"  // {id, reason}
)

// MaxName is the longest board name, in bytes.
const MaxName = 64

// ValidName reports whether s may name a board in topics: 1-64 bytes of
// UTF-8, no MQTT wildcards (+ #), no level separator, no leading $, no
// control characters or spaces, and not a reserved first level (bridge,
// group).
func ValidName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrBadName)
	case len(s) > MaxName:
		return fmt.Errorf("%w: %q is longer than %d bytes", ErrBadName, s, MaxName)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: not UTF-8", ErrBadName)
	case s[0] == '$':
		return fmt.Errorf("%w: %q begins with $", ErrBadName, s)
	case s == LevelBridge || s == LevelGroup:
		return fmt.Errorf("%w: %q is reserved", ErrBadName, s)
	}
	for _, r := range s {
		if r == '+' || r == '#' || r == '/' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %q holds %q", ErrBadName, s, r)
		}
	}
	return nil
}

// ValidRoot reports whether s may be a topic root (the base or the HA
// prefix): levels of ValidName's characters, no empty level.
func ValidRoot(s string) error {
	if s == "" || s[0] == '$' || strings.ContainsAny(s, "+#") {
		return fmt.Errorf("%w: topic root %q", ErrBadName, s)
	}
	for l := range strings.SplitSeq(s, "/") {
		if l == "" {
			return fmt.Errorf("%w: topic root %q has an empty level", ErrBadName, s)
		}
	}
	return nil
}

// DefaultName makes a valid name from a hostname, or returns "".
func DefaultName(host string) string {
	var b strings.Builder
	for _, r := range host {
		switch {
		case r == '+' || r == '#' || r == '/' || unicode.IsControl(r) || unicode.IsSpace(r):
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	s := strings.TrimLeft(b.String(), "$")
	if len(s) > MaxName {
		s = s[:MaxName]
	}
	if ValidName(s) != nil {
		return ""
	}
	return s
}

// ObjectID makes an HA object id ([a-zA-Z0-9_-]) from s.
func ObjectID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Topics names the bridge's topics. Gateway is the gateway's name when
// the bridge is one of a cluster's ("" when the gateway runs alone).
type Topics struct{ Base, HA, Gateway string }

// LevelGateway holds each gateway's own bridge topics in a cluster:
// <base>/bridge/gateway/<name>/<leaf>.
const LevelGateway = "gateway"

// Own is one of this bridge's own topics: bridge/<leaf> alone,
// bridge/gateway/<name>/<leaf> in a cluster.
func (t Topics) Own(leaf string) string {
	if t.Gateway == "" {
		return t.Bridge(leaf)
	}
	return t.Base + "/" + LevelBridge + "/" + LevelGateway + "/" + t.Gateway + "/" + leaf
}

// PeerFilter matches every gateway's own topic leaf in a cluster.
func (t Topics) PeerFilter(leaf string) string {
	return t.Base + "/" + LevelBridge + "/" + LevelGateway + "/+/" + leaf
}

// PeerOf returns the gateway and leaf of a gateway's own topic.
func (t Topics) PeerOf(topic string) (gw, leaf string, ok bool) {
	rest, ok := strings.CutPrefix(topic, t.Base+"/"+LevelBridge+"/"+LevelGateway+"/")
	if !ok {
		return "", "", false
	}
	gw, leaf, ok = strings.Cut(rest, "/")
	if !ok || gw == "" || strings.Contains(leaf, "/") {
		return "", "", false
	}
	return gw, leaf, true
}

// GatewayDiscovery is the HA device of gateway gw's bridge.
func (t Topics) GatewayDiscovery(gw string) string {
	return t.HA + "/device/" + GatewayDevice(gw) + "/config"
}

// GatewayDevice is the HA device identifier of gateway gw's bridge
// ("holo-gw_" never begins a board's, which is "holo_<id>").
func GatewayDevice(gw string) string { return ObjectID("holo-gw_" + gw) }

// Bridge is <base>/bridge/<leaf>.
func (t Topics) Bridge(leaf string) string { return t.Base + "/bridge/" + leaf }

// Board is <base>/<name>/<leaf>: a board's state, availability, update.
func (t Topics) Board(name, leaf string) string { return t.Base + "/" + name + "/" + leaf }

// Event is <base>/<name>/event/<kind>: a board's happenings.
func (t Topics) Event(name, kind string) string { return t.Base + "/" + name + "/event/" + kind }

// Response is <base>/bridge/response/<verb>.
func (t Topics) Response(verb string) string { return t.Base + "/bridge/response/" + verb }

// Discovery is the HA device discovery topic of a board.
func (t Topics) Discovery(boardID string) string {
	return t.HA + "/device/" + ObjectID("holo_"+boardID) + "/config"
}

// HAStatus is <ha>/status, where Home Assistant says it (re)started.
func (t Topics) HAStatus() string { return t.HA + "/status" }

// SetFilter matches every board's set topics.
func (t Topics) SetFilter() string { return t.Base + "/+/set/+" }

// GroupFilter matches every group's set topics.
func (t Topics) GroupFilter() string { return t.Base + "/group/+/set/+" }

// RequestFilter matches every request topic.
func (t Topics) RequestFilter() string { return t.Base + "/bridge/request/+" }

// BoardSet is <base>/<name>/set/<res>.
func (t Topics) BoardSet(name, res string) string { return t.Base + "/" + name + "/set/" + res }

// RootsOrDefault fills empty topic roots with the defaults.
func RootsOrDefault(base, haPrefix string) (string, string) {
	if base == "" {
		base = DefaultBase
	}
	if haPrefix == "" {
		haPrefix = DefaultHAPrefix
	}
	return base, haPrefix
}

// CheckRoots refuses a topic root the bridge cannot use, naming its flag;
// the error wraps ErrBadName.
func CheckRoots(base, haPrefix string) error {
	if err := ValidRoot(base); err != nil {
		return fmt.Errorf("--mqtt-base: %w", err)
	}
	if err := ValidRoot(haPrefix); err != nil {
		return fmt.Errorf("--ha-prefix: %w", err)
	}
	return nil
}
