package jsonline

import (
	"strconv"
	"strings"
)

// knownPath returns the constant string for a path the link serves, so
// parsing such a path allocates nothing.
func knownPath(p []byte) (string, bool) {
	switch string(p) {
	case "/info":
		return "/info", true
	case "/restart":
		return "/restart", true
	case "/screen":
		return "/screen", true
	case "/screen/show":
		return "/screen/show", true
	case "/media":
		return "/media", true
	case "/media/info":
		return "/media/info", true
	case "/leds":
		return "/leds", true
	case "/holo":
		return "/holo", true
	case "/holo/motion":
		return "/holo/motion", true
	case "/servos":
		return "/servos", true
	case "/servos/move":
		return "/servos/move", true
	case "/servos/release":
		return "/servos/release", true
	case "/scenes":
		return "/scenes", true
	case "/scenes/scene":
		return "/scenes/scene", true
	case "/scenes/apply":
		return "/scenes/apply", true
	case "/scenes/end":
		return "/scenes/end", true
	case "/settings":
		return "/settings", true
	case "/events":
		return "/events", true
	case "/link":
		return "/link", true
	case "/link/events":
		return "/link/events", true
	case "/time":
		return "/time", true
	}
	return "", false
}

// Served reports whether the link serves method on path. The path may
// carry APIPrefix and a query; both are ignored. Files, uploads, firmware
// updates, the network, web settings and servo calibration and policy are
// HTTP only. GET /time (this firmware's clock-alignment extension) and
// PUT /time (extension clip-sync) are served on both.
func Served(method, path string) bool {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if rest, ok := strings.CutPrefix(path, APIPrefix); ok && strings.HasPrefix(rest, "/") {
		path = rest
	}
	get, put, post, patch, del := method == MethodGet, method == MethodPut,
		method == MethodPost, method == MethodPatch, method == MethodDelete
	switch path {
	case "/info", "/media", "/media/info", "/holo", "/servos", "/scenes", "/events":
		return get
	case "/time":
		return get || put
	case "/restart", "/screen/show", "/holo/motion", "/servos/move", "/servos/release",
		"/scenes/apply", "/scenes/end":
		return post
	case "/screen", "/settings":
		return get || patch || del
	case "/leds", "/link", "/link/events":
		return get || patch
	case "/scenes/scene":
		return put || del
	}
	return false
}

// Served reports whether the link serves r's method and path.
func (r Request) Served() bool { return Served(r.Method, r.Path) }

// Kind is what a line is, judged from its first characters.
type Kind uint8

// Line kinds.
const (
	KindUnknown Kind = iota // none of the others: garbage
	KindEmpty               // nothing but an optional carriage return
	KindEvent               // "!"
	KindReply               // "@", "#" or a digit, from a board
	KindRequest             // "@", "#" or a capital letter, from the host
)

var kindNames = [...]string{"unknown", "empty", "event", "reply", "request"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

func firstByte(line []byte) (byte, bool) {
	line, _ = trimEOL(line)
	if len(line) == 0 {
		return 0, false
	}
	return line[0], true
}

// ClassifyFromBoard sorts a line a board sent to the host by its first
// byte: "!" an event; "@", "#" or a digit a reply.
func ClassifyFromBoard(line []byte) Kind {
	c, ok := firstByte(line)
	switch {
	case !ok:
		return KindEmpty
	case c == '!':
		return KindEvent
	case c == '@' || c == '#' || c >= '0' && c <= '9':
		return KindReply
	}
	return KindUnknown
}

// ClassifyFromHost sorts a line the host sent to a board by its first
// byte: "@", "#" or a capital letter is a request.
func ClassifyFromHost(line []byte) Kind {
	c, ok := firstByte(line)
	switch {
	case !ok:
		return KindEmpty
	case c == '@' || c == '#' || c >= 'A' && c <= 'Z':
		return KindRequest
	}
	return KindUnknown
}

// Classify sorts a line without knowing its direction (a bus monitor): it
// looks past an address and a tag to the first byte of the next part, a
// digit for a reply and a capital letter for a request.
func Classify(line []byte) Kind {
	line, _ = trimEOL(line)
	if len(line) == 0 {
		return KindEmpty
	}
	if line[0] == '!' {
		return KindEvent
	}
	for _, mark := range [...]byte{'@', '#'} {
		if len(line) > 0 && line[0] == mark {
			_, rest, sep := token(line)
			if !sep {
				return KindUnknown
			}
			line = rest
		}
	}
	switch {
	case len(line) == 0:
		return KindUnknown
	case line[0] >= '0' && line[0] <= '9':
		return KindReply
	case line[0] >= 'A' && line[0] <= 'Z':
		return KindRequest
	}
	return KindUnknown
}
