package auth

import (
	"fmt"
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
	case ResBoards, ResEvents, ResRollouts, ResArtifacts, ResChannels, ResDiscovery, ResCluster:
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
	case ResDiscovery:
		if a.Verb == VerbUpdate { // publish it again (HA's birth message)
			return RoleOperator, what
		}
	case ResBoardAPI:
		if a.Verb == VerbCall {
			return callNeed(a.Method, a.Path)
		}
	case ResRollouts:
		switch a.Verb {
		case VerbHalt:
			return RoleOperator, what
		case VerbCreate, VerbUpdate, VerbDelete, VerbAct:
			return RoleAdmin, what
		}
	case ResArtifacts, ResChannels, ResTokens, ResBridge, ResCluster:
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
	case ResMetrics, ResSelf:
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

// callNeed is the role a raw board call needs.
func callNeed(method, p string) (Role, string) {
	method = strings.ToUpper(method)
	p = cleanBoardPath(p)
	what := fmt.Sprintf("call %s %s", method, p)
	if p == "" {
		return RoleNone, what + ": bad path"
	}
	if readMethod(method) {
		if matchAny(adminReadPaths, p) {
			return RoleAdmin, what
		}
		return RoleOperator, what
	}
	if matchAny(showPaths, p) {
		return RoleOperator, what
	}
	return RoleAdmin, what
}

// cleanBoardPath strips the query and an "/api/v1" prefix, and cleans the
// path so that "/leds/../ota/pull" cannot pass as a show path. It returns
// "" for a path that is not absolute.
func cleanBoardPath(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	p = path.Clean(p)
	if rest, ok := strings.CutPrefix(p, "/api/v1"); ok && (rest == "" || rest[0] == '/') {
		p = rest
		if p == "" {
			p = "/"
		}
	}
	return p
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
