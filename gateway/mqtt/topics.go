package mqtt

import (
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

// Topic levels under the base.
const (
	levelBridge   = "bridge"
	levelGroup    = "group"
	levelSet      = "set"
	levelEvent    = "event"
	levelRequest  = "request"
	levelResponse = "response"
	levelAvail    = "availability"
	// levelUpdate is the firmware state the HA update entity reads.
	levelUpdate = "update"
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
	case s == levelBridge || s == levelGroup:
		return fmt.Errorf("%w: %q is reserved", ErrBadName, s)
	}
	for _, r := range s {
		if r == '+' || r == '#' || r == '/' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %q holds %q", ErrBadName, s, r)
		}
	}
	return nil
}

// validRoot reports whether s may be a topic root (the base or the HA
// prefix): levels of ValidName's characters, no empty level.
func validRoot(s string) error {
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

// defaultName makes a valid name from a hostname, or returns "".
func defaultName(host string) string {
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

// objectID makes an HA object id ([a-zA-Z0-9_-]) from s.
func objectID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// topics builds the bridge's topic names. gw is the gateway's name when
// the bridge is one of a cluster's ("" when the gateway runs alone).
type topics struct{ base, ha, gw string }

// levelGateway holds each gateway's own bridge topics in a cluster:
// <base>/bridge/gateway/<name>/<leaf>.
const levelGateway = "gateway"

// own is one of this bridge's own topics: bridge/<leaf> alone,
// bridge/gateway/<name>/<leaf> in a cluster.
func (t topics) own(leaf string) string {
	if t.gw == "" {
		return t.bridge(leaf)
	}
	return t.base + "/" + levelBridge + "/" + levelGateway + "/" + t.gw + "/" + leaf
}

// peerFilter matches every gateway's own topic leaf in a cluster.
func (t topics) peerFilter(leaf string) string {
	return t.base + "/" + levelBridge + "/" + levelGateway + "/+/" + leaf
}

// peerOf returns the gateway and leaf of a gateway's own topic.
func (t topics) peerOf(topic string) (gw, leaf string, ok bool) {
	rest, ok := strings.CutPrefix(topic, t.base+"/"+levelBridge+"/"+levelGateway+"/")
	if !ok {
		return "", "", false
	}
	gw, leaf, ok = strings.Cut(rest, "/")
	if !ok || gw == "" || strings.Contains(leaf, "/") {
		return "", "", false
	}
	return gw, leaf, true
}

// gatewayDiscovery is the HA device of gateway gw's bridge.
func (t topics) gatewayDiscovery(gw string) string {
	return t.ha + "/device/" + gatewayDevice(gw) + "/config"
}

// gatewayDevice is the HA device identifier of gateway gw's bridge
// ("holo-gw_" never begins a board's, which is "holo_<id>").
func gatewayDevice(gw string) string { return objectID("holo-gw_" + gw) }

func (t topics) bridge(leaf string) string      { return t.base + "/bridge/" + leaf }
func (t topics) board(name, leaf string) string { return t.base + "/" + name + "/" + leaf }
func (t topics) event(name, kind string) string { return t.base + "/" + name + "/event/" + kind }
func (t topics) response(verb string) string    { return t.base + "/bridge/response/" + verb }
func (t topics) discovery(boardID string) string {
	return t.ha + "/device/" + objectID("holo_"+boardID) + "/config"
}
func (t topics) haStatus() string                 { return t.ha + "/status" }
func (t topics) setFilter() string                { return t.base + "/+/set/+" }
func (t topics) groupFilter() string              { return t.base + "/group/+/set/+" }
func (t topics) requestFilter() string            { return t.base + "/bridge/request/+" }
func (t topics) boardSet(name, res string) string { return t.base + "/" + name + "/set/" + res }
