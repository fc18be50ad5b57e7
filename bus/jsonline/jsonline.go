package jsonline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/holofleet/holofleet/bus/boardapi"
)

// Limits of the line grammar.
const (
	// MaxLine is the longest request line in bytes, counting the line feed
	// (and the carriage return before it, when sent).
	MaxLine = 1024
	// MaxTag is the longest tag, in characters (all ASCII).
	MaxTag = 16
	// MaxBoard is the highest board address.
	MaxBoard = 223
	// MaxGroup is the highest group number.
	MaxGroup = 31
	// APIPrefix is the HTTP path prefix a request path may carry; parsing
	// removes it.
	APIPrefix = "/api/v1"
)

// Methods accepted on a request line.
const (
	MethodGet    = "GET"
	MethodPut    = "PUT"
	MethodPost   = "POST"
	MethodPatch  = "PATCH"
	MethodDelete = "DELETE"
)

// Errors. The first three are the board API's error values for a request
// line the board refuses; compare with errors.Is, which matches any
// message. The others report lines that are not requests.
var (
	// ErrBadRequest (400 bad_request): no method, no path, bad address or
	// tag, not UTF-8, or a body that is not a JSON object.
	ErrBadRequest = boardapi.ErrBadRequest
	// ErrNotFound (404 not_found): a method or path the link does not serve.
	ErrNotFound = boardapi.ErrNotFound
	// ErrTooLarge (413 too_large): a line over MaxLine bytes.
	ErrTooLarge = boardapi.ErrTooLarge

	// ErrEmpty is an empty line; the board ignores it without a reply.
	ErrEmpty = errorString("jsonline: empty line")
	// ErrBadReply is a line from a board that is not a well-formed reply.
	ErrBadReply = errorString("jsonline: malformed reply")
	// ErrBadEvent is a line from a board that is not a well-formed event.
	ErrBadEvent = errorString("jsonline: malformed event")
)

type errorString string

func errorf(base error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{base}, args...)...)
}

func (e errorString) Error() string { return string(e) }

// AddrKind tells what an address names.
type AddrKind uint8

// Address kinds. The zero Address has kind NoAddr: the line carried none.
const (
	NoAddr AddrKind = iota
	BoardAddr
	GroupAddr
	AllAddr
)

// Address is the @ part of a line. N is the board (1-223) or group (1-31)
// number; it is 0 for NoAddr and AllAddr.
type Address struct {
	Kind AddrKind
	N    uint8
}

// Board returns the address of board n.
func Board(n uint8) Address { return Address{BoardAddr, n} }

// Group returns the address of group n.
func Group(n uint8) Address { return Address{GroupAddr, n} }

// All returns the address of every board.
func All() Address { return Address{Kind: AllAddr} }

// IsSet reports whether the line carried an address.
func (a Address) IsSet() bool { return a.Kind != NoAddr }

// Valid reports whether a is absent or names a board, group or every board
// within range.
func (a Address) Valid() bool {
	switch a.Kind {
	case NoAddr, AllAddr:
		return a.N == 0
	case BoardAddr:
		return a.N >= 1 && a.N <= MaxBoard
	case GroupAddr:
		return a.N >= 1 && a.N <= MaxGroup
	}
	return false
}

// String returns the address as written on a line ("@5", "@g2", "@*"), or
// "" when absent.
func (a Address) String() string { return string(a.append(nil)) }

func (a Address) append(b []byte) []byte {
	switch a.Kind {
	case BoardAddr:
		b = append(b, '@')
		return strconv.AppendUint(b, uint64(a.N), 10)
	case GroupAddr:
		b = append(b, '@', 'g')
		return strconv.AppendUint(b, uint64(a.N), 10)
	case AllAddr:
		return append(b, '@', '*')
	}
	return b
}

// Native returns the address byte native frames use: the board number,
// 223 + the group number, or 0 for every board. ok is false when a is
// absent or out of range.
func (a Address) Native() (b byte, ok bool) {
	if !a.Valid() {
		return 0, false
	}
	switch a.Kind {
	case BoardAddr:
		return a.N, true
	case GroupAddr:
		return MaxBoard + a.N, true
	case AllAddr:
		return 0, true
	}
	return 0, false
}

// AddressFromNative is the inverse of Native; 255 gives the zero Address.
func AddressFromNative(b byte) Address {
	switch {
	case b == 0:
		return All()
	case b <= MaxBoard:
		return Board(b)
	case b < 255:
		return Group(b - MaxBoard)
	}
	return Address{}
}

// Request is one request line.
type Request struct {
	Addr   Address
	Tag    string // "" when absent
	Method string // one of the Method constants
	Path   string // without APIPrefix, with its query
	Body   json.RawMessage
}

// Reply is one reply line.
type Reply struct {
	Addr    Address // the answering board, when the request was addressed
	Tag     string
	Status  int // three-digit HTTP status
	Pending int // happenings not yet given to the host
	Body    json.RawMessage
}

// trimEOL removes the line feed and a carriage return before it, and
// returns the line's length on the wire counting a line feed.
func trimEOL(line []byte) ([]byte, int) {
	wire := len(line)
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	} else {
		wire++
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, wire
}

func skipSpaces(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

func trimRightSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// token splits b at its first space: the token and what follows the
// spaces after it. sep reports whether a space was found.
func token(b []byte) (tok, rest []byte, sep bool) {
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil, false
	}
	return b[:i], skipSpaces(b[i+1:]), true
}

// parseNumber reads a decimal without leading zeros, at most max.
func parseNumber(b []byte, max int) (int, bool) {
	if len(b) == 0 || len(b) > 6 || b[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= max
}

func parseAddress(tok []byte) (Address, bool) {
	switch {
	case len(tok) == 1 && tok[0] == '*':
		return All(), true
	case len(tok) > 0 && tok[0] == 'g':
		n, ok := parseNumber(tok[1:], MaxGroup)
		return Group(uint8(n)), ok
	}
	n, ok := parseNumber(tok, MaxBoard)
	return Board(uint8(n)), ok
}

func validTag(t []byte) bool {
	if len(t) == 0 || len(t) > MaxTag {
		return false
	}
	for _, c := range t {
		if !tagChar(c) {
			return false
		}
	}
	return true
}

func tagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// head reads the optional address and tag. It returns what it could read
// even on error, so that an error reply can carry them.
func head(line []byte) (addr Address, tag []byte, rest []byte, err error) {
	rest = line
	if len(rest) > 0 && rest[0] == '@' {
		tok, r, sep := token(rest[1:])
		a, ok := parseAddress(tok)
		if !ok {
			return Address{}, nil, nil, boardapi.Errorf(ErrBadRequest, "bad address %q", clip(tok))
		}
		addr = a
		if !sep {
			return addr, nil, nil, boardapi.Errorf(ErrBadRequest, "nothing after the address")
		}
		rest = r
	}
	if len(rest) > 0 && rest[0] == '#' {
		tok, r, sep := token(rest[1:])
		if !validTag(tok) {
			return addr, nil, nil, boardapi.Errorf(ErrBadRequest, "bad tag %q", clip(tok))
		}
		tag = tok
		if !sep {
			return addr, tag, nil, boardapi.Errorf(ErrBadRequest, "nothing after the tag")
		}
		rest = r
	}
	return addr, tag, rest, nil
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	if len(b) > 24 {
		return b[:24]
	}
	return b
}

func method(tok []byte) (string, bool) {
	switch string(tok) {
	case MethodGet:
		return MethodGet, true
	case MethodPut:
		return MethodPut, true
	case MethodPost:
		return MethodPost, true
	case MethodPatch:
		return MethodPatch, true
	case MethodDelete:
		return MethodDelete, true
	}
	return "", false
}

func allCapitals(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// validPath reports whether p starts with a slash and holds no space or
// control character.
func validPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for _, c := range p {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// stripPrefix removes a leading /api/v1 followed by the end, a slash or a
// query; "/api/v1" alone becomes "/".
func stripPrefix(p []byte) []byte {
	if !bytes.HasPrefix(p, []byte(APIPrefix)) {
		return p
	}
	r := p[len(APIPrefix):]
	switch {
	case len(r) == 0:
		return p[:1]
	case r[0] == '/':
		return r
	case r[0] == '?':
		return append(p[:1:1], r...) // rare: "/api/v1?x" allocates "/?x"
	}
	return p
}

// ParseHead reads only the address and tag of a request line, for
// answering a line that cannot be parsed whole (a line over MaxLine, of
// which only the start was kept). Parts that cannot be read are left zero.
func ParseHead(line []byte) Request {
	var r Request
	line, _ = trimEOL(line)
	addr, tag, _, _ := head(line)
	r.Addr = addr
	if tag != nil {
		r.Tag = string(tag)
	}
	return r
}

// ParseRequest parses one request line, with or without its line feed. On
// error the returned Request holds the address and tag when they could be
// read. Body aliases line.
func ParseRequest(line []byte) (Request, error) {
	var r Request
	line, wire := trimEOL(line)
	if wire > MaxLine {
		r = ParseHead(line)
		return r, boardapi.Errorf(ErrTooLarge, "line of %d bytes, at most %d", wire, MaxLine)
	}
	if len(line) == 0 {
		return r, ErrEmpty
	}
	addr, tag, rest, err := head(line)
	r.Addr = addr
	if tag != nil {
		r.Tag = string(tag)
	}
	if err != nil {
		return r, err
	}
	if bytes.IndexByte(rest, '\n') >= 0 {
		return r, boardapi.Errorf(ErrBadRequest, "line feed inside the line")
	}
	if !utf8.Valid(rest) {
		return r, boardapi.Errorf(ErrBadRequest, "line is not UTF-8")
	}
	tok, rest, sep := token(rest)
	m, ok := method(tok)
	if !ok {
		if allCapitals(tok) {
			return r, boardapi.Errorf(ErrNotFound, "method %s is not served over the link", clip(tok))
		}
		return r, boardapi.Errorf(ErrBadRequest, "no method")
	}
	r.Method = m
	if !sep || len(rest) == 0 {
		return r, boardapi.Errorf(ErrBadRequest, "no path")
	}
	p, rest, _ := token(rest)
	if !validPath(p) {
		return r, boardapi.Errorf(ErrBadRequest, "path must start with /")
	}
	p = stripPrefix(p)
	if s, ok := knownPath(p); ok {
		r.Path = s
	} else {
		r.Path = string(p)
	}
	body := trimRightSpace(rest)
	if len(body) > 0 {
		if body[0] != '{' || !json.Valid(body) {
			return r, boardapi.Errorf(ErrBadRequest, "body is not a JSON object")
		}
		r.Body = body
	}
	return r, nil
}

// Validate reports whether r can be written as a request line that parses
// back to r.
func (r Request) Validate() error {
	if !r.Addr.Valid() {
		return boardapi.Errorf(ErrBadRequest, "bad address")
	}
	if r.Tag != "" && !validTag([]byte(r.Tag)) {
		return boardapi.Errorf(ErrBadRequest, "bad tag")
	}
	if _, ok := method([]byte(r.Method)); !ok {
		return boardapi.Errorf(ErrBadRequest, "bad method %q", r.Method)
	}
	if !validPath([]byte(r.Path)) || !utf8.ValidString(r.Path) {
		return boardapi.Errorf(ErrBadRequest, "bad path %q", r.Path)
	}
	if len(r.Body) > 0 {
		b := trimRightSpace(r.Body)
		if len(b) == 0 || b[0] != '{' || !json.Valid(b) || bytes.ContainsAny(b, "\n\r") {
			return boardapi.Errorf(ErrBadRequest, "body is not a one-line JSON object")
		}
	}
	return nil
}

func appendHead(dst []byte, a Address, tag string) []byte {
	if a.IsSet() {
		dst = a.append(dst)
		dst = append(dst, ' ')
	}
	if tag != "" {
		dst = append(dst, '#')
		dst = append(dst, tag...)
		dst = append(dst, ' ')
	}
	return dst
}

// AppendRequest appends r as a line, line feed included. It writes the
// fields as they are; check them first with Validate when they come from
// elsewhere than ParseRequest.
func AppendRequest(dst []byte, r Request) []byte {
	dst = appendHead(dst, r.Addr, r.Tag)
	dst = append(dst, r.Method...)
	dst = append(dst, ' ')
	dst = append(dst, r.Path...)
	if len(r.Body) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, r.Body...)
	}
	return append(dst, '\n')
}

// maxPending bounds the pending count a reply may carry.
const maxPending = 65535

// ParseReply parses one reply line, with or without its line feed. The
// address, when present, must be a board. Body aliases line.
func ParseReply(line []byte) (Reply, error) {
	var r Reply
	line, _ = trimEOL(line)
	if len(line) == 0 {
		return r, ErrEmpty
	}
	if !utf8.Valid(line) || bytes.IndexByte(line, '\n') >= 0 {
		return r, errorf(ErrBadReply, "not one UTF-8 line")
	}
	addr, tag, rest, err := head(line)
	if err != nil {
		return r, errorf(ErrBadReply, "%s", boardapi.Wrap(err).Message)
	}
	if addr.IsSet() && addr.Kind != BoardAddr {
		return r, errorf(ErrBadReply, "address %s is not a board", addr)
	}
	r.Addr = addr
	if tag != nil {
		r.Tag = string(tag)
	}
	tok, rest, _ := token(rest)
	if len(tok) != 3 || tok[0] < '1' || tok[0] > '5' || !digits(tok) {
		return r, errorf(ErrBadReply, "no three-digit status")
	}
	r.Status = int(tok[0]-'0')*100 + int(tok[1]-'0')*10 + int(tok[2]-'0')
	if len(rest) > 0 && rest[0] == '+' {
		tok, rest, _ = token(rest)
		n, ok := parseNumber(tok[1:], maxPending)
		if !ok {
			return r, errorf(ErrBadReply, "bad pending count %q", clip(tok))
		}
		r.Pending = n
	}
	body := trimRightSpace(rest)
	if len(body) > 0 {
		if r.Status == 204 {
			return r, errorf(ErrBadReply, "204 with a body")
		}
		if (body[0] != '{' && body[0] != '[') || !json.Valid(body) {
			return r, errorf(ErrBadReply, "body is not a JSON object or array")
		}
		r.Body = body
	}
	return r, nil
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// AppendReply appends r as a line, line feed included: "+pending" only
// when Pending > 0, no body with status 204.
func AppendReply(dst []byte, r Reply) []byte {
	dst = appendHead(dst, r.Addr, r.Tag)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	if r.Pending > 0 {
		dst = append(dst, ' ', '+')
		dst = strconv.AppendInt(dst, int64(r.Pending), 10)
	}
	if len(r.Body) > 0 && r.Status != 204 {
		dst = append(dst, ' ')
		dst = append(dst, r.Body...)
	}
	return append(dst, '\n')
}

// ParseEvent parses an event line ("! " and a JSON object), with or
// without its line feed, and returns the object. It aliases line.
func ParseEvent(line []byte) (json.RawMessage, error) {
	line, _ = trimEOL(line)
	if len(line) == 0 {
		return nil, ErrEmpty
	}
	if line[0] != '!' {
		return nil, errorf(ErrBadEvent, "does not start with !")
	}
	body := trimRightSpace(skipSpaces(line[1:]))
	if len(body) == 0 || body[0] != '{' || !utf8.Valid(body) || bytes.IndexByte(body, '\n') >= 0 || !json.Valid(body) {
		return nil, errorf(ErrBadEvent, "body is not a JSON object")
	}
	return body, nil
}

// AppendEvent appends an event line carrying body, line feed included.
func AppendEvent(dst []byte, body json.RawMessage) []byte {
	dst = append(dst, '!', ' ')
	dst = append(dst, body...)
	return append(dst, '\n')
}

// ReplyFor starts the reply to req from the board whose own address is
// self: it carries self when req was addressed, and req's tag. A zero
// self keeps req's address (for tests and host-side tools).
func ReplyFor(req Request, self Address) Reply {
	r := Reply{Tag: req.Tag}
	if req.Addr.IsSet() {
		r.Addr = self
		if !self.IsSet() {
			r.Addr = req.Addr
		}
	}
	return r
}

// ErrorReply builds the reply line for a request that failed with err:
// the error's status and its {"error","message"} body. Errors that are not
// board API errors become 500 internal.
func ErrorReply(req Request, self Address, err error) Reply {
	e := boardapi.Wrap(err)
	r := ReplyFor(req, self)
	r.Status = e.Status
	r.Body = ErrorBody(e)
	return r
}

// ErrorBody returns the {"error","message"} object for err.
func ErrorBody(err error) json.RawMessage {
	e := boardapi.Wrap(err)
	b, mErr := json.Marshal(e)
	if mErr != nil { // cannot happen: two strings
		return json.RawMessage(`{"error":"internal","message":""}`)
	}
	return b
}
