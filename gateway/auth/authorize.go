package auth

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// The one authorisation decision.
//
// Every way into the gateway (REST, gRPC, MQTT, OSC, the console, raw
// board calls) describes what a caller wants as Attributes and asks
// Authorize. The answer depends only on the attributes: who (the
// identity's role), the verb, the resource and, for raw board calls, the
// board API method and path. Surfaces never compare roles themselves, so
// one table below is the whole policy, and it is table-tested.
//
// The model is the Kubernetes API server's authorizer: attributes in,
// allow or deny with a reason out. What a call then did is recorded by
// the audit log from the same attributes.

// Verb is what a caller wants to do to a resource.
type Verb string

// Verbs.
const (
	VerbRead   Verb = "read"   // list, get
	VerbWatch  Verb = "watch"  // an event or rollout stream
	VerbCreate Verb = "create" // make something new (token, rollout, artifact)
	VerbUpdate Verb = "update" // change something that exists (labels, channel, pause...)
	VerbDelete Verb = "delete" // remove (token, artifact, channel)
	VerbAct    Verb = "act"    // a show action on boards (leds, screen, holo, scene...)
	VerbCall   Verb = "call"   // a raw call of the board API (Method and Path say which)
	// VerbHalt stops something in progress without changing what it
	// installs: pausing or aborting a rollout (the brakes). Operators may
	// stop harm; resuming or reverting is VerbUpdate (admin).
	VerbHalt Verb = "halt"
)

// Resource is the kind of thing a verb applies to.
type Resource string

// Resources.
const (
	ResBoards    Resource = "boards"    // the fleet's boards, their labels
	ResEvents    Resource = "events"    // the fleet's event stream
	ResActions   Resource = "actions"   // show actions on boards or groups
	ResBoardAPI  Resource = "board_api" // raw board calls (with Method and Path)
	ResArtifacts Resource = "artifacts" // firmware images
	ResChannels  Resource = "channels"  // release channels
	ResRollouts  Resource = "rollouts"  // staged firmware rollouts
	ResTokens    Resource = "tokens"    // bearer tokens
	ResAudit     Resource = "audit"     // the audit log
	ResSelf      Resource = "self"      // the caller's own identity (whoami)
	ResMetrics   Resource = "metrics"   // /metrics
	ResBridge    Resource = "bridge"    // MQTT bridge requests not covered above, and their traffic
	ResDiscovery Resource = "discovery" // Home Assistant discovery of the boards
	ResCluster   Resource = "cluster"   // the cluster of gateways (its members, removing a dead one)
	ResSchema    Resource = "schema"    // the API's description served by gRPC reflection
	// ResCues are the cue lists (gateway/cue): viewers read and watch
	// them, operators run them (VerbAct: GO, STOP, BACK, jump, standby,
	// timecode), admins edit them (create, update, delete).
	ResCues Resource = "cues"
	// ResInstallation is the installation as code: its revisions, plans,
	// status (read) and applies and rollbacks (create, update).
	ResInstallation Resource = "installation"
	ResDMX          Resource = "dmx" // the DMX patch and sources (reading them; changing the patch is admin's)
)

// Surface names the way a call came in; recorded, never decisive.
type Surface string

// Surfaces.
const (
	SurfaceREST    Surface = "rest"
	SurfaceGRPC    Surface = "grpc"
	SurfaceMQTT    Surface = "mqtt"
	SurfaceOSC     Surface = "osc"
	SurfaceConsole Surface = "console"
)

// Attributes describe one request for the decision and the audit log.
type Attributes struct {
	Who      Identity
	Surface  Surface
	Verb     Verb
	Resource Resource
	// Boards are the target boards when the caller named them.
	Boards []string
	// Selector describes targets chosen by selector (groups, labels).
	Selector string
	// Kind is the action's kind (leds, screen, scene ...) for VerbAct.
	Kind string
	// Method and Path are the board API request of a raw call
	// (ResBoardAPI), Path as the board API names it ("/leds", "/ota/pull";
	// an "/api/v1" prefix is ignored).
	Method string
	Path   string
	// Name is the object a request names besides boards: a token's
	// name, an artifact's SHA-256, a channel, a rollout id.
	Name string

	// What follows is recorded by the audit log, never decisive.

	// Operation is the surface's own name of the request (the gRPC
	// method "DoAction", an MQTT topic, an OSC address).
	Operation string
	// Client is the caller's address (host:port) as the surface saw it.
	Client string
	// Agent is the client program (User-Agent) when the surface knows it.
	Agent string
	// RequestID ties the record to the request log.
	RequestID string
}

// Decision is Authorize's answer.
type Decision struct {
	Allowed bool
	// Need is the least role that is allowed.
	Need Role
	// Reason says why, for the caller and the audit log.
	Reason string
}

// Err returns nil when the decision allows, else ErrForbidden wrapped
// with the reason.
func (d Decision) Err() error {
	if d.Allowed {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrForbidden, d.Reason)
}

// Changing reports whether the attributes describe a request that may
// change something (what the audit log records).
func (a Attributes) Changing() bool {
	switch a.Verb {
	case VerbRead, VerbWatch:
		return false
	case VerbCall:
		return !readMethod(a.Method)
	}
	return true
}

// Authorize decides whether a.Who may do a.Verb to a.Resource.
func Authorize(a Attributes) Decision {
	need, why := Need(a)
	d := Decision{Need: need}
	switch {
	case need == RoleNone:
		d.Reason = why
	case a.Who.Role.Allows(need):
		d.Allowed = true
		d.Reason = fmt.Sprintf("%s %q may %s", a.Who.Role, a.Who.Name, why)
	default:
		d.Reason = fmt.Sprintf("%s needs %v; %q is %v", why, need, a.Who.Name, a.Who.Role)
	}
	return d
}

// Need returns the least role the attributes need and a short description
// of the request. RoleNone means no role may do it (unknown verb or
// resource): the policy denies what it does not name.
func Need(a Attributes) (Role, string) {
	what := fmt.Sprintf("%s %s", a.Verb, a.Resource)
	switch a.Resource {
	case ResBoards, ResEvents, ResRollouts, ResArtifacts, ResChannels, ResDiscovery, ResCluster, ResInstallation, ResCues, ResDMX:
		switch a.Verb {
		case VerbRead, VerbWatch:
			return RoleViewer, what
		}
	}
	switch a.Resource {
	case ResBoards:
		if a.Verb == VerbUpdate { // labels
			return RoleOperator, what
		}
	case ResActions:
		if a.Verb == VerbAct {
			return RoleOperator, what
		}
	case ResCues:
		switch a.Verb {
		case VerbAct:
			return RoleOperator, what
		case VerbCreate, VerbUpdate, VerbDelete:
			return RoleAdmin, what
		}
	case ResDiscovery:
		if a.Verb == VerbUpdate { // publish it again (HA's birth message)
			return RoleOperator, what
		}
	case ResBoardAPI:
		if a.Verb == VerbCall {
			return callNeed(a.Method, a.Path)
		}
	case ResRollouts, ResInstallation:
		switch a.Verb {
		case VerbHalt:
			return RoleOperator, what
		case VerbCreate, VerbUpdate, VerbDelete, VerbAct:
			return RoleAdmin, what
		}
	case ResArtifacts, ResChannels, ResTokens, ResBridge, ResCluster, ResDMX:
		switch a.Verb {
		case VerbCreate, VerbUpdate, VerbDelete, VerbAct:
			return RoleAdmin, what
		}
		if a.Resource == ResTokens && a.Verb == VerbRead {
			return RoleAdmin, what
		}
		// The bridge's request traffic and raw-call replies may carry what
		// only admins may read (a board's network settings).
		if a.Resource == ResBridge && (a.Verb == VerbRead || a.Verb == VerbWatch) {
			return RoleAdmin, what
		}
	case ResAudit:
		if a.Verb == VerbRead || a.Verb == VerbWatch {
			return RoleAdmin, what
		}
	case ResMetrics, ResSelf, ResSchema:
		if a.Verb == VerbRead {
			return RoleViewer, what
		}
	}
	return RoleNone, what + " is not allowed to any role"
}

// showPaths are the board API paths an operator may change through a raw
// call: what a show uses. Everything else that changes a board (OTA,
// /web, /network, /settings, /restart, file writes and deletes, servo
// calibration) is an admin's.
var showPaths = []string{
	"/leds",
	"/screen", "/screen/show",
	"/holo/motion",
	"/servos/move", "/servos/release",
	"/scenes/scene", "/scenes/apply", "/scenes/end",
}

// adminReadPaths are board API paths only an admin may read through a raw
// call: the board's web settings and network, which name networks and
// trusted sites. An operator may read the rest (state, files, scenes).
var adminReadPaths = []string{"/web", "/web/*", "/network", "/network/*"}

// callNeed is the role a raw board call needs. A path that is not
// canonical (CanonicalBoardPath) is allowed to no role.
func callNeed(method, p string) (Role, string) {
	method = strings.ToUpper(method)
	_, route, err := CanonicalBoardPath(p)
	if err != nil {
		return RoleNone, fmt.Sprintf("call %s %q: %v", method, p, err)
	}
	what := fmt.Sprintf("call %s %s", method, route)
	if readMethod(method) {
		if matchAny(adminReadPaths, route) {
			return RoleAdmin, what
		}
		return RoleOperator, what
	}
	if matchAny(showPaths, route) {
		return RoleOperator, what
	}
	return RoleAdmin, what
}

// CanonicalBoardPath is the one reading of a raw board call's path, shared
// by the decision and the transport so that what is authorised is
// exactly what the board routes. The path part (before '?') is
// normalised once as RFC 3986 section 6 does: escapes of unreserved
// characters (letters, digits, '-', '.', '_', '~') and of '/' decoded,
// hex digits upper case, dot segments removed, doubled and trailing
// slashes merged; other escapes (a space, '&', '(' in a file name) stay
// escaped. An "/api/v1" prefix is dropped. The request must already be
// in that form: anything that changes under it (/%77eb, //web, /./web,
// /a/../web, /%2e%2e/web, /web/, /w%65b) is ErrBadPath, as are an
// escaped '%' (double encoding: /%2577eb), a backslash, control
// characters, characters that must be escaped and a fragment.
//
// It returns send, the path to send to the board (the canonical path
// with the query as given, without the prefix), and route, the decoded
// path the policy matches ("/web").
func CanonicalBoardPath(p string) (send, route string, err error) {
	raw, query, hasQuery := strings.Cut(p, "?")
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q %s", ErrBadPath, p, why)
	}
	switch {
	case !strings.HasPrefix(raw, "/"):
		return bad("is not absolute")
	case strings.Contains(p, "#"):
		return bad("has a fragment")
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return bad("has a control character, a backslash or a byte beyond ASCII (escape it)")
		}
	}
	if rest, ok := strings.CutPrefix(raw, "/api/v1"); ok && (rest == "" || rest[0] == '/') {
		raw = rest
		if raw == "" {
			raw = "/"
		}
	}
	var canon strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '%' {
			if !pathChar(c) {
				canon.WriteString(fmt.Sprintf("%%%02X", c))
			} else {
				canon.WriteByte(c)
			}
			continue
		}
		if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
			return bad("has a bad percent-escape")
		}
		d := unhex(raw[i+1])<<4 | unhex(raw[i+2])
		i += 2
		switch {
		case d == '%':
			return bad("escapes a '%' (double encoding)")
		case d < 0x20 || d == 0x7f || d == '\\':
			return bad("escapes a control character or a backslash")
		case unreserved(d) || d == '/':
			canon.WriteByte(d)
		default:
			canon.WriteString(fmt.Sprintf("%%%02X", d))
		}
	}
	c := canon.String()
	if cl := path.Clean(c); cl != c {
		c = cl
	}
	if c != raw {
		return bad(fmt.Sprintf("is %q once normalised; send that", c))
	}
	if route, err = url.PathUnescape(c); err != nil {
		return bad("has a bad percent-escape")
	}
	send = c
	if hasQuery {
		send += "?" + query
	}
	return send, route, nil
}

// unreserved reports RFC 3986's unreserved characters: escaping them
// never changes a URI's meaning, so a canonical path never does.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// pathChar reports the characters a path may hold unescaped: RFC 3986's
// pchar without the escapes, and '/'.
func pathChar(c byte) bool {
	return unreserved(c) || strings.IndexByte("!$&'()*+,;=:@/", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func readMethod(m string) bool {
	switch strings.ToUpper(m) {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}
